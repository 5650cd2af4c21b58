package whatsapp

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/appstate"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/channel"
)

// upkeepFake adds the app-state calls of *whatsmeow.Client to fakeWA.
type upkeepFake struct {
	*fakeWA
	tc *testClient

	mu       sync.Mutex
	fetchErr error // returned by FetchAppState; nil: the full sync succeeds
	fetches  []string
	peers    []*waE2E.Message
}

func (f *upkeepFake) FetchAppState(_ context.Context, name appstate.WAPatchName, fullSync, onlyIfNotSynced bool) error {
	f.mu.Lock()
	f.fetches = append(f.fetches, fmt.Sprintf("%s full=%v only=%v", name, fullSync, onlyIfNotSynced))
	err := f.fetchErr
	f.mu.Unlock()
	if err != nil {
		// whatsmeow reports the decode failure of a full sync as an event too.
		f.tc.handleEvent(&events.AppStateSyncError{Name: name, Error: err, FullSync: true})
		return err
	}
	f.tc.handleEvent(&events.AppStateSyncComplete{Name: name, Version: 42})
	return nil
}

func (f *upkeepFake) SendPeerMessage(_ context.Context, msg *waE2E.Message) (whatsmeow.SendResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers = append(f.peers, msg)
	return whatsmeow.SendResponse{ID: "peer"}, nil
}

func (f *upkeepFake) LatestAppStateKeyID(context.Context) ([]byte, error) { return []byte{7, 7}, nil }

func (f *upkeepFake) calls() (fetches []string, recoveries []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.peers {
		req := m.GetProtocolMessage().GetPeerDataOperationRequestMessage()
		if req.GetPeerDataOperationRequestType() == waE2E.PeerDataOperationRequestType_COMPANION_SYNCD_SNAPSHOT_FATAL_RECOVERY {
			recoveries = append(recoveries, req.GetSyncdCollectionFatalRecoveryRequest().GetCollectionName())
		}
	}
	return append([]string(nil), f.fetches...), recoveries
}

func newUpkeepClient(t *testing.T) (*testClient, *upkeepFake) {
	tc := newTestClient(t, nil)
	uf := &upkeepFake{fakeWA: tc.wa, tc: tc}
	tc.Client.wa = uf
	tc.conn.setState(channel.StateConnected, "")
	return tc, uf
}

func TestAppStateSyncHealsItself(t *testing.T) {
	mismatch := fmt.Errorf("failed to verify patch v12: %w", appstate.ErrMismatchingLTHash)
	tests := []struct {
		name       string
		evt        *events.AppStateSyncError
		fetchErr   error
		fetches    int  // full re-fetches
		recoveries int  // requests to the phone
		shown      bool // Status names the collection afterwards
	}{
		{name: "a re-fetch heals it", evt: &events.AppStateSyncError{Name: appstate.WAPatchRegularLow, Error: mismatch},
			fetches: 1, recoveries: 0, shown: false},
		{name: "a failed re-fetch asks the phone", evt: &events.AppStateSyncError{Name: appstate.WAPatchRegularLow, Error: mismatch},
			fetchErr: fmt.Errorf("failed to decode app state regular_low patches: %w", appstate.ErrMismatchingPatchMAC), fetches: 1, recoveries: 1, shown: true},
		{name: "a failed full sync asks the phone at once", evt: &events.AppStateSyncError{Name: appstate.WAPatchCriticalBlock, Error: mismatch, FullSync: true},
			fetches: 0, recoveries: 1, shown: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tc, uf := newUpkeepClient(t)
				uf.fetchErr = tt.fetchErr
				if !tc.handleEvent(tt.evt) {
					t.Fatalf("AppStateSyncError not acknowledged")
				}
				synctest.Wait()
				fetches, recoveries := uf.calls()
				if len(fetches) != tt.fetches || (tt.fetches > 0 && fetches[0] != string(tt.evt.Name)+" full=true only=false") {
					t.Errorf("fetches = %q; want %d full re-fetch of %s", fetches, tt.fetches, tt.evt.Name)
				}
				if len(recoveries) != tt.recoveries || (tt.recoveries > 0 && recoveries[0] != string(tt.evt.Name)) {
					t.Errorf("recovery requests = %q; want %d for %s", recoveries, tt.recoveries, tt.evt.Name)
				}
				st := tc.Status()
				cond, shown := findCondition(st, condAppState)
				if shown != tt.shown || (shown && !strings.Contains(cond.Text, "out of sync ("+string(tt.evt.Name)+")")) {
					t.Errorf("status %+v shows the app state: %v; want %v", st, shown, tt.shown)
				}
				if want := map[bool]channel.Health{true: channel.HealthAppStateSync, false: channel.HealthStable}[tt.shown]; st.Health != want {
					t.Errorf("health = %s; want %s", st.Health, want)
				}
				if st.State != channel.StateConnected {
					t.Errorf("state = %s; want connected (the connection itself is fine)", st.State)
				}
				tc.handleEvent(&events.AppStateSyncComplete{Name: tt.evt.Name, Version: 43, Recovery: true})
				if st := tc.Status(); st.Health != channel.HealthStable || len(st.Conditions) != 0 {
					t.Errorf("after AppStateSyncComplete: status %+v; want stable, no condition", st)
				}
				_ = tc.Close()
			})
		})
	}
}

func TestAppStateRecoveryAtMostEvery48Hours(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tc, uf := newUpkeepClient(t)
		uf.fetchErr = appstate.ErrMismatchingLTHash
		fail := func() {
			tc.handleEvent(&events.AppStateSyncError{Name: appstate.WAPatchRegularHigh, Error: appstate.ErrMismatchingLTHash})
			synctest.Wait()
		}
		recoveries := func() int { _, r := uf.calls(); return len(r) }
		fail()
		if n := recoveries(); n != 1 {
			t.Fatalf("recovery requests after the first failure: %d; want 1", n)
		}
		time.Sleep(AppStateRecoveryInterval - time.Minute)
		fail()
		if n := recoveries(); n != 1 {
			t.Fatalf("recovery requests %s later: %d; want still 1", AppStateRecoveryInterval-time.Minute, n)
		}
		time.Sleep(time.Minute)
		fail()
		if n := recoveries(); n != 2 {
			t.Fatalf("recovery requests %s later: %d; want 2", AppStateRecoveryInterval, n)
		}
		if fetches, _ := uf.calls(); len(fetches) != 3 {
			t.Errorf("full re-fetches: %d; want one per failure (3)", len(fetches))
		}
		_ = tc.Close()
	})
}

func TestPhoneSeen(t *testing.T) {
	ownPhone := types.MessageSource{Chat: alicePN, Sender: botPN, IsFromMe: true}
	ownWeb := ownPhone
	ownWeb.Sender = types.NewADJID(botPN.User, 0, 5)
	seenAt := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		evt  any
		seen bool
	}{
		{"own read receipt from the phone", &events.Receipt{MessageSource: ownPhone, Timestamp: seenAt, Type: types.ReceiptTypeReadSelf}, true},
		{"own receipt from another linked device", &events.Receipt{MessageSource: ownWeb, Timestamp: seenAt, Type: types.ReceiptTypeReadSelf}, false},
		{"someone else's receipt", &events.Receipt{MessageSource: types.MessageSource{Chat: alicePN, Sender: alicePN}, Timestamp: seenAt}, false},
		{"message sent from the phone", msgEvent(types.MessageInfo{MessageSource: ownPhone, ID: "P1", Timestamp: seenAt},
			&waE2E.Message{Conversation: proto.String("hi")}), true},
		{"message from another linked device", msgEvent(types.MessageInfo{MessageSource: ownWeb, ID: "P2", Timestamp: seenAt},
			&waE2E.Message{Conversation: proto.String("hi")}), false},
		{"media retry answered by the phone", &events.MediaRetry{Timestamp: seenAt, MessageID: "M1"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, _ := newUpkeepClient(t)
			tc.handleEvent(tt.evt)
			if got := tc.PhoneLastSeen().Equal(seenAt); got != tt.seen {
				t.Errorf("phone last seen = %v; want seen at %v: %v", tc.PhoneLastSeen(), seenAt, tt.seen)
			}
		})
	}
}

func TestPhoneOfflinePingedAndWarned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tc, _ := newUpkeepClient(t)
		pings := func() []sentMessage {
			var out []sentMessage
			for _, m := range tc.wa.sentMessages() {
				if m.msg.GetProtocolMessage().GetType() == waE2E.ProtocolMessage_APP_STATE_SYNC_KEY_REQUEST {
					out = append(out, m)
				}
			}
			return out
		}
		seen := func() {
			tc.handleEvent(&events.Receipt{MessageSource: types.MessageSource{Chat: alicePN, Sender: botPN, IsFromMe: true},
				Timestamp: time.Now(), Type: types.ReceiptTypeReadSelf})
		}
		backlogDone := func() { tc.handleEvent(&events.OfflineSyncCompleted{Count: 3}); synctest.Wait() }

		tc.handleEvent(&events.Connected{})
		seen()
		time.Sleep(PhonePingAfter - time.Hour)
		backlogDone()
		if n := len(pings()); n != 0 {
			t.Fatalf("pings before %s: %d; want 0", PhonePingAfter, n)
		}
		time.Sleep(time.Hour)
		backlogDone()
		p := pings()
		if len(p) != 1 {
			t.Fatalf("pings at %s: %d; want 1", PhonePingAfter, len(p))
		}
		keys := p[0].msg.GetProtocolMessage().GetAppStateSyncKeyRequest().GetKeyIDs()
		if p[0].to != botPN || len(keys) != 1 || string(keys[0].GetKeyID()) != "\x07\x07" {
			t.Errorf("ping went to %s asking for %v; want the account's own number and the newest key", p[0].to, keys)
		}
		time.Sleep(PhonePingInterval - time.Minute)
		backlogDone()
		if n := len(pings()); n != 1 {
			t.Fatalf("pings within a day: %d; want 1", n)
		}
		time.Sleep(time.Minute) // day 11
		backlogDone()
		if n := len(pings()); n != 2 {
			t.Fatalf("pings a day after the first: %d; want 2", n)
		}
		time.Sleep(PhoneWarnAfter - PhonePingAfter - PhonePingInterval - time.Minute)
		if st := tc.Status(); st.Health != channel.HealthStable {
			t.Errorf("status before %s: %+v; want stable", PhoneWarnAfter, st)
		}
		time.Sleep(time.Minute) // day 12
		backlogDone()
		if n := len(pings()); n != 3 {
			t.Errorf("pings on day 12: %d; want 3 (one a day)", n)
		}
		st := tc.Status()
		cond, ok := findCondition(st, condPhoneOffline)
		if st.State != channel.StateConnected || st.Health != channel.HealthPhoneOffline || !ok ||
			!strings.Contains(cond.Text, "not been online for 12 days") {
			t.Errorf("status %+v; want connected, health phone-offline, saying for how long", st)
		}
		seen()
		if st := tc.Status(); st.Health != channel.HealthStable || len(st.Conditions) != 0 {
			t.Errorf("status once the phone was seen: %+v; want stable, no condition", st)
		}
		_ = tc.Close()
	})
}

func TestPhoneLastSeenKeptAcrossRestarts(t *testing.T) {
	kv := &memKV{}
	seenAt := time.Now().Add(-13 * 24 * time.Hour).Truncate(time.Second)
	tc, _ := newUpkeepClient(t)
	tc.kv = kv
	tc.handleEvent(&events.Receipt{MessageSource: types.MessageSource{Chat: alicePN, Sender: botPN, IsFromMe: true}, Timestamp: seenAt})

	again, _ := newUpkeepClient(t)
	again.kv = kv
	again.handleEvent(&events.Connected{})
	if got := again.PhoneLastSeen(); !got.Equal(seenAt) {
		t.Fatalf("after a restart the phone was last seen %v; want %v", got, seenAt)
	}
	if st := again.Status(); st.Health != channel.HealthPhoneOffline {
		t.Errorf("health after a restart: %s; want phone-offline", st.Health)
	}
}

// The recovery and liveness times survive a restart in store/whatsapp.db.
func TestUpkeepTimesKeptInTheDeviceStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store", "whatsapp.db")
	at := time.Date(2026, 11, 20, 8, 30, 0, 0, time.UTC)
	ds, err := openStore(ctx, path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readTime(ctx, ds, kvPhoneSeen); err != nil || !got.IsZero() {
		t.Fatalf("unset: %v, %v; want zero", got, err)
	}
	if err := writeTime(ctx, ds, kvPhoneSeen, at); err != nil {
		t.Fatal(err)
	}
	if err := writeTime(ctx, ds, kvPhoneSeen, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_ = ds.Close()
	ds, err = openStore(ctx, path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if got, err := readTime(ctx, ds, kvPhoneSeen); err != nil || !got.Equal(at.Add(time.Hour)) {
		t.Fatalf("after reopening: %v, %v; want %v", got, err, at.Add(time.Hour))
	}
}

// A connected client checks the phone hourly by itself: a phone unseen
// for PhonePingAfter is pinged without any backlog or status read.
func TestPhonePingedHourlyWhileConnected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tc, _ := newUpkeepClient(t)
		tc.phone.seen(time.Now().Add(-PhonePingAfter))
		tc.spawn(func() { tc.work(tc.base) })
		time.Sleep(phoneCheckInterval)
		synctest.Wait()
		pings := 0
		for _, m := range tc.wa.sentMessages() {
			if m.msg.GetProtocolMessage().GetType() == waE2E.ProtocolMessage_APP_STATE_SYNC_KEY_REQUEST {
				pings++
			}
		}
		if pings != 1 {
			t.Errorf("pings after an hour connected: %d; want 1", pings)
		}
		_ = tc.Close()
	})
}
