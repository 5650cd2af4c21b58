package whatsapp

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/bridged-app/bridged/internal/channel"
)

func TestConnTransitions(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		evt       any
		state     channel.ConnState
		reconnect bool
	}{
		{"connected", &events.Connected{}, channel.StateConnected, false},
		{"disconnected", &events.Disconnected{}, channel.StateReconnecting, true},
		{"logged out", &events.LoggedOut{Reason: events.ConnectFailureLoggedOut}, channel.StateLoggedOut, false},
		{"logged out on connect", &events.LoggedOut{OnConnect: true, Reason: events.ConnectFailureMainDeviceGone}, channel.StateLoggedOut, false},
		{"stream replaced", &events.StreamReplaced{}, channel.StateReplaced, false},
		{"temporary ban", &events.TemporaryBan{Code: events.TempBanSentToTooManyPeople, Expire: time.Hour}, channel.StateBanned, true},
		{"client outdated", &events.ClientOutdated{}, channel.StateOutdated, true}, // once, if a newer web version exists
		{"unknown connect failure", &events.ConnectFailure{Reason: events.ConnectFailureBadUserAgent}, channel.StateDisconnected, true},
		{"keepalive timeout, recent success", &events.KeepAliveTimeout{ErrorCount: 1, LastSuccess: now.Add(-30 * time.Second)}, channel.StateReconnecting, false},
		{"keepalive timeout, dead for minutes", &events.KeepAliveTimeout{ErrorCount: 8, LastSuccess: now.Add(-4 * time.Minute)}, channel.StateReconnecting, true},
		{"keepalive restored", &events.KeepAliveRestored{}, channel.StateConnected, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, ok := connTransition(tt.evt, now)
			if !ok {
				t.Fatalf("connTransition(%T) not handled", tt.evt)
			}
			if tr.state != tt.state {
				t.Errorf("state = %s; want %s", tr.state, tt.state)
			}
			if got := tr.job != jobNone; got != tt.reconnect {
				t.Errorf("reconnect = %v; want %v", got, tt.reconnect)
			}
			if tr.state != channel.StateConnected && tr.detail == "" {
				t.Errorf("detail is empty; want what the owner should do")
			}
		})
	}
	if _, ok := connTransition(&events.Receipt{}, now); ok {
		t.Errorf("a receipt changed the connection state")
	}
}

func TestBackoffIsCapped(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, 64 * time.Second, 2 * time.Minute, 2 * time.Minute}
	for n, w := range want {
		if got := backoff(n); got != w {
			t.Errorf("backoff(%d) = %s; want %s", n, got, w)
		}
	}
	if got := backoff(1000); got != MaxReconnectDelay {
		t.Errorf("backoff(1000) = %s; want %s", got, MaxReconnectDelay)
	}
}

// startedClient runs Connect in the bubble until the first connection is
// up, with the fake version source offline.
func startedClient(t *testing.T, ctx context.Context) *testClient {
	t.Helper()
	return startedClientWith(t, ctx, nil)
}

// startedClientWith is startedClient with edit applied to the options.
func startedClientWith(t *testing.T, ctx context.Context, edit func(*Options)) *testClient {
	t.Helper()
	tc := newTestClient(t, edit)
	done := make(chan error, 1)
	go func() { done <- tc.Connect(ctx) }()
	synctest.Wait()
	if got := tc.wa.connectCount(); got != 1 {
		t.Fatalf("connect attempts after Connect = %d; want 1", got)
	}
	tc.handleEvent(&events.Connected{})
	if err := <-done; err != nil {
		t.Fatalf("Connect: %v", err)
	}
	synctest.Wait()
	return tc
}

func TestConnectSyncsGroupsAndPresence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tc := newTestClient(t, nil)
		tc.wa.groups = []*types.GroupInfo{
			{JID: familyChat, GroupName: types.GroupName{Name: "Family"}},
			{JID: otherChat, GroupName: types.GroupName{Name: "Book club"}},
		}
		done := make(chan error, 1)
		go func() { done <- tc.Connect(ctx) }()
		synctest.Wait()
		if st := tc.Status().State; st != channel.StateConnecting {
			t.Errorf("state while connecting = %s; want %s", st, channel.StateConnecting)
		}
		tc.handleEvent(&events.Connected{})
		if err := <-done; err != nil {
			t.Fatalf("Connect: %v", err)
		}
		synctest.Wait()
		if got := tc.Status().State; got != channel.StateConnected {
			t.Errorf("state = %s; want connected", got)
		}
		if name, v := tc.StateMetric(); name != StateMetricName || v != 1 {
			t.Errorf("StateMetric() = %s %d; want %s 1", name, v, StateMetricName)
		}
		if got := tc.wa.presenceLog(); len(got) != 1 || got[0] != "unavailable" {
			t.Errorf("presences = %q; want [unavailable]: an idle bridged must leave the owner's phone its notifications", got)
		}
		want := []string{otherChat.String() + "|Book club|group", familyChat.String() + "|Family|group"}
		if got := tc.rec.seen(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("chats seen = %q; want %q", got, want)
		}
		tc.ver.mu.Lock()
		fetches := tc.ver.fetches
		tc.ver.mu.Unlock()
		if fetches != 1 {
			t.Errorf("web version fetches = %d; want 1 at start-up", fetches)
		}

		// Daily refresh.
		tc.wa.mu.Lock()
		tc.wa.groups = tc.wa.groups[:1]
		tc.wa.mu.Unlock()
		time.Sleep(groupSyncInterval + time.Minute)
		synctest.Wait()
		if got := tc.rec.seen(); len(got) != 3 || got[2] != familyChat.String()+"|Family|group" {
			t.Errorf("chats seen after a day = %q; want the groups synced again", got)
		}
		cancel()
		_ = tc.Close()
	})
}

func ev(e any) func() any { return func() any { return e } }

func TestReconnectBehaviour(t *testing.T) {
	tests := []struct {
		name  string
		setup func(tc *testClient)
		evt   func() any // built inside the bubble, where time is fake
		// after waiting wait, the number of new connection attempts.
		wait     time.Duration
		attempts int
		state    channel.ConnState
	}{
		{name: "disconnected reconnects after a second", evt: ev(&events.Disconnected{}),
			wait: MinReconnectDelay, attempts: 1, state: channel.StateReconnecting},
		{name: "disconnected waits for the backoff", evt: ev(&events.Disconnected{}),
			wait: MinReconnectDelay - time.Millisecond, attempts: 0, state: channel.StateReconnecting},
		{name: "logged out never reconnects", evt: ev(&events.LoggedOut{Reason: events.ConnectFailureLoggedOut}),
			wait: 24 * time.Hour, attempts: 0, state: channel.StateLoggedOut},
		{name: "replaced never reconnects", evt: ev(&events.StreamReplaced{}),
			wait: 24 * time.Hour, attempts: 0, state: channel.StateReplaced},
		{name: "temporary ban waits for the expiry", evt: ev(&events.TemporaryBan{Expire: time.Hour}),
			wait: time.Hour - time.Second, attempts: 0, state: channel.StateBanned},
		{name: "temporary ban reconnects at the expiry", evt: ev(&events.TemporaryBan{Expire: time.Hour}),
			wait: time.Hour, attempts: 1, state: channel.StateReconnecting},
		{name: "outdated with a newer web version reconnects",
			setup: func(tc *testClient) {
				tc.ver.mu.Lock()
				tc.ver.latest = store.WAVersionContainer{2, 3000, 99}
				tc.ver.mu.Unlock()
			},
			evt: ev(&events.ClientOutdated{}), wait: time.Minute, attempts: 1, state: channel.StateReconnecting},
		{name: "outdated without a newer web version stops",
			evt: ev(&events.ClientOutdated{}), wait: 24 * time.Hour, attempts: 0, state: channel.StateOutdated},
		{name: "keepalive dead for minutes resets the connection",
			evt: func() any {
				return &events.KeepAliveTimeout{ErrorCount: 9, LastSuccess: time.Now().Add(-4 * time.Minute)}
			},
			wait: time.Second, attempts: 1, state: channel.StateReconnecting},
		{name: "one keepalive timeout only waits",
			evt:  func() any { return &events.KeepAliveTimeout{ErrorCount: 1, LastSuccess: time.Now()} },
			wait: time.Hour, attempts: 0, state: channel.StateReconnecting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				tc := startedClient(t, ctx)
				if tt.setup != nil {
					tt.setup(tc)
				}
				before := tc.wa.connectCount()
				tc.handleEvent(tt.evt())
				time.Sleep(tt.wait)
				synctest.Wait()
				if got := tc.wa.connectCount() - before; got != tt.attempts {
					t.Errorf("connection attempts = %d; want %d", got, tt.attempts)
				}
				if got := tc.Status().State; got != tt.state {
					t.Errorf("state = %s; want %s", got, tt.state)
				}
				cancel()
				_ = tc.Close()
			})
		})
	}
}

func TestFailedReconnectsBackOffWithoutGivingUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tc := startedClient(t, ctx)
		fail := errors.New("dial tcp: network is unreachable")
		tc.wa.mu.Lock()
		for range 20 {
			tc.wa.connectErrs = append(tc.wa.connectErrs, fail)
		}
		tc.wa.mu.Unlock()
		before := tc.wa.connectCount()
		start := time.Now()
		tc.handleEvent(&events.Disconnected{})
		var times []time.Duration
		for len(times) < 12 {
			n := tc.wa.connectCount()
			time.Sleep(time.Second)
			synctest.Wait()
			if tc.wa.connectCount() > n {
				times = append(times, time.Since(start).Round(time.Second))
			}
		}
		// 1 s after the drop, then waits of 2, 4, 8 … seconds, capped at two minutes.
		want := []time.Duration{2, 4, 8, 16, 32, 64, 120, 120, 120, 120, 120}
		var gaps []time.Duration
		for i := 1; i < len(times); i++ {
			gaps = append(gaps, (times[i]-times[i-1])/time.Second)
		}
		if times[0] != time.Second {
			t.Errorf("first attempt after %s; want 1s", times[0])
		}
		for i := range want {
			if gaps[i] != want[i] {
				t.Errorf("gaps (s) = %v; want %v", gaps, want)
				break
			}
		}
		if got := tc.Status().State; got != channel.StateReconnecting {
			t.Errorf("state = %s; want reconnecting", got)
		}
		if tc.wa.connectCount()-before != 12 {
			t.Errorf("attempts = %d; want 12", tc.wa.connectCount()-before)
		}
		// A success resets the backoff.
		tc.handleEvent(&events.Connected{})
		tc.wa.mu.Lock()
		tc.wa.connectErrs = nil
		tc.wa.mu.Unlock()
		tc.handleEvent(&events.Disconnected{})
		n := tc.wa.connectCount()
		time.Sleep(MinReconnectDelay)
		synctest.Wait()
		if tc.wa.connectCount() != n+1 {
			t.Errorf("after a success the next drop waited longer than %s", MinReconnectDelay)
		}
		cancel()
		_ = tc.Close()
	})
}

func TestStaleEventsDoNotOverrideOwnerStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tc := startedClient(t, ctx)
		tc.handleEvent(&events.StreamReplaced{})
		tc.handleEvent(&events.Disconnected{})
		tc.handleEvent(&events.KeepAliveTimeout{ErrorCount: 9, LastSuccess: time.Now().Add(-time.Hour)})
		before := tc.wa.connectCount()
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := tc.Status().State; got != channel.StateReplaced {
			t.Errorf("state = %s; want replaced", got)
		}
		if got := tc.wa.connectCount() - before; got != 0 {
			t.Errorf("connection attempts = %d; want 0 after being replaced", got)
		}
		cancel()
		_ = tc.Close()
	})
}

func TestEachStateLoggedOnce(t *testing.T) {
	tc := newTestClient(t, nil)
	for range 3 {
		tc.conn.applyTransition(transition{state: channel.StateLoggedOut, detail: "run `bridged login`"})
	}
	if got := strings.Count(tc.logs.String(), `"state":"logged-out"`); got != 1 {
		t.Errorf("logged-out logged %d times; want once", got)
	}
	if !strings.Contains(tc.logs.String(), "run `bridged login`") {
		t.Errorf("log does not say what to do: %s", tc.logs.String())
	}
}

// accountPresences is the account's presences in log (available,
// unavailable), without the chats' typing states.
func accountPresences(log []string) []string {
	var out []string
	for _, p := range log {
		if !strings.Contains(p, " ") {
			out = append(out, p)
		}
	}
	return out
}

// The account is available only while an agent works in one of its chats,
// so the owner's phone is notified otherwise; with AlwaysOnline it stays
// available from the connection on, as before.
func TestPresenceFollowsTurns(t *testing.T) {
	for _, tt := range []struct {
		name   string
		always bool
		want   []string
	}{
		{"default", false, []string{"unavailable", "available", "unavailable"}},
		{"always online", true, []string{"available"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				tc := startedClientWith(t, ctx, func(o *Options) { o.AlwaysOnline = tt.always })
				for _, step := range []struct {
					chat types.JID
					on   bool
				}{{familyChat, true}, {otherChat, true}, {familyChat, false}, {otherChat, false}} {
					if err := tc.SetTyping(ctx, step.chat.String(), step.on); err != nil {
						t.Fatal(err)
					}
					synctest.Wait()
				}
				log := tc.wa.presenceLog()
				if got := accountPresences(log); strings.Join(got, ",") != strings.Join(tt.want, ",") {
					t.Errorf("account presences = %q; want %q", got, tt.want)
				}
				// WhatsApp relays "composing" only from an available client.
				if a, c := slices.Index(log, "available"), slices.Index(log, "composing "+familyChat.String()); a < 0 || c < a {
					t.Errorf("presences = %q; want available before the first composing", log)
				}
				_ = tc.Close()
			})
		})
	}
}
