package outbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/channeltest"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// testWait bounds every wait for an event in these tests.
const testWait = 10 * time.Second

// testTick is the sender's polling tick in these tests (channelDownWait in
// the daemon), so a test waits for the event, not for the tick.
const testTick = 5 * time.Millisecond

const (
	chatA = store.ChatID("fake:a")
	chatB = store.ChatID("fake:b")
)

type harness struct {
	t    *testing.T
	db   *store.DB
	ch   *channeltest.Fake
	s    *Sender
	sent chan store.OutboxItem
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	db := storetest.Open(t)
	h := &harness{t: t, db: db, ch: channeltest.New("fake"), sent: make(chan store.OutboxItem, 100)}
	var err error
	h.s, err = New(Config{
		Store:    db,
		Channels: []channel.Channel{h.ch},
		Log:      zerolog.New(io.Discard),
		Backoff:  time.Millisecond,
		OnSent:   func(_ context.Context, it store.OutboxItem) { h.sent <- it },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.s.downWait = testTick
	return h
}

// start runs the sender until the test ends.
func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.s.Run(ctx)
	}()
	h.t.Cleanup(func() {
		cancel()
		<-done
	})
}

func (h *harness) commit(chat store.ChatID, text string) store.OutboxItem {
	h.t.Helper()
	it, err := h.db.Outbox.Enqueue(context.Background(), store.OutboxItem{Chat: chat, Text: text, Origin: store.OriginReply, Group: "main"})
	if err != nil {
		h.t.Fatal(err)
	}
	h.s.Wake()
	return it
}

// nextSent waits for the next row marked sent.
func (h *harness) nextSent() store.OutboxItem {
	h.t.Helper()
	select {
	case it := <-h.sent:
		return it
	case <-time.After(testWait):
		h.t.Fatalf("nothing marked sent within %s (sent so far: %q)", testWait, h.ch.SentTexts())
		return store.OutboxItem{}
	}
}

func (h *harness) flush() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if !h.s.Flush(ctx) {
		h.t.Fatalf("outbox not flushed within %s", testWait)
	}
}

func (h *harness) row(id store.OutboxID) store.OutboxItem {
	h.t.Helper()
	it, err := h.db.Outbox.Get(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return it
}

func TestSentAtStart(t *testing.T) {
	h := newHarness(t)
	left := h.commit(chatA, "left over")
	h.start()
	got := h.nextSent()
	if got.ID != left.ID {
		t.Fatalf("sent at start: got row %d; want %d", got.ID, left.ID)
	}
	out := h.ch.Sent()[0]
	if out.Text != "left over" || out.ID != left.ExternalID || out.Chat != string(chatA) {
		t.Fatalf("sent: got %+v; want %q to %s with id %s", out, "left over", chatA, left.ExternalID)
	}
	if row := h.row(left.ID); row.State != store.OutboxSent || row.SentID != channeltest.SentID(left.ExternalID) {
		t.Fatalf("row after send: got %+v; want sent with the channel's id", row)
	}
}

func TestFailures(t *testing.T) {
	h := newHarness(t)
	h.ch.FailWith(func(m channel.Outgoing) error {
		if strings.HasPrefix(m.Text, "bad") {
			return fmt.Errorf("unknown chat: %w", channel.ErrPermanent)
		}
		return nil
	})
	bad := h.commit(chatA, "bad one")
	orphan := h.commit("nowhere:1", "nobody owns this chat")
	h.commit(chatA, "good one")
	h.start()
	if got := h.nextSent(); got.Text != "good one" {
		t.Fatalf("sent: got %q; want the good one (the permanent failure does not block it)", got.Text)
	}
	h.flush()
	for _, id := range []store.OutboxID{bad.ID, orphan.ID} {
		if row := h.row(id); row.State != store.OutboxFailed || row.LastError == "" {
			t.Fatalf("row %d: got %+v; want failed with its error", id, row)
		}
	}
	if n := h.ch.TriesOf("bad one"); n != 1 {
		t.Fatalf("a permanent failure was tried %d times; want 1", n)
	}
}

func TestTransientErrorsRetriedInOrder(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	failing := 2
	h.ch.FailWith(func(m channel.Outgoing) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Text == "first" && failing > 0 {
			failing--
			return errors.New("timeout")
		}
		return nil
	})
	first := h.commit(chatA, "first")
	h.commit(chatA, "second")
	h.start()
	if got := h.nextSent(); got.ID != first.ID {
		t.Fatalf("first sent: got %q; want %q (a chat's rows go in order)", got.Text, "first")
	}
	if got := h.nextSent(); got.Text != "second" {
		t.Fatalf("second sent: got %q", got.Text)
	}
	if got := h.ch.SentTexts(); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("sent: got %q; want first then second, each once", got)
	}
	if n := h.ch.TriesOf("second"); n != 1 {
		t.Fatalf("second tried %d times; want 1 (it waited for the first)", n)
	}
	if row := h.row(first.ID); row.Attempts != 2 {
		t.Fatalf("first row: got %d failed attempts recorded; want 2", row.Attempts)
	}
}

func TestTooManyAttemptsFail(t *testing.T) {
	h := newHarness(t)
	h.ch.FailWith(func(m channel.Outgoing) error { return errors.New("timeout") })
	it := h.commit(chatA, "never")
	h.start()
	deadline := time.Now().Add(testWait)
	for h.row(it.ID).State != store.OutboxFailed {
		if time.Now().After(deadline) {
			t.Fatalf("row not failed within %s: %+v", testWait, h.row(it.ID))
		}
		h.flush() // returns at each retry wait; the retries go on
		h.s.Wake()
	}
	if n := h.ch.TriesOf("never"); n != maxSendAttempts {
		t.Fatalf("tried %d times; want %d", n, maxSendAttempts)
	}
}

func TestReconnectingChannelWaitsWithoutUsingAttempts(t *testing.T) {
	h := newHarness(t)
	h.ch.SetStatus(channel.StateReconnecting, "")
	it := h.commit(chatA, "later")
	h.start()
	h.flush()
	if n := h.ch.TriesOf("later"); n != 0 {
		t.Fatalf("tried %d times while the channel reconnects; want 0", n)
	}
	if row := h.row(it.ID); row.State != store.OutboxPending || row.Attempts != 0 {
		t.Fatalf("row while the channel reconnects: got %+v; want pending, no attempts", row)
	}
	h.ch.SetStatus(channel.StateConnected, "")
	if got := h.nextSent(); got.ID != it.ID {
		t.Fatalf("sent after reconnect: got %q", got.Text)
	}
}

func TestChatsSendInParallel(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	h.ch.FailWith(func(m channel.Outgoing) error {
		if m.Chat == string(chatA) {
			<-release
		}
		return nil
	})
	defer close(release)
	h.commit(chatA, "stuck")
	h.start()
	h.commit(chatB, "free")
	if got := h.nextSent(); got.Text != "free" {
		t.Fatalf("sent: got %q; want the other chat's row while the first chat's send hangs", got.Text)
	}
}

func TestFlushWithoutRunEndsWithContext(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if h.s.Flush(ctx) {
		t.Fatal("Flush reported done with no sender running")
	}
}

func TestTypingInOrder(t *testing.T) {
	h := newHarness(t)
	h.s.SetTyping("nowhere:1", true) // no channel owns it: ignored
	h.s.SetTyping(string(chatA), true)
	h.s.SetTyping(string(chatA), false)
	h.start()
	for _, want := range []channeltest.Typing{{Chat: string(chatA), On: true}, {Chat: string(chatA), On: false}} {
		select {
		case got := <-h.ch.Typings():
			if got != want {
				t.Fatalf("typing: got %+v; want %+v", got, want)
			}
		case <-time.After(testWait):
			t.Fatalf("no typing change within %s; want %+v", testWait, want)
		}
	}
}

func TestNewRefusesNoStore(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New with no store: got nil error")
	}
}

// panicChannel panics on its first send, then sends.
type panicChannel struct {
	*channeltest.Fake
	once sync.Once
}

func (c *panicChannel) Send(ctx context.Context, m channel.Outgoing) (string, error) {
	c.once.Do(func() { panic("channel bug") })
	return c.Fake.Send(ctx, m)
}

// A send that panics does not stop the sender: the chat is tried again.
func TestPanickingSendRetried(t *testing.T) {
	h := newHarness(t)
	pc := &panicChannel{Fake: h.ch}
	var err error
	h.s, err = New(Config{Store: h.db, Channels: []channel.Channel{pc}, Log: zerolog.New(io.Discard),
		OnSent: func(_ context.Context, it store.OutboxItem) { h.sent <- it }})
	if err != nil {
		t.Fatal(err)
	}
	h.s.downWait = testTick
	it := h.commit(chatA, "after the panic")
	h.start()
	if got := h.nextSent(); got.ID != it.ID {
		t.Fatalf("sent: got %q", got.Text)
	}
}

// A row whose file is in the spool goes out with it; other rows go out as
// text.
func TestSendsSpooledFile(t *testing.T) {
	h := newHarness(t)
	hm, err := home.New(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	spool := hm.Spool()
	h.s.cfg.Spool = &spool
	ctx := context.Background()
	var it store.OutboxItem
	err = h.db.Tx(ctx, func(tx *store.Tx) error {
		st, err := spool.Stage("chart.png", "image/png", "image", strings.NewReader("png bytes"), 100)
		if err != nil {
			return err
		}
		it, err = tx.Outbox.Enqueue(ctx, store.OutboxItem{Chat: chatA, Text: "the chart", Origin: store.OriginTool, Group: "main"})
		if err != nil {
			return err
		}
		return st.Keep(home.SpoolKey(int64(it.ID), it.ExternalID))
	})
	if err != nil {
		t.Fatal(err)
	}
	h.commit(chatA, "plain text")
	h.start()
	h.nextSent()
	h.nextSent()
	sent := h.ch.Sent()
	if len(sent) != 2 {
		t.Fatalf("%d sent; want 2", len(sent))
	}
	a := sent[0].Attachment
	if a == nil || a.Name != "chart.png" || a.Kind != channel.KindImage || a.MIME != "image/png" || a.Size != 9 ||
		filepath.Dir(filepath.Dir(a.Path)) != hm.Layout().SpoolDir() {
		t.Errorf("first message's attachment %+v; want the spooled chart.png", a)
	}
	if sent[1].Attachment != nil {
		t.Errorf("plain message sent with attachment %+v", sent[1].Attachment)
	}
}

func TestSendTimeoutGrowsWithTheFile(t *testing.T) {
	for _, tc := range []struct {
		att  *channel.Attachment
		want time.Duration
	}{
		{nil, time.Minute},
		{&channel.Attachment{Size: 1 << 10}, time.Minute},
		{&channel.Attachment{Size: 64 << 20}, time.Minute + 512*time.Second},
	} {
		if got := sendTimeoutFor(channel.Outgoing{Attachment: tc.att}); got != tc.want {
			t.Errorf("timeout for %+v = %s; want %s", tc.att, got, tc.want)
		}
	}
}

// Once its message is sent, or failed for good, a file's copy leaves the
// spool; the row keeps the file's name and size.
func TestSentFileCopyRemoved(t *testing.T) {
	h := newHarness(t)
	hm, err := home.New(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	spool := hm.Spool()
	h.s.cfg.Spool = &spool
	h.ch.FailWith(func(m channel.Outgoing) error {
		if m.Text == "doomed" {
			return fmt.Errorf("no such chat: %w", channel.ErrPermanent)
		}
		return nil
	})
	ctx := context.Background()
	withFile := func(text, name, data string) (store.OutboxItem, string) {
		var it store.OutboxItem
		err := h.db.Tx(ctx, func(tx *store.Tx) error {
			st, err := spool.Stage(name, "text/plain", "document", strings.NewReader(data), 100)
			if err != nil {
				return err
			}
			if it, err = tx.Outbox.Enqueue(ctx, store.OutboxItem{Chat: chatA, Text: text, Origin: store.OriginTool, Group: "main"}); err != nil {
				return err
			}
			if err := tx.Outbox.SetFile(ctx, it.ID, name, int64(len(data))); err != nil {
				return err
			}
			return st.Keep(home.SpoolKey(int64(it.ID), it.ExternalID))
		})
		if err != nil {
			t.Fatal(err)
		}
		return it, home.SpoolKey(int64(it.ID), it.ExternalID)
	}
	sent, sentKey := withFile("the report", "report.txt", "numbers")
	doomed, doomedKey := withFile("doomed", "lost.txt", "gone")
	h.start()
	h.nextSent()
	h.flush()
	for key, what := range map[string]string{sentKey: "sent", doomedKey: "failed"} {
		if _, ok, err := spool.Get(key); ok || err != nil {
			t.Errorf("the %s message's copy is still spooled (%v); want it removed", what, err)
		}
	}
	for _, c := range []struct {
		id    store.OutboxID
		state store.OutboxState
		name  string
		size  int64
	}{{sent.ID, store.OutboxSent, "report.txt", 7}, {doomed.ID, store.OutboxFailed, "lost.txt", 4}} {
		if got := h.row(c.id); got.State != c.state || got.FileName != c.name || got.FileSize != c.size {
			t.Errorf("row %d: %s %q %d bytes; want %s %q %d bytes", c.id, got.State, got.FileName, got.FileSize, c.state, c.name, c.size)
		}
	}
}

// A sender built over a shared Signal sends what another committer commits
// and signals, without the sender's own Wake.
func TestSenderWakesOnSharedSignal(t *testing.T) {
	h := newHarness(t)
	sig := NewSignal()
	var err error
	h.s, err = New(Config{
		Store:    h.db,
		Channels: []channel.Channel{h.ch},
		Log:      zerolog.New(io.Discard),
		OnSent:   func(_ context.Context, it store.OutboxItem) { h.sent <- it },
		Signal:   sig,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	h.flush()
	it, err := h.db.Outbox.Enqueue(context.Background(), store.OutboxItem{Chat: chatA, Text: "notice", Origin: store.OriginNotice})
	if err != nil {
		t.Fatal(err)
	}
	sig.Wake()
	if got := h.nextSent(); got.ID != it.ID {
		t.Fatalf("sent row %d; want %d", got.ID, it.ID)
	}
}
