package whatsapp

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/bridged-app/bridged/internal/channel"
)

var (
	restrictNow = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	newContact  = types.NewJID("491700000009", types.DefaultUserServer)
)

// historySink is the recorder with the daemon's ContactHistory: chats in
// history wrote before.
type historySink struct {
	*recorder
	history map[string]bool
}

func (h historySink) HasHistory(_ context.Context, chat string) bool { return h.history[chat] }

// restrictedClient is a connected client at restrictNow whose sink knows
// alice (by phone number) wrote before and newContact never did; newContact
// is registered, as a chat added by number would be.
func restrictedClient(t *testing.T) *testClient {
	t.Helper()
	tc := connectedClient(t, nil)
	tc.now = func() time.Time { return restrictNow }
	tc.rec.registered[newContact.String()] = true
	tc.sink = historySink{tc.rec, map[string]bool{alicePN.String(): true}}
	return tc
}

// reopenedClient is restrictedClient at now on the device store at path,
// its kept conditions loaded as at a start.
func reopenedClient(t *testing.T, path string, now time.Time) *testClient {
	t.Helper()
	ctx := context.Background()
	ds, err := openStore(ctx, path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	// The client keeps its conditions in ds but does not own it (it owns a
	// device store only when it opened one): the test closes it.
	t.Cleanup(func() { _ = ds.Close() })
	tc := restrictedClient(t)
	tc.now = func() time.Time { return now }
	tc.kv = ds
	tc.restrict.load(ctx)
	return tc
}

// timelockEvent decodes the mex notification's payload the way whatsmeow
// does (xwa2_notify_account_reachout_timelock).
func timelockEvent(t *testing.T, payload string) *events.NotifyAccountReachoutTimelock {
	t.Helper()
	var e events.NotifyAccountReachoutTimelock
	if err := json.Unmarshal([]byte(payload), &e); err != nil {
		t.Fatalf("decode %s: %v", payload, err)
	}
	return &e
}

func TestReachoutTimelock(t *testing.T) {
	ends := restrictNow.Add(72 * time.Hour)
	active := `{"enforcement_type":"REACHOUT_TIMELOCK","is_active":true,"time_enforcement_ends":"` + unix(ends) + `"}`
	tests := []struct {
		name       string
		payloads   []string
		health     channel.Health
		until      time.Time
		refusedNew bool // a message to a contact that never wrote is refused
	}{
		{name: "active", payloads: []string{active}, health: channel.HealthRestricted, until: ends, refusedNew: true},
		{name: "active without end", payloads: []string{`{"enforcement_type":"REACHOUT_TIMELOCK","is_active":true}`},
			health: channel.HealthRestricted, refusedNew: true},
		{name: "lifted", payloads: []string{active, `{"enforcement_type":"REACHOUT_TIMELOCK","is_active":false}`},
			health: channel.HealthStable},
		{name: "already over", payloads: []string{`{"is_active":true,"time_enforcement_ends":"` + unix(restrictNow.Add(-time.Minute)) + `"}`},
			health: channel.HealthStable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := restrictedClient(t)
			for _, p := range tt.payloads {
				if !tc.handleEvent(timelockEvent(t, p)) {
					t.Fatalf("event %s not acknowledged", p)
				}
			}
			st := tc.Status()
			if st.State != channel.StateConnected || st.Health != tt.health {
				t.Errorf("status = %s/%s; want connected/%s", st.State, st.Health, tt.health)
			}
			cond, restricted := findCondition(st, condTimelock)
			if restricted != tt.refusedNew {
				t.Fatalf("timelock condition shown = %v; want %v (%+v)", restricted, tt.refusedNew, st.Conditions)
			}
			if restricted {
				if !cond.Until.Equal(tt.until) {
					t.Errorf("until = %s; want %s", cond.Until, tt.until)
				}
				if !strings.Contains(cond.Text, "new contacts") {
					t.Errorf("condition text %q does not say what is restricted", cond.Text)
				}
			}

			// A chat that wrote before and a group are always let through.
			for _, to := range []types.JID{alicePN, aliceLID, familyChat} {
				if _, err := tc.Send(context.Background(), channel.Outgoing{Chat: to.String(), Text: "hello", ID: NewMessageID()}); err != nil {
					t.Errorf("send to %s: %v; want it sent", to, err)
				}
			}
			before := len(tc.wa.sentMessages())
			_, err := tc.Send(context.Background(), channel.Outgoing{Chat: newContact.String(), Text: "hello", ID: NewMessageID()})
			sent := len(tc.wa.sentMessages()) - before
			if tt.refusedNew {
				if !errors.Is(err, channel.ErrPermanent) || !strings.Contains(err.Error(), "new contacts") || sent != 0 {
					t.Errorf("send to a new contact: err = %v, %d sent; want a permanent refusal naming the restriction, nothing sent", err, sent)
				}
				if !tt.until.IsZero() && !strings.Contains(err.Error(), tt.until.Format("2006-01-02 15:04 UTC")) {
					t.Errorf("refusal %q does not say until when", err)
				}
			} else if err != nil || sent != 1 {
				t.Errorf("send to a new contact: err = %v, %d sent; want it sent", err, sent)
			}
		})
	}
}

func TestReachoutTimelockKeptAcrossRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "whatsapp.db")
	ends := restrictNow.Add(48 * time.Hour)

	open := func() *testClient { return reopenedClient(t, path, restrictNow) }
	first := open()
	first.handleEvent(timelockEvent(t, `{"enforcement_type":"REACHOUT_TIMELOCK","is_active":true,"time_enforcement_ends":"`+unix(ends)+`"}`))
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := open()
	st := second.Status()
	if cond, ok := findCondition(st, condTimelock); !ok || st.Health != channel.HealthRestricted || !cond.Until.Equal(ends) {
		t.Fatalf("after a restart: health %s, conditions %+v; want the timelock until %s", st.Health, st.Conditions, ends)
	}
	if _, err := second.Send(ctx, channel.Outgoing{Chat: newContact.String(), Text: "hi", ID: NewMessageID()}); !errors.Is(err, channel.ErrPermanent) {
		t.Errorf("send to a new contact after a restart: %v; want refused", err)
	}
	second.handleEvent(timelockEvent(t, `{"is_active":false}`))
	_ = second.Close()

	third := open()
	if st := third.Status(); st.Health != channel.HealthStable || len(st.Conditions) != 0 {
		t.Errorf("after the lift and a restart: %s %+v; want stable, no conditions", st.Health, st.Conditions)
	}

	// Once its end passed, a kept timelock is gone at the next start.
	third.handleEvent(timelockEvent(t, `{"is_active":true,"time_enforcement_ends":"`+unix(ends)+`"}`))
	_ = third.Close()
	later := reopenedClient(t, path, ends.Add(time.Second))
	if st := later.Status(); len(st.Conditions) != 0 {
		t.Errorf("after its end: conditions %+v; want none", st.Conditions)
	}
}

func TestGroupSuspension(t *testing.T) {
	unregistered := types.NewJID("120363000000000099", types.GroupServer)
	tests := []struct {
		name      string
		events    []*events.GroupInfo
		suspended bool
		told      []string // what the group's agent finds in the chat
	}{
		{name: "suspended", events: []*events.GroupInfo{{JID: familyChat, Timestamp: msgTime, Suspended: true}},
			suspended: true, told: []string{"WhatsApp suspended this group"}},
		{name: "suspended then lifted", events: []*events.GroupInfo{
			{JID: familyChat, Timestamp: msgTime, Suspended: true},
			{JID: familyChat, Timestamp: msgTime.Add(time.Hour), Unsuspended: true},
		}, told: []string{"WhatsApp suspended this group", "lifted this group's suspension"}},
		{name: "not registered", events: []*events.GroupInfo{{JID: unregistered, Timestamp: msgTime, Suspended: true}}},
		{name: "other change", events: []*events.GroupInfo{{JID: familyChat, Timestamp: msgTime, Name: &types.GroupName{Name: "Family"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := restrictedClient(t)
			for _, e := range tt.events {
				if !tc.handleEvent(e) {
					t.Fatalf("event %+v not acknowledged", e)
				}
			}
			msgs := tc.rec.stored()
			if len(msgs) != len(tt.told) {
				t.Fatalf("stored %d messages; want %d: %+v", len(msgs), len(tt.told), msgs)
			}
			for i, w := range tt.told {
				if m := msgs[i]; m.Chat != familyChat.String() || !strings.Contains(m.Text, w) || m.FromMe || m.IsBot {
					t.Errorf("message %d = %+v; want one from WhatsApp in the group saying %q", i, m, w)
				}
			}
			st := tc.Status()
			_, shown := findCondition(st, condSuspend+familyChat.String())
			if shown != tt.suspended || (tt.suspended && st.Health != channel.HealthRestricted) {
				t.Errorf("suspension shown = %v, health %s; want %v", shown, st.Health, tt.suspended)
			}
			_, err := tc.Send(context.Background(), channel.Outgoing{Chat: familyChat.String(), Text: "reply", ID: NewMessageID()})
			if tt.suspended != (err != nil) {
				t.Errorf("send to the group: %v; want refused = %v", err, tt.suspended)
			}
			if err != nil && (!errors.Is(err, channel.ErrPermanent) || !strings.Contains(err.Error(), "suspended")) {
				t.Errorf("refusal %q is not permanent or does not say why", err)
			}
		})
	}
}

func TestSuspensionNoticeNotStoredIsNotAcknowledged(t *testing.T) {
	tc := restrictedClient(t)
	tc.rec.inboundErr = errors.New("disk full")
	if tc.handleEvent(&events.GroupInfo{JID: familyChat, Timestamp: msgTime, Suspended: true}) {
		t.Fatalf("suspension acknowledged although its notice was not stored")
	}
	if _, ok := findCondition(tc.Status(), condSuspend+familyChat.String()); ok {
		t.Errorf("suspension recorded although WhatsApp will deliver it again")
	}
}

func TestTemporaryBanShowsItsEnd(t *testing.T) {
	tc := restrictedClient(t)
	tc.handleEvent(&events.TemporaryBan{Code: events.TempBanSentToTooManyPeople, Expire: 90 * time.Minute})
	st := tc.Status()
	if st.State != channel.StateBanned || st.Health != channel.HealthBanned {
		t.Fatalf("status = %s/%s; want banned", st.State, st.Health)
	}
	for _, w := range []string{"until 2026-11-26 11:30 UTC", "too many messages", "reconnects in 1h30m"} {
		if !strings.Contains(st.Detail, w) {
			t.Errorf("detail %q lacks %q", st.Detail, w)
		}
	}
}

func findCondition(st channel.Status, key string) (channel.Condition, bool) {
	for _, c := range st.Conditions {
		if c.Key == key {
			return c, true
		}
	}
	return channel.Condition{}, false
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// The daily group sync corrects a suspension missed while offline, and
// its end.
func TestGroupSyncCorrectsSuspension(t *testing.T) {
	ctx := context.Background()
	tc := restrictedClient(t)
	key := condSuspend + familyChat.String()
	for _, step := range []struct {
		suspended bool
		refused   bool
	}{{true, true}, {true, true}, {false, false}} {
		tc.wa.mu.Lock()
		tc.wa.groups = []*types.GroupInfo{{JID: familyChat, GroupName: types.GroupName{Name: "Family"}, Suspended: step.suspended}}
		tc.wa.mu.Unlock()
		if _, err := tc.RefreshGroups(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := findCondition(tc.Status(), key); ok != step.suspended {
			t.Errorf("listed suspended = %v: condition shown = %v", step.suspended, ok)
		}
		_, err := tc.Send(ctx, channel.Outgoing{Chat: familyChat.String(), Text: "hi", ID: NewMessageID()})
		if (err != nil) != step.refused {
			t.Errorf("listed suspended = %v: send err = %v; want refused = %v", step.suspended, err, step.refused)
		}
	}
}
