package whatsapp

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/types/events"

	"github.com/bridged-app/bridged/internal/channel"
)

func TestHealthPerState(t *testing.T) {
	tests := []struct {
		evt    any
		state  channel.ConnState
		health channel.Health
	}{
		{&events.Connected{}, channel.StateConnected, channel.HealthStable},
		{&events.Disconnected{}, channel.StateReconnecting, channel.HealthConnecting},
		{&events.ConnectFailure{Reason: events.ConnectFailureBadUserAgent}, channel.StateDisconnected, channel.HealthDown},
		{&events.LoggedOut{Reason: events.ConnectFailureLoggedOut}, channel.StateLoggedOut, channel.HealthLoggedOut},
		{&events.StreamReplaced{}, channel.StateReplaced, channel.HealthReplaced},
		{&events.TemporaryBan{Code: events.TempBanBlockedByUsers, Expire: time.Hour}, channel.StateBanned, channel.HealthBanned},
		{&events.ClientOutdated{}, channel.StateOutdated, channel.HealthOutdated},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(fmt.Sprintf("%T", tt.evt), "*events."), func(t *testing.T) {
			tc := newTestClient(t, nil)
			tc.conn.setState(channel.StateConnecting, "")
			tc.handleEvent(tt.evt)
			st := tc.Status()
			if st.State != tt.state || st.Health != tt.health {
				t.Errorf("status = %s/%s; want %s/%s", st.State, st.Health, tt.state, tt.health)
			}
		})
	}
	if st := newTestClient(t, func(*Options) {}).Status(); st.Health != channel.HealthDown {
		t.Errorf("a client never connected: health %s; want %s", st.Health, channel.HealthDown)
	}
}

// TestFlapping drives a connection that keeps dropping: three drops within
// ten minutes make it flapping, shown as one condition whatever follows,
// until an hour passes without a drop.
func TestFlapping(t *testing.T) {
	now := restrictNow
	tc := newTestClient(t, nil)
	tc.now = func() time.Time { return now }
	tc.conn.setState(channel.StateConnecting, "")
	cycle := func(after time.Duration) {
		now = now.Add(after)
		tc.handleEvent(&events.Connected{})
		now = now.Add(time.Minute)
		tc.handleEvent(&events.Disconnected{})
		tc.handleEvent(&events.Connected{})
	}
	steps := []struct {
		name   string
		do     func()
		health channel.Health
	}{
		{"connected", func() { tc.handleEvent(&events.Connected{}) }, channel.HealthStable},
		{"one drop", func() { cycle(time.Minute) }, channel.HealthStable},
		{"two drops", func() { cycle(time.Minute) }, channel.HealthStable},
		{"three drops in ten minutes", func() { cycle(time.Minute) }, channel.HealthFlapping},
		{"a keepalive timeout while flapping", func() {
			tc.handleEvent(&events.KeepAliveTimeout{ErrorCount: 1, LastSuccess: now.Add(-10 * time.Second)})
			tc.handleEvent(&events.KeepAliveRestored{})
		}, channel.HealthFlapping},
		{"59 minutes quiet", func() { now = now.Add(59 * time.Minute) }, channel.HealthFlapping},
		{"an hour quiet", func() { now = now.Add(2 * time.Minute) }, channel.HealthStable},
		{"drops far apart", func() { cycle(20 * time.Minute); cycle(20 * time.Minute); cycle(20 * time.Minute) }, channel.HealthStable},
	}
	for _, s := range steps {
		s.do()
		st := tc.Status()
		if st.Health != s.health {
			t.Fatalf("%s: health %s; want %s (conditions %+v)", s.name, st.Health, s.health, st.Conditions)
		}
		cond, flapping := findCondition(st, condFlapping)
		if flapping != (s.health == channel.HealthFlapping) {
			t.Fatalf("%s: flapping condition = %v; want %v", s.name, flapping, !flapping)
		}
		if flapping && !strings.Contains(cond.Text, "keeps dropping") {
			t.Errorf("%s: condition text %q does not say what happens", s.name, cond.Text)
		}
	}
}

// TestRestrictedOutranksFlapping: a connected channel shows the worst
// condition as its health and lists them all.
func TestRestrictedOutranksFlapping(t *testing.T) {
	tc := restrictedClient(t)
	for range flapDrops {
		tc.handleEvent(&events.Disconnected{})
		tc.handleEvent(&events.Connected{})
	}
	tc.handleEvent(timelockEvent(t, `{"is_active":true}`))
	st := tc.Status()
	if st.Health != channel.HealthRestricted || len(st.Conditions) != 2 {
		t.Errorf("health %s, conditions %+v; want restricted with the timelock and flapping", st.Health, st.Conditions)
	}
}
