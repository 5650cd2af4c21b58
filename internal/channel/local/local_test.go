package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

func openStore(t *testing.T) *store.DB {
	t.Helper()
	return storetest.Open(t)
}

func register(t *testing.T, db *store.DB, chat store.ChatID, folder store.Folder) {
	t.Helper()
	if _, err := db.Groups.Add(context.Background(), store.Group{Chat: chat, Folder: folder, Trigger: "@Andy", RequiresTrigger: true}); err != nil {
		t.Fatalf("AddGroup: %v", err)
	}
}

// storeInbound is what the ingest's Inbound does with a message: store it.
func storeInbound(db *store.DB) Inbound {
	return func(ctx context.Context, _ ingest.Changed, m channel.Message) (store.MessageID, error) {
		id, _, err := db.Messages.Insert(ctx, store.Message{
			Chat: store.ChatID(m.Chat), ExternalID: m.ExternalID, Sender: m.Sender,
			SenderName: m.SenderName, Text: m.Text, SentAt: m.SentAt,
		})
		return id, err
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestPostStoresAndWakes(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	register(t, db, "local:main", "main")
	c := New(db, "Andy", storeInbound(db), zerolog.Nop())

	w := c.Wait(ctx)
	if closed(w) {
		t.Fatal("Wait channel closed before anything was stored")
	}
	ids, err := c.Post(ctx, "local:main", "alice", "hello there")
	if err != nil || len(ids) != 1 {
		t.Fatalf("Post: %v, %v; want one id", ids, err)
	}
	id := ids[0]
	if !closed(w) {
		t.Error("Wait channel still open after Post stored a message")
	}
	msgs, err := db.Messages.After(ctx, "local:main", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("got %d stored messages; want 1", len(msgs))
	}
	if msgs[0].ID != id || msgs[0].Text != "hello there" || msgs[0].Sender != "alice" || msgs[0].IsBot {
		t.Errorf("got stored %+v (Post returned id %d); want id %d, text %q from alice, not bot", msgs[0], id, msgs[0].ID, "hello there")
	}
	if w2 := c.Wait(ctx); closed(w2) {
		t.Error("a fresh Wait channel is already closed")
	}
}

// Post answers with the id the inbound callback committed the message
// under; it does not read the message back from the store.
func TestPostReturnsTheInboundID(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	register(t, db, "local:main", "main")
	var got channel.Message
	c := New(db, "Andy", func(_ context.Context, _ ingest.Changed, m channel.Message) (store.MessageID, error) {
		got = m
		return 4711, nil
	}, zerolog.Nop())
	ids, err := c.Post(ctx, "local:main", "alice", "hello there")
	if err != nil || len(ids) != 1 || ids[0] != 4711 {
		t.Fatalf("Post: got ids %v, %v; want [4711], nil", ids, err)
	}
	if got.Chat != "local:main" || got.Text != "hello there" || got.Sender != "alice" || !strings.HasPrefix(got.ExternalID, "local-") {
		t.Errorf("inbound got %+v; want alice's text in local:main under a local- id", got)
	}
}

func TestPostRejects(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	register(t, db, "local:main", "main")
	register(t, db, "local:gone", "gone")
	failing := errors.New("disk full")
	tests := []struct {
		name    string
		inbound Inbound
		chat    string
		text    string
		want    error
	}{
		{"whatsapp chat", storeInbound(db), "123@g.us", "hi", ErrNotLocal},
		{"bare prefix", storeInbound(db), "local:", "hi", ErrNotLocal},
		{"unregistered", storeInbound(db), "local:other", "hi", ErrNotRegistered},
		{"blank", storeInbound(db), "local:main", "  \n", ErrEmpty},
		{"inbound fails", func(context.Context, ingest.Changed, channel.Message) (store.MessageID, error) { return 0, failing }, "local:main", "hi", failing},
		{"unregistered before the commit", func(ctx context.Context, _ ingest.Changed, _ channel.Message) (store.MessageID, error) {
			return 0, db.Groups.Remove(ctx, "gone")
		}, "local:gone", "hi", ErrNotRegistered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(db, "Andy", tt.inbound, zerolog.Nop())
			w := c.Wait(ctx)
			_, err := c.Post(ctx, tt.chat, "alice", tt.text)
			if !errors.Is(err, tt.want) {
				t.Errorf("got error %v; want %v", err, tt.want)
			}
			if closed(w) {
				t.Error("waiters woken although nothing was stored")
			}
		})
	}
	if msgs, _ := db.Messages.After(ctx, "local:main", 0, 0); len(msgs) != 0 {
		t.Errorf("got %d stored messages after rejected posts; want 0", len(msgs))
	}
}

// TestSendThroughOutbox follows a reply the way the router sends it: commit
// to the outbox, Send, MarkSent. The reply must be stored exactly once, as
// the assistant's, and waiters must be woken when it can be read.
func TestSendThroughOutbox(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	register(t, db, "local:main", "main")
	c := New(db, "Andy", storeInbound(db), zerolog.Nop())

	it, err := db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: "local:main", Group: "main", Text: "the answer", Origin: store.OriginReply})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Wait(ctx)
	sent, err := c.Send(ctx, channel.Outgoing{Chat: "local:main", Text: it.Text, ID: it.ExternalID})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if sent != it.ExternalID {
		t.Errorf("got sent id %q; want the outbox id %q", sent, it.ExternalID)
	}
	if !closed(w) {
		t.Fatal("Wait channel still open after Send")
	}
	msgs, err := db.Messages.After(ctx, "local:main", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Text != "the answer" || !msgs[0].IsBot || msgs[0].Sender != "Andy" {
		t.Fatalf("after Send got %+v; want one bot message %q from Andy", msgs, "the answer")
	}
	if err := db.Outbox.MarkSent(ctx, it.ID, sent, time.Now()); err != nil {
		t.Fatalf("MarkSent: %v", err)
	}
	// A retry after a crash between Send and Outbox.MarkSent sends the same id again.
	if _, err := c.Send(ctx, channel.Outgoing{Chat: "local:main", Text: it.Text, ID: it.ExternalID}); err != nil {
		t.Fatalf("second Send: %v", err)
	}
	msgs, err = db.Messages.After(ctx, "local:main", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Errorf("got %d stored messages after MarkSent and a resend; want 1", len(msgs))
	}
}

func TestSendPermanentFailures(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	register(t, db, "local:main", "main")
	c := New(db, "Andy", storeInbound(db), zerolog.Nop())
	tests := []struct {
		name string
		m    channel.Outgoing
	}{
		{"not local", channel.Outgoing{Chat: "123@g.us", Text: "x", ID: "A"}},
		{"unregistered", channel.Outgoing{Chat: "local:gone", Text: "x", ID: "B"}},
		{"blank", channel.Outgoing{Chat: "local:main", Text: " ", ID: "C"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.Send(ctx, tt.m); !errors.Is(err, channel.ErrPermanent) {
				t.Errorf("got error %v; want one wrapping ErrPermanent", err)
			}
		})
	}
}

func TestTypingAndStatus(t *testing.T) {
	db := openStore(t)
	c := New(db, "Andy", storeInbound(db), zerolog.Nop())
	if got := c.Status().State; got != channel.StateConnected {
		t.Errorf("got state %s; want %s", got, channel.StateConnected)
	}
	if !c.Owns("local:x") || c.Owns("x@g.us") {
		t.Error("Owns: want local:x owned and x@g.us not")
	}
	ctx := context.Background()
	if err := c.SetTyping(ctx, "local:main", true); err != nil {
		t.Fatal(err)
	}
	if !c.Typing("local:main") {
		t.Error("got typing off after SetTyping(on)")
	}
	if err := c.SetTyping(ctx, "local:main", false); err != nil {
		t.Fatal(err)
	}
	if c.Typing("local:main") {
		t.Error("got typing on after SetTyping(off)")
	}
}

func TestSendWithFile(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	register(t, db, "local:main", "main")
	c := New(db, "Andy", storeInbound(db), zerolog.Nop())
	a := &channel.Attachment{Path: "/home/bridged/data/outbox/7-3EB0AB/chart.png", Name: "chart.png", MIME: "image/png", Kind: channel.KindImage, Size: 3072}
	if _, err := c.Send(ctx, channel.Outgoing{Chat: "local:main", Text: "the chart\n", ID: "3EB0AB", Attachment: a}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	msgs, err := db.Messages.After(ctx, "local:main", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "the chart\n[file: chart.png (3.0 KiB, image) /home/bridged/data/outbox/7-3EB0AB/chart.png]"
	if len(msgs) != 1 || msgs[0].Text != want {
		t.Fatalf("after Send got %+v; want one message %q", msgs, want)
	}
}

// With KeepFiles, a file is delivered into the channel's own directory:
// the chat's line names that copy, which outlives the outbox's (removed
// once the message is sent), and a retried send keeps it.
func TestSendWithFileKept(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	register(t, db, "local:main", "main")
	dir := t.TempDir()
	c := New(db, "Andy", storeInbound(db), zerolog.Nop()).KeepFiles(filepath.Join(dir, "local"), KeepLimits{})
	src := filepath.Join(dir, "outbox", "7-3EB0AB", "chart.png")
	if err := os.MkdirAll(filepath.Dir(src), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("png bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &channel.Attachment{Path: src, Name: "chart.png", MIME: "image/png", Kind: channel.KindImage, Size: 9}
	for range 2 {
		if _, err := c.Send(ctx, channel.Outgoing{Chat: "local:main", Text: "the chart", ID: "3EB0AB", Attachment: a}); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, "outbox")); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dir, "local", "main~3EB0AB", "chart.png")
	msgs, err := db.Messages.After(ctx, "local:main", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := "the chart\n[file: chart.png (9 B, image) " + kept + "]"; len(msgs) != 1 || msgs[0].Text != want {
		t.Fatalf("after Send got %+v; want one message %q", msgs, want)
	}
	if got, err := os.ReadFile(kept); err != nil || string(got) != "png bytes" {
		t.Errorf("the delivered file holds %q (%v); want the outbox's copy", got, err)
	}
}

// Post with media posts one message per file, in order: the first carries
// the text as its caption, the others none; each message's text is its
// media's pending placeholder.
func TestPostMedia(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	register(t, db, "local:main", "main")
	var got []channel.Message
	inbound := func(_ context.Context, _ ingest.Changed, m channel.Message) (store.MessageID, error) {
		got = append(got, m)
		return store.MessageID(100 + len(got)), nil
	}
	c := New(db, "Andy", func(ctx context.Context, seen ingest.Changed, m channel.Message) (store.MessageID, error) {
		return inbound(ctx, seen, m)
	}, zerolog.Nop())
	img := channel.Media{Source: "upload", Ref: []byte(`{"key":"up-1"}`), Label: "image", Name: "a.png", MIME: "image/png", Head: "stale", Tail: "stale"}
	doc := channel.Media{Source: "upload", Ref: []byte(`{"key":"up-2"}`), Label: `document "b.pdf"`, Name: "b.pdf"}
	w := c.Wait(ctx)
	ids, err := c.Post(ctx, "local:main", "alice", "look at these", img, doc)
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	if len(ids) != 2 || ids[0] != 101 || ids[1] != 102 {
		t.Errorf("ids = %v; want [101 102]", ids)
	}
	if !closed(w) {
		t.Error("waiters not woken")
	}
	if len(got) != 2 {
		t.Fatalf("inbound got %d messages; want 2", len(got))
	}
	want := []struct{ head, text, name string }{
		{"look at these\n", "look at these\n[image: downloading]", "a.png"},
		{"", `[document "b.pdf": downloading]`, "b.pdf"},
	}
	for i, w := range want {
		m := got[i]
		if m.Media == nil || m.Media.Head != w.head || m.Media.Tail != "" || m.Media.Name != w.name || m.Text != w.text || m.Sender != "alice" {
			t.Errorf("message %d: got %+v (media %+v); want head %q, text %q, file %s", i, m, m.Media, w.head, w.text, w.name)
		}
	}
	if got[0].ExternalID == got[1].ExternalID {
		t.Errorf("both messages have external id %s", got[0].ExternalID)
	}

	// Media with no text: no caption. A failure stops the rest and
	// reports what was committed.
	got = nil
	failing := errors.New("disk full")
	inbound = func(_ context.Context, _ ingest.Changed, m channel.Message) (store.MessageID, error) {
		if len(got) == 1 {
			return 0, failing
		}
		got = append(got, m)
		return 7, nil
	}
	ids, err = c.Post(ctx, "local:main", "alice", "", img, doc, img)
	if !errors.Is(err, failing) || len(ids) != 1 || ids[0] != 7 {
		t.Errorf("Post with a failing second message: ids %v, err %v; want [7], %v", ids, err, failing)
	}
	if len(got) != 1 || got[0].Media.Head != "" {
		t.Errorf("got %+v; want one message with no caption", got)
	}
}

// The terminal's user is the owner (FromMe); PostAs posts as another
// member, "local:<name>", not FromMe; a message the group drops is
// ErrNotAllowed, one taken out in a group that drops nothing (a member's
// /remote-control, refused in the chat) is not, and a name with spaces is
// refused.
func TestPostAsAnotherSender(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	register(t, db, "local:main", "main")
	register(t, db, "local:fam", "fam")
	fam, err := db.Groups.ByFolder(ctx, "fam")
	if err != nil {
		t.Fatal(err)
	}
	fam.Others = store.OthersDrop
	if err := db.Groups.Update(ctx, fam); err != nil {
		t.Fatal(err)
	}
	var got []channel.Message
	drop := false
	c := New(db, "Andy", func(_ context.Context, _ ingest.Changed, m channel.Message) (store.MessageID, error) {
		got = append(got, m)
		if drop && !m.FromMe {
			return 0, nil
		}
		return store.MessageID(len(got)), nil
	}, zerolog.Nop())
	if _, err := c.Post(ctx, "local:main", "", "hi"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostAs(ctx, "local:main", "bob", "hi"); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].FromMe || got[0].Sender != "you" || got[1].FromMe || got[1].Sender != "local:bob" || got[1].SenderName != "bob" {
		t.Fatalf("posted %+v; want the owner (you, FromMe), then local:bob (not FromMe)", got)
	}
	drop = true
	if _, err := c.PostAs(ctx, "local:fam", "bob", "hi"); !errors.Is(err, store.ErrNotAllowed) {
		t.Errorf("dropped post: %v; want ErrNotAllowed", err)
	}
	if ids, err := c.PostAs(ctx, "local:main", "bob", "/remote-control"); err != nil || len(ids) != 0 {
		t.Errorf("taken out in a group that drops nothing: %v, %v; want no id and no error", ids, err)
	}
	if _, err := c.PostAs(ctx, "local:main", "bob smith", "hi"); !errors.Is(err, ErrBadSender) {
		t.Errorf("name with a space: %v; want ErrBadSender", err)
	}
}

// An owner's message the ingest takes out before storage (an approval
// answer) is no error and has no id.
func TestPostAcceptsATakenOutMessage(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	register(t, db, "local:main", "main")
	var got []channel.Message
	c := New(db, "Andy", func(_ context.Context, _ ingest.Changed, m channel.Message) (store.MessageID, error) {
		got = append(got, m)
		return 0, nil // taken out before storage (an approval answer)
	}, zerolog.Nop())
	for _, sender := range []string{"", "kim"} {
		ids, err := c.Post(ctx, "local:main", sender, "yes abcd")
		if err != nil || len(ids) != 0 {
			t.Fatalf("Post(%q) = %v, %v; want no ids and no error", sender, ids, err)
		}
	}
	if len(got) != 2 || !got[0].FromMe || got[0].Sender != "you" || !got[1].FromMe || got[1].Sender != "kim" {
		t.Fatalf("posted %+v; want two owner messages", got)
	}
}

// What one chat keeps delivered is capped, in files and in bytes: a file
// past either cap is not delivered, its message is, saying so and why; the
// cap is the chat's own, so another chat still gets its files.
func TestSendWithFileCapped(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	register(t, db, "local:main", "main")
	register(t, db, "local:fam", "fam")
	dir := t.TempDir()
	c := New(db, "Andy", storeInbound(db), zerolog.Nop()).KeepFiles(filepath.Join(dir, "local"), KeepLimits{Files: 2, Bytes: 1 << 20})
	send := func(chat, id string, size int) string {
		t.Helper()
		src := filepath.Join(dir, "outbox", id, "f.bin")
		if err := os.MkdirAll(filepath.Dir(src), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(src, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		a := &channel.Attachment{Path: src, Name: "f.bin", Kind: channel.KindDocument, Size: int64(size)}
		if _, err := c.Send(ctx, channel.Outgoing{Chat: chat, Text: "file " + id, ID: id, Attachment: a}); err != nil {
			t.Fatalf("Send: %v", err)
		}
		msgs, err := db.Messages.After(ctx, store.ChatID(chat), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return msgs[len(msgs)-1].Text
	}
	for _, id := range []string{"A1", "A2"} {
		if got := send("local:main", id, 10); !strings.Contains(got, "[file: f.bin") {
			t.Fatalf("file %s: %q; want it delivered", id, got)
		}
	}
	if got := send("local:main", "A3", 10); !strings.Contains(got, "file A3\n[file not delivered: f.bin") || !strings.Contains(got, "keeps 2 files") ||
		!strings.Contains(got, "BRIDGED_LOCAL_FILES=2") {
		t.Errorf("the third file: %q; want the message, saying the file was not delivered and why", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "local", "main~A3")); err == nil {
		t.Error("the refused file was kept")
	}
	if got := send("local:fam", "B1", 600<<10); !strings.Contains(got, "[file: f.bin") {
		t.Fatalf("another chat's file: %q; want it delivered", got)
	}
	if got := send("local:fam", "B2", 600<<10); !strings.Contains(got, "[file not delivered: f.bin") || !strings.Contains(got, "BRIDGED_LOCAL_FILES_BYTES") {
		t.Errorf("a file past the bytes cap: %q; want it not delivered, saying why", got)
	}
}
