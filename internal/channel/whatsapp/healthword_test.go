package whatsapp

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow/appstate"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/bridged-app/bridged/internal/alerts"
	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// ownerPosts records what the alerts post.
type ownerPosts struct {
	mu    sync.Mutex
	texts []string
}

func (p *ownerPosts) SendMessage(_ context.Context, _, text string, _ store.Origin, _ string) (store.OutboxItem, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.texts = append(p.texts, text)
	return store.OutboxItem{}, nil
}

func (p *ownerPosts) Rescan() {}

func (p *ownerPosts) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.texts...)
}

// TestHealthWordAndOneAlert drives the channel into each state with
// whatsmeow's own events and lets the daemon's alerts watch it for a
// while: the health word is the state's, and the owner is told once (the
// phone offline too, which both the status and the alerts see).
func TestHealthWordAndOneAlert(t *testing.T) {
	tests := []struct {
		name   string
		do     func(tc *testClient, uf *upkeepFake)
		health channel.Health
		alert  string // "" : no alert
	}{
		{name: "stable", do: func(tc *testClient, _ *upkeepFake) { tc.handleEvent(&events.Connected{}) },
			health: channel.HealthStable},
		{name: "reconnecting", do: func(tc *testClient, _ *upkeepFake) { tc.handleEvent(&events.Disconnected{}) },
			health: channel.HealthConnecting},
		{name: "flapping", do: func(tc *testClient, _ *upkeepFake) {
			for range flapDrops {
				tc.handleEvent(&events.Disconnected{})
				tc.handleEvent(&events.Connected{})
			}
		}, health: channel.HealthFlapping, alert: "keeps dropping"},
		{name: "phone offline", do: func(tc *testClient, _ *upkeepFake) {
			tc.handleEvent(&events.Receipt{MessageSource: types.MessageSource{Chat: alicePN, Sender: botPN, IsFromMe: true},
				Timestamp: time.Now().Add(-PhoneWarnAfter - time.Hour), Type: types.ReceiptTypeReadSelf})
		}, health: channel.HealthPhoneOffline, alert: "has not been online for 12 days"},
		{name: "app state out of sync", do: func(tc *testClient, uf *upkeepFake) {
			uf.fetchErr = appstate.ErrMismatchingLTHash
			tc.handleEvent(&events.AppStateSyncError{Name: appstate.WAPatchRegular, Error: appstate.ErrMismatchingLTHash})
		}, health: channel.HealthAppStateSync, alert: "app state (contacts, chat settings) is out of sync (regular)"},
		{name: "restricted", do: func(tc *testClient, _ *upkeepFake) {
			tc.handleEvent(timelockEvent(t, `{"enforcement_type":"REACHOUT_TIMELOCK","is_active":true}`))
		}, health: channel.HealthRestricted, alert: "messaging new contacts"},
		{name: "a send refused with 463", do: func(tc *testClient, _ *upkeepFake) {
			tc.wa.sendErrs = []error{serverError(463), serverError(463)}
			for range 2 {
				_, _ = tc.Send(context.Background(), channel.Outgoing{Chat: newContact.String(), Text: "hi", ID: NewMessageID()})
			}
		}, health: channel.HealthRestricted, alert: "error 463"},
		{name: "banned", do: func(tc *testClient, _ *upkeepFake) {
			tc.handleEvent(&events.TemporaryBan{Code: events.TempBanSentToTooManyPeople, Expire: 2 * time.Hour})
		}, health: channel.HealthBanned, alert: "temporarily banned"},
		{name: "logged out", do: func(tc *testClient, _ *upkeepFake) {
			tc.handleEvent(&events.LoggedOut{Reason: events.ConnectFailureLoggedOut})
		}, health: channel.HealthLoggedOut, alert: "is logged out"},
		{name: "outdated", do: func(tc *testClient, _ *upkeepFake) { tc.handleEvent(&events.ClientOutdated{}) },
			health: channel.HealthOutdated, alert: "update bridged"},
		{name: "replaced", do: func(tc *testClient, _ *upkeepFake) { tc.handleEvent(&events.StreamReplaced{}) },
			health: channel.HealthReplaced, alert: "taken over by another client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				db := storetest.Open(t)
				if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:main", Folder: "main", IsMain: true}); err != nil {
					t.Fatal(err)
				}
				tc, uf := newUpkeepClient(t)
				tt.do(tc, uf)
				synctest.Wait()

				st := tc.Status()
				if st.Health != tt.health {
					t.Fatalf("health %s; want %s (status %+v)", st.Health, tt.health, st)
				}
				posts := &ownerPosts{}
				a, err := alerts.New(alerts.Config{DB: db, Poster: posts, State: filepath.Join(t.TempDir(), "alerts.json"),
					Channels: []channel.Channel{tc.Client}, Interval: time.Minute, Log: zerolog.Nop(),
					FreeBytes: func(string) (uint64, error) { return 50 << 30, nil }})
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan struct{})
				go func() { defer close(done); _ = a.Run(ctx) }()
				for range 3 { // three checks
					synctest.Wait()
					time.Sleep(time.Minute)
				}
				cancel()
				<-done
				got := posts.all()
				switch {
				case tt.alert == "" && len(got) != 0:
					t.Errorf("alerts %q; want none", got)
				case tt.alert != "" && (len(got) != 1 || !strings.Contains(got[0], tt.alert)):
					t.Errorf("alerts %q; want one saying %q", got, tt.alert)
				}
				_ = tc.Close()
			})
		})
	}
}
