package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"

	"github.com/bridged-app/bridged/internal/channel"
)

// serverError is the error whatsmeow's SendMessage returns when WhatsApp
// answers the message with an error code (send.go: "%w %d").
func serverError(code int) error { return fmt.Errorf("%w %d", whatsmeow.ErrServerReturnedError, code) }

// A send WhatsApp refuses with 463 starts the reachout timelock as the
// event does: shown in status until an assumed end, first-contact sends
// refused before they are sent, chats that wrote before let through.
func TestSendRefused463StartsTheTimelock(t *testing.T) {
	eventEnds := restrictNow.Add(72 * time.Hour)
	tests := []struct {
		name     string
		before   string // a timelock payload handled first, "" for none
		to       types.JID
		err      error
		timelock bool      // the timelock is in force afterwards
		until    time.Time // its end
	}{
		{name: "463 to a new contact", to: newContact, err: serverError(463), timelock: true, until: restrictNow.Add(reachoutAssumed)},
		{name: "463 keeps the event's end", before: `{"is_active":true,"time_enforcement_ends":"` + unix(eventEnds) + `"}`,
			to: alicePN, err: serverError(463), timelock: true, until: eventEnds},
		{name: "463 to a group", to: familyChat, err: serverError(463)},
		{name: "another error code", to: newContact, err: serverError(479)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			tc := restrictedClient(t)
			tc.rec.registered[familyChat.String()] = true
			if tt.before != "" {
				tc.handleEvent(timelockEvent(t, tt.before))
			}
			tc.wa.sendErrs = []error{tt.err}
			_, err := tc.Send(ctx, channel.Outgoing{Chat: tt.to.String(), Text: "hello", ID: NewMessageID()})
			if !errors.Is(err, channel.ErrPermanent) || !errors.Is(err, whatsmeow.ErrServerReturnedError) {
				t.Fatalf("send: %v; want a permanent failure that keeps whatsmeow's error", err)
			}
			if named := strings.Contains(err.Error(), "new contacts"); named != tt.timelock {
				t.Errorf("send error %q names the restriction: %v; want %v", err, named, tt.timelock)
			}
			st := tc.Status()
			cond, ok := findCondition(st, condTimelock)
			if ok != tt.timelock {
				t.Fatalf("timelock in force: %v; want %v (%+v)", ok, tt.timelock, st.Conditions)
			}
			if !tt.timelock {
				if st.Health != channel.HealthStable {
					t.Errorf("health %s; want stable", st.Health)
				}
				return
			}
			if st.Health != channel.HealthRestricted || !cond.Until.Equal(tt.until) {
				t.Errorf("health %s, until %s; want restricted until %s", st.Health, cond.Until, tt.until)
			}
			before := len(tc.wa.sentMessages())
			_, err = tc.Send(ctx, channel.Outgoing{Chat: newContact.String(), Text: "again", ID: NewMessageID()})
			if !errors.Is(err, channel.ErrPermanent) || !strings.Contains(err.Error(), "new contacts") || len(tc.wa.sentMessages()) != before {
				t.Errorf("next send to a new contact: %v; want refused before sending, naming the restriction", err)
			}
			if _, err := tc.Send(ctx, channel.Outgoing{Chat: alicePN.String(), Text: "hi", ID: NewMessageID()}); err != nil {
				t.Errorf("send to a chat that wrote before: %v; want it sent", err)
			}
		})
	}
}

// The timelock a refused send started is kept in the device store, ends
// at its assumed end, and is lifted at once by WhatsApp's event.
func TestSendRefused463KeptAcrossRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "whatsapp.db")
	open := func(now time.Time) *testClient { return reopenedClient(t, path, now) }
	first := open(restrictNow)
	first.wa.sendErrs = []error{serverError(463)}
	if _, err := first.Send(ctx, channel.Outgoing{Chat: newContact.String(), Text: "hello", ID: NewMessageID()}); err == nil {
		t.Fatal("send refused with 463: err = nil")
	}
	_ = first.Close()

	second := open(restrictNow.Add(time.Hour))
	if st := second.Status(); st.Health != channel.HealthRestricted {
		t.Fatalf("after a restart: health %s; want restricted", st.Health)
	}
	second.handleEvent(timelockEvent(t, `{"is_active":false}`))
	if st := second.Status(); st.Health != channel.HealthStable {
		t.Errorf("after WhatsApp lifted it: health %s; want stable", st.Health)
	}
	second.wa.sendErrs = []error{serverError(463)}
	_, _ = second.Send(ctx, channel.Outgoing{Chat: newContact.String(), Text: "hello", ID: NewMessageID()})
	_ = second.Close()

	later := open(restrictNow.Add(time.Hour + reachoutAssumed + time.Second))
	if st := later.Status(); st.Health != channel.HealthStable || len(st.Conditions) != 0 {
		t.Errorf("after its assumed end: %s %+v; want stable, no conditions", st.Health, st.Conditions)
	}
}
