package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// insertWithMedia stores a message of chat and, when label is not empty, its
// pending media, in one transaction.
func insertWithMedia(t *testing.T, db *DB, chat ChatID, ext, text, label string) MessageID {
	t.Helper()
	ctx := context.Background()
	var id MessageID
	err := db.Tx(ctx, func(tx *Tx) error {
		var err error
		id, _, err = tx.Messages.Insert(ctx, Message{Chat: chat, ExternalID: ext, Sender: "u", Text: text})
		if err != nil || label == "" {
			return err
		}
		return tx.Media.Insert(ctx, Media{MessageID: id, Chat: chat, Source: "upload", Ref: []byte(`{"key":"up-1"}`),
			Label: label, Name: ext + ".jpg", MIME: "image/jpeg", Size: 10, Head: "@Andy look\n", Tail: "\n> quoted"})
	})
	if err != nil {
		t.Fatalf("insert %s: %v", ext, err)
	}
	return id
}

func pendingTexts(t *testing.T, db *DB, chat ChatID) []string {
	t.Helper()
	msgs, _, err := db.Messages.Pending(context.Background(), chat, 0, 0)
	if err != nil {
		t.Fatalf("PendingMessages: %v", err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, m.Text)
	}
	return out
}

// A message whose media is being fetched holds back itself and every later
// message of its chat, never an earlier one or another chat's; settling it
// releases them with the final placeholder in the text.
func TestPendingMediaHoldsItsTurn(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	addGroup(t, db, "c1", "one")
	addGroup(t, db, "c2", "two")
	insertWithMedia(t, db, "c1", "a", "before", "")
	img := insertWithMedia(t, db, "c1", "b", "@Andy look\n[image: downloading]\n> quoted", "image")
	insertWithMedia(t, db, "c1", "c", "after", "")
	insertWithMedia(t, db, "c2", "d", "other chat", "")

	if got := pendingTexts(t, db, "c1"); len(got) != 1 || got[0] != "before" {
		t.Fatalf("pending while the media is fetched = %q; want only the earlier message", got)
	}
	if got := pendingTexts(t, db, "c2"); len(got) != 1 {
		t.Fatalf("another chat's pending = %q; want its message", got)
	}
	if st, err := db.Stats(ctx); err != nil || st.PendingMedia != 1 {
		t.Fatalf("Stats = %+v, %v; want 1 pending media", st, err)
	}
	pend, err := db.Media.Pending(ctx)
	if err != nil || len(pend) != 1 || pend[0].MessageID != img || pend[0].Label != "image" || string(pend[0].Ref) != `{"key":"up-1"}` {
		t.Fatalf("PendingMedia = %+v, %v; want the image", pend, err)
	}
	if n, err := db.Media.Start(ctx, img); err != nil || n != 1 {
		t.Fatalf("StartMedia = %d, %v; want 1", n, err)
	}
	if n, _ := db.Media.Start(ctx, img); n != 2 {
		t.Fatalf("second StartMedia = %d; want 2", n)
	}

	ok, err := db.Media.Settle(ctx, img, MediaSaved, "[image: inbox/b.jpg]")
	if err != nil || !ok {
		t.Fatalf("SettleMedia = %v, %v; want true", ok, err)
	}
	got := pendingTexts(t, db, "c1")
	want := []string{"before", "@Andy look\n[image: inbox/b.jpg]\n> quoted", "after"}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("pending after settling = %q; want %q", got, want)
	}
	if ok, err := db.Media.Settle(ctx, img, MediaFailed, "[image: download failed]"); err != nil || ok {
		t.Fatalf("second SettleMedia = %v, %v; want false, nothing changed", ok, err)
	}
	if m, err := db.Media.Get(ctx, img); err != nil || m.State != MediaSaved || m.Detail != "[image: inbox/b.jpg]" {
		t.Fatalf("GetMedia = %+v, %v; want saved with its placeholder", m, err)
	}
	if pend, _ := db.Media.Pending(ctx); len(pend) != 0 {
		t.Fatalf("PendingMedia after settling = %+v; want none", pend)
	}
	if st, _ := db.Stats(ctx); st.PendingMedia != 0 {
		t.Fatalf("Stats after settling = %+v; want no pending media", st)
	}
	if _, err := db.Media.Start(ctx, img); !errors.Is(err, ErrNotFound) {
		t.Fatalf("StartMedia of settled media = %v; want ErrNotFound", err)
	}
	// A held message behind the cursor no longer matters.
	msgs, _, err := db.Messages.Pending(ctx, "c1", img, 0)
	if err != nil || len(msgs) != 1 || msgs[0].Text != "after" {
		t.Fatalf("pending after the image = %+v, %v", msgs, err)
	}
}

func TestInsertMediaRefusesBadInput(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	err := db.Tx(ctx, func(tx *Tx) error { return tx.Media.Insert(ctx, Media{MessageID: 1, Chat: "c1", Source: "upload"}) })
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("InsertMedia without label and name = %v; want ErrInvalid", err)
	}
	if _, err := db.Media.Settle(ctx, 1, MediaPending, "x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SettleMedia to pending = %v; want ErrInvalid", err)
	}
}

// Pruning a message removes its media row with it.
func TestMediaGoesWithItsMessage(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	addGroup(t, db, "c1", "one")
	id := insertWithMedia(t, db, "c1", "b", "[image: downloading]", "image")
	if _, err := db.write.ExecContext(ctx, `DELETE FROM messages WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "media", ""); n != 0 {
		t.Fatalf("media rows after their message went = %d; want 0", n)
	}
}

// insertPostFile stores a message of chat with the pending media of file
// n of a post of `of` files.
func insertPostFile(t *testing.T, db *DB, chat ChatID, ext, post string, of int) MessageID {
	t.Helper()
	ctx := context.Background()
	var id MessageID
	err := db.Tx(ctx, func(tx *Tx) error {
		var err error
		id, _, err = tx.Messages.Insert(ctx, Message{Chat: chat, ExternalID: ext, Sender: "u", Text: "[document: downloading]"})
		if err != nil {
			return err
		}
		return tx.Media.Insert(ctx, Media{MessageID: id, Chat: chat, Source: "upload",
			Ref:   []byte(fmt.Sprintf(`{"key":"up-%s","post":%q,"of":%d}`, ext, post, of)),
			Label: "document", Name: ext + ".txt"})
	})
	if err != nil {
		t.Fatalf("insert %s: %v", ext, err)
	}
	return id
}

// The files of one post wait for one another: none is pending until every
// file of the post is stored and settled, whatever order they settle in; a
// post whose other files were never stored lets its files go after
// PostWait.
func TestPostFilesHoldTogether(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	addGroup(t, db, "c1", "one")
	a := insertPostFile(t, db, "c1", "a", "p1", 3)
	b := insertPostFile(t, db, "c1", "b", "p1", 3)
	settle := func(id MessageID) {
		t.Helper()
		if ok, err := db.Media.Settle(ctx, id, MediaSaved, fmt.Sprintf("[document: inbox/%d.txt]", id)); err != nil || !ok {
			t.Fatalf("SettleMedia(%d) = %v, %v", id, ok, err)
		}
	}
	settle(a)
	settle(b)
	if got := pendingTexts(t, db, "c1"); len(got) != 0 {
		t.Fatalf("pending with the post's third file not stored = %q; want nothing", got)
	}
	c := insertPostFile(t, db, "c1", "c", "p1", 3)
	if got := pendingTexts(t, db, "c1"); len(got) != 0 {
		t.Fatalf("pending with the third file being fetched = %q; want nothing", got)
	}
	settle(c)
	if got := pendingTexts(t, db, "c1"); len(got) != 3 {
		t.Fatalf("pending with the whole post settled = %q; want its three files", got)
	}

	// A post that failed half-way: its stored file holds the chat for
	// PostWait, then goes.
	addGroup(t, db, "c2", "two")
	d := insertPostFile(t, db, "c2", "d", "p2", 2)
	settle(d)
	insertWithMedia(t, db, "c2", "e", "later", "")
	if got := pendingTexts(t, db, "c2"); len(got) != 0 {
		t.Fatalf("pending of a half-stored post = %q; want nothing yet", got)
	}
	db.now = func() time.Time { return t0.Add(PostWait + time.Second) }
	if got := pendingTexts(t, db, "c2"); len(got) != 2 {
		t.Fatalf("pending of a half-stored post after PostWait = %q; want its file and the later message", got)
	}
}
