package store

import (
	"context"
	"errors"
	"testing"
)

// An update is committed once: its offset moves only forward, a second
// commit of the same or an older update is ErrExists and rolls back what
// its transaction stored with it, and the offset survives a reopen.
func TestPollAckOnce(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/b.db"
	db := openAt(t, path)
	if n, err := db.Polls.Next(ctx, "telegram"); err != nil || n != 0 {
		t.Fatalf("Next before any update = %d, %v; want 0", n, err)
	}
	if err := db.Polls.Ack(ctx, PollAck{Channel: "telegram", UpdateID: 41}); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.Polls.Next(ctx, "telegram"); n != 42 {
		t.Errorf("Next after update 41 = %d; want 42", n)
	}
	chat := ChatID("tg:-1001")
	for _, id := range []int64{41, 7} {
		err := db.Tx(ctx, func(tx *Tx) error {
			if _, _, err := tx.Messages.InsertIn(ctx, Chat{ID: chat, Channel: "telegram"}, Message{Chat: chat, ExternalID: "m1", Text: "hi"}); err != nil {
				return err
			}
			return tx.Polls.Ack(ctx, PollAck{Channel: "telegram", UpdateID: id})
		})
		if !errors.Is(err, ErrExists) {
			t.Errorf("second commit of update %d = %v; want ErrExists", id, err)
		}
	}
	if n := count(t, db, "messages", "chat = ?", chat); n != 0 {
		t.Errorf("%d messages stored with a committed update; want 0 (rolled back)", n)
	}
	if n, _ := db.Polls.Next(ctx, "other"); n != 0 {
		t.Errorf("another channel's offset = %d; want its own, 0", n)
	}
	db.Close()
	db = openAt(t, path)
	if n, _ := db.Polls.Next(ctx, "telegram"); n != 42 {
		t.Errorf("Next after reopen = %d; want 42", n)
	}
}
