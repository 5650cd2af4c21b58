package ingest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

type queue struct {
	mu    sync.Mutex
	added []store.Media
}

func (q *queue) Add(m store.Media) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.added = append(q.added, m)
}

func newIngest(t *testing.T, mq MediaQueue) (*Ingest, *store.DB) {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t)
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:main", Folder: "main", Trigger: "@Andy", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	in, err := New(Config{DB: db, Media: mq, LateWindow: 10 * time.Minute, Log: zerolog.Nop(),
		ChannelOf: func(chat string) string { return "local" }})
	if err != nil {
		t.Fatal(err)
	}
	return in, db
}

func woken(in *Ingest) bool {
	select {
	case <-in.Wake():
		return true
	default:
		return false
	}
}

// A message of a registered chat is stored with its chat's channel, wakes
// the loop once, and marks the chat changed; a redelivery stores nothing
// new and wakes nobody.
func TestInboundStoresAndWakes(t *testing.T) {
	in, db := newIngest(t, nil)
	ctx := context.Background()
	m := channel.Message{Chat: "local:main", ExternalID: "e1", Sender: "you", Text: "hello", SentAt: time.Now()}
	id, err := in.Inbound(ctx, m)
	if err != nil || id == 0 {
		t.Fatalf("Inbound = %d, %v", id, err)
	}
	if !woken(in) {
		t.Fatal("a new message did not wake the loop")
	}
	dirty, all := in.Take()
	if _, ok := dirty["local:main"]; !ok || all || len(dirty) != 1 {
		t.Fatalf("Take = %v, %v; want local:main only", dirty, all)
	}
	chats, err := db.Chats.List(ctx)
	if err != nil || len(chats) != 1 || chats[0].Channel != "local" {
		t.Fatalf("chats = %+v, %v; want local:main on the local channel", chats, err)
	}
	again, err := in.Inbound(ctx, m)
	if err != nil || again != id {
		t.Fatalf("redelivery = %d, %v; want %d", again, err, id)
	}
	if woken(in) {
		t.Fatal("a redelivery woke the loop")
	}
	if dirty, _ := in.Take(); len(dirty) != 0 {
		t.Fatalf("a redelivery marked %v changed", dirty)
	}
}

// A message of a chat that is no group records the chat only; a blank chat
// is refused.
func TestInboundUnregisteredAndInvalid(t *testing.T) {
	in, _ := newIngest(t, nil)
	ctx := context.Background()
	if id, err := in.Inbound(ctx, channel.Message{Chat: "local:other", Text: "hi"}); err != nil || id != 0 {
		t.Fatalf("unregistered Inbound = %d, %v; want 0, nil", id, err)
	}
	if woken(in) {
		t.Fatal("a chat that is no group woke the loop")
	}
	if _, err := in.Inbound(ctx, channel.Message{Chat: " ", Text: "hi"}); err == nil {
		t.Fatal("a blank chat was accepted")
	}
}

// A media message goes to the media queue after its commit with a pending
// placeholder; without a queue its text says it was not downloaded.
// MediaSettled wakes the loop and makes earlier reads stale.
func TestInboundMedia(t *testing.T) {
	q := &queue{}
	in, _ := newIngest(t, q)
	ctx := context.Background()
	media := &channel.Media{Source: "upload", Ref: []byte(`{"key":"k"}`), Label: "image", Name: "a.jpg", MIME: "image/jpeg", Size: 3}
	id, err := in.Inbound(ctx, channel.Message{Chat: "local:main", ExternalID: "m1", Sender: "you", Media: media})
	if err != nil || id == 0 {
		t.Fatalf("Inbound = %d, %v", id, err)
	}
	if len(q.added) != 1 || q.added[0].MessageID != id {
		t.Fatalf("queued %+v; want the media of message %d", q.added, id)
	}
	in.Take()
	in.MediaSettled("local:main")
	if !woken(in) {
		t.Fatal("a settled media did not wake the loop")
	}
	if dirty, _ := in.Take(); len(dirty) != 1 {
		t.Fatalf("Take after MediaSettled = %v", dirty)
	}

	bare, _ := newIngest(t, nil)
	id, err = bare.Inbound(ctx, channel.Message{Chat: "local:main", ExternalID: "m2", Sender: "you", Media: media})
	if err != nil || id == 0 {
		t.Fatalf("Inbound without a queue = %d, %v", id, err)
	}
}

// Rescan asks for every group.
func TestRescan(t *testing.T) {
	in, _ := newIngest(t, nil)
	in.Rescan()
	if !woken(in) {
		t.Fatal("Rescan did not wake the loop")
	}
	if _, all := in.Take(); !all {
		t.Fatal("Rescan did not ask for every group")
	}
	if _, all := in.Take(); all {
		t.Fatal("Take did not start a new set")
	}
}

func TestNewRefusesMissingParts(t *testing.T) {
	if _, err := New(Config{LateWindow: time.Minute}); err == nil {
		t.Fatal("New without a store succeeded")
	}
}

// An approval answer and any reaction are taken out before storage: not
// stored, not waking the loop; everything else is stored.
func TestAnswersAndReactionsAreNotStored(t *testing.T) {
	in, db := newIngest(t, nil)
	ctx := context.Background()
	in.cfg.Answers = func(_ context.Context, m channel.Message) bool { return m.Text == "yes abcd" }
	for i, m := range []channel.Message{
		{Chat: "local:main", ExternalID: "a1", Text: "yes abcd", FromMe: true},
		{Chat: "local:main", ExternalID: "a2", Reaction: &channel.Reaction{TargetID: "x", Emoji: "❤️"}},
	} {
		id, err := in.Inbound(ctx, m)
		if err != nil || id != 0 {
			t.Fatalf("message %d: Inbound = %d, %v; want taken out", i, id, err)
		}
	}
	if woken(in) {
		t.Error("a taken-out message woke the loop")
	}
	in.cfg.Answers = nil
	if id, _ := in.Inbound(ctx, channel.Message{Chat: "local:main", ExternalID: "a3", Reaction: &channel.Reaction{TargetID: "x", Emoji: "👍"}}); id != 0 {
		t.Error("a reaction was stored without an answer hook")
	}
	if id, err := in.Inbound(ctx, channel.Message{Chat: "local:main", ExternalID: "a4", Text: "hello"}); err != nil || id == 0 {
		t.Fatalf("an ordinary message was not stored: %d, %v", id, err)
	}
	msgs, err := db.Messages.After(ctx, "local:main", 0, 0)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("stored %d messages (%v); want only the ordinary one", len(msgs), err)
	}
}

// A polled update is committed with the message it carries: the offset
// moves past it, and the same update again stores nothing and wakes nobody;
// an update whose message is taken out (a reaction) is committed alone.
func TestInboundPolledCommitsTheUpdate(t *testing.T) {
	in, db := newIngest(t, nil)
	ctx := context.Background()
	m := channel.Message{Chat: "local:main", ExternalID: "e1", Sender: "you", Text: "hello", SentAt: time.Now()}
	id, err := in.InboundPolled(ctx, m, store.PollAck{Channel: "telegram", UpdateID: 10})
	if err != nil || id == 0 {
		t.Fatalf("InboundPolled = %d, %v", id, err)
	}
	if n, _ := db.Polls.Next(ctx, "telegram"); n != 11 {
		t.Fatalf("offset after update 10 = %d; want 11", n)
	}
	in.Take()
	for len(in.Wake()) > 0 {
		<-in.Wake()
	}
	m.ExternalID = "e2" // even a message of its own: the update is what was committed
	if _, err := in.InboundPolled(ctx, m, store.PollAck{Channel: "telegram", UpdateID: 10}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("update 10 again = %v; want ErrExists", err)
	}
	if ok, _ := db.Messages.HasWritten(ctx, "local:main"); !ok {
		t.Fatal("the first message is gone")
	}
	if woken(in) {
		t.Fatal("a committed update woke the loop again")
	}
	r := channel.Message{Chat: "local:main", ExternalID: "e3", Reaction: &channel.Reaction{TargetID: "x", Emoji: "👍"}}
	if id, err := in.InboundPolled(ctx, r, store.PollAck{Channel: "telegram", UpdateID: 11}); err != nil || id != 0 {
		t.Fatalf("reaction = %d, %v; want nothing stored", id, err)
	}
	if n, _ := db.Polls.Next(ctx, "telegram"); n != 12 {
		t.Fatalf("offset after a reaction = %d; want 12", n)
	}
}
