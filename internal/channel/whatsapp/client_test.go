package whatsapp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/testlog"
)

func TestNewUnpairedConnectsAtOnceAndSaysWhatToDo(t *testing.T) {
	home := t.TempDir()
	logs := &testlog.Buffer{}
	rec := newRecorder()
	ctx := context.Background()
	c, err := New(ctx, Options{
		StorePath: filepath.Join(home, "store", "whatsapp.db"),
		Log:       zerolog.New(logs),
		Sink:      rec,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	for range 2 {
		if err := c.Connect(cctx); err != nil {
			t.Fatalf("Connect: %v", err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Connect took %s; want it to return at once", d)
	}
	st := c.Status()
	if st.State != channel.StateNotPaired || st.Detail != "run `bridged login` to pair" {
		t.Errorf("Status() = %s %q; want not-paired %q", st.State, st.Detail, "run `bridged login` to pair")
	}
	if got := strings.Count(logs.String(), `"state":"not-paired"`); got != 1 {
		t.Errorf("not-paired logged %d times; want once:\n%s", got, logs.String())
	}
	if _, v := c.StateMetric(); v != 5 {
		t.Errorf("StateMetric value = %d; want 5 (not paired)", v)
	}
	_, err = c.Send(ctx, channel.Outgoing{Chat: familyChat.String(), Text: "hi", ID: NewMessageID()})
	if err == nil || !strings.Contains(err.Error(), "bridged login") {
		t.Errorf("Send while unpaired: err = %v; want a permanent error naming `bridged login`", err)
	}
	if fi, err := os.Stat(filepath.Join(home, "store", "whatsapp.db")); err != nil {
		t.Errorf("store file: %v", err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("store file mode = %v; want 0600", fi.Mode().Perm())
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A client is not built without a sink: nothing could receive.
func TestNewRefusesNoSink(t *testing.T) {
	dir := t.TempDir()
	if c, err := New(context.Background(), Options{StorePath: filepath.Join(dir, "wa.db")}); err == nil {
		c.Close()
		t.Fatal("New without a sink succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "wa.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New without a sink left a store: %v", err)
	}
}

func TestStoreHasForeignKeysAndCachesVersion(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "whatsapp.db")
	ds, err := openStore(ctx, path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	var fk int
	if err := ds.db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign_keys = %d (%v); want 1", fk, err)
	}
	applied := store.WAVersionContainer{2, 3000, 5}
	v := &versioner{
		store: ds,
		fetch: func(context.Context) (store.WAVersionContainer, error) {
			return store.WAVersionContainer{2, 3000, 7}, nil
		},
		apply: func(n store.WAVersionContainer) { applied = n },
		get:   func() store.WAVersionContainer { return applied },
		log:   zerolog.Nop(),
	}
	if !v.refresh(ctx) || applied != (store.WAVersionContainer{2, 3000, 7}) {
		t.Fatalf("refresh applied %v; want 2.3000.7", applied)
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}

	// Next start, offline: the last known version is used.
	ds, err = openStore(ctx, path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	applied = store.WAVersionContainer{2, 3000, 5}
	v.store = ds
	v.fetch = func(context.Context) (store.WAVersionContainer, error) {
		return store.WAVersionContainer{}, context.DeadlineExceeded
	}
	v.applyCached(ctx)
	if v.refresh(ctx) || applied != (store.WAVersionContainer{2, 3000, 7}) {
		t.Errorf("offline start uses %v; want the cached 2.3000.7", applied)
	}
}

func TestOwns(t *testing.T) {
	c := newTestClient(t, nil)
	for chat, want := range map[string]bool{
		"120363000000000001@g.us":      true,
		"491700000002@s.whatsapp.net":  true,
		"200000000000002@lid":          true,
		"local:main":                   false,
		"@g.us":                        false,
		"123@newsletter":               false,
		"status@broadcast":             false,
		"120363000000000001@g.us.evil": false,
	} {
		if got := c.Owns(chat); got != want {
			t.Errorf("Owns(%q) = %v; want %v", chat, got, want)
		}
	}
}

// TestRealClientWithholdsAck dispatches through whatsmeow itself: with the
// store failing, whatsmeow sees the handler fail and does not acknowledge.
func TestRealClientWithholdsAck(t *testing.T) {
	rec := newRecorder()
	c, err := New(context.Background(), Options{
		StorePath: filepath.Join(t.TempDir(), "whatsapp.db"),
		Log:       zerolog.Nop(),
		Sink:      rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wc := c.wa.(realClient).Client
	if !wc.SynchronousAck || !wc.EnableDecryptedEventBuffer || wc.EnableAutoReconnect {
		t.Errorf("SynchronousAck, EnableDecryptedEventBuffer, EnableAutoReconnect = %v, %v, %v; want true, true, false",
			wc.SynchronousAck, wc.EnableDecryptedEventBuffer, wc.EnableAutoReconnect)
	}
	evt := msgEvent(groupInfo("W1", alicePN), &waE2E.Message{Conversation: proto.String("@Andy hi")})

	rec.inboundErr = errors.New("database is locked")
	//lint:ignore SA1019 the only way to run whatsmeow's own dispatch in a test
	if failed := wc.DangerousInternals().DispatchEvent(evt); !failed {
		t.Errorf("whatsmeow handler failed = false with the store down; want true (no ack)")
	}
	rec.inboundErr = nil
	//lint:ignore SA1019 see above
	if failed := wc.DangerousInternals().DispatchEvent(evt); failed {
		t.Errorf("whatsmeow handler failed = true after the store recovered; want false (ack)")
	}
	if got := rec.stored(); len(got) != 1 || got[0].Text != "@Andy hi" {
		t.Errorf("stored %v; want the redelivered message once", got)
	}
}
