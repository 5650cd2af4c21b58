package store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func handled(folder Folder, id, resp string) HandledRequest {
	return HandledRequest{Folder: folder, ID: id, Type: "schedule_task", Response: []byte(resp)}
}

// A request's record commits and rolls back with its effect, exists once
// per (folder, id), and outlives a restart.
func TestRecordRequest(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridged.db")
	db := openAt(t, path)
	errBoom := errors.New("boom")

	// Rolled back together with the task it was recorded with.
	err := db.Tx(ctx, func(tx *Tx) error {
		if _, err := tx.CreateTask(ctx, Task{Folder: "main", Chat: "local:main", Prompt: "p", Kind: "cron", Value: "v"}); err != nil {
			return err
		}
		if err := tx.RecordRequest(ctx, handled("main", "r1", `{"id":"r1","ok":true}`)); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Tx = %v; want boom", err)
	}
	if _, err := db.HandledRequest(ctx, "main", "r1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("record after rollback: %v; want ErrNotFound", err)
	}
	if n := count(t, db, "tasks", ""); n != 0 {
		t.Errorf("%d tasks after rollback; want 0", n)
	}

	// Committed with it.
	if err := db.Tx(ctx, func(tx *Tx) error {
		if _, err := tx.CreateTask(ctx, Task{Folder: "main", Chat: "local:main", Prompt: "p", Kind: "cron", Value: "v"}); err != nil {
			return err
		}
		return tx.RecordRequest(ctx, handled("main", "r1", `{"id":"r1","ok":true}`))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openAt(t, path)
	got, err := db.HandledRequest(ctx, "main", "r1")
	if err != nil {
		t.Fatal(err)
	}
	want := HandledRequest{Folder: "main", ID: "r1", Type: "schedule_task", Response: []byte(`{"id":"r1","ok":true}`), HandledAt: t0}
	if got.Folder != want.Folder || got.ID != want.ID || got.Type != want.Type || string(got.Response) != string(want.Response) || !got.HandledAt.Equal(t0) {
		t.Errorf("HandledRequest = %+v; want %+v", got, want)
	}

	// A second record of the same request fails, and its effect with it.
	err = db.Tx(ctx, func(tx *Tx) error {
		if _, err := tx.CreateTask(ctx, Task{Folder: "main", Chat: "local:main", Prompt: "p", Kind: "cron", Value: "v"}); err != nil {
			return err
		}
		return tx.RecordRequest(ctx, handled("main", "r1", `{"id":"r1","ok":true}`))
	})
	if !errors.Is(err, ErrExists) {
		t.Errorf("recording r1 again = %v; want ErrExists", err)
	}
	if n := count(t, db, "tasks", ""); n != 1 {
		t.Errorf("%d tasks; want 1 (the duplicate's rolled back)", n)
	}
	// The same id from another group is another request.
	if err := db.Tx(ctx, func(tx *Tx) error { return tx.RecordRequest(ctx, handled("work", "r1", `{}`)) }); err != nil {
		t.Errorf("r1 of another group: %v", err)
	}
	if err := db.Tx(ctx, func(tx *Tx) error { return tx.RecordRequest(ctx, HandledRequest{Folder: "main", ID: "r2"}) }); !errors.Is(err, ErrInvalid) {
		t.Errorf("record without type and response = %v; want ErrInvalid", err)
	}

	if err := db.Tx(ctx, func(tx *Tx) error { return tx.ForgetRequest(ctx, "work", "r1") }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.HandledRequest(ctx, "work", "r1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("forgotten request: %v; want ErrNotFound", err)
	}
}

func TestPruneHandledRequests(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	for i, at := range []time.Time{t0.Add(-8 * 24 * time.Hour), t0.Add(-6 * 24 * time.Hour), t0} {
		db.now = func() time.Time { return at }
		id := string(rune('a' + i))
		if err := db.Tx(ctx, func(tx *Tx) error { return tx.RecordRequest(ctx, handled("main", id, `{}`)) }); err != nil {
			t.Fatal(err)
		}
	}
	db.now = func() time.Time { return t0 }
	n, err := db.PruneHandledRequests(ctx, 7*24*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("PruneHandledRequests = %d, %v; want 1", n, err)
	}
	if _, err := db.HandledRequest(ctx, "main", "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("8-day-old record kept: %v", err)
	}
	for _, id := range []string{"b", "c"} {
		if _, err := db.HandledRequest(ctx, "main", id); err != nil {
			t.Errorf("record %s pruned: %v", id, err)
		}
	}
}

// What OnEnqueue sets runs inside the transaction that enqueues the row: its
// error rolls the row back, and a DB.Tx around the enqueue commits both.
func TestOnEnqueue(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	item := OutboxItem{Chat: "local:main", Group: "main", Text: "hello", Origin: OriginTool}
	errBoom := errors.New("boom")

	var seen OutboxItem
	failing := OnEnqueue(ctx, func(tx *Tx, it OutboxItem) error {
		seen = it
		return errBoom
	})
	if _, err := db.EnqueueOutbox(failing, item); !errors.Is(err, errBoom) {
		t.Fatalf("EnqueueOutbox with a failing hook = %v; want boom", err)
	}
	if seen.ID == 0 || seen.Text != "hello" {
		t.Errorf("hook saw %+v; want the stored row", seen)
	}
	if n := count(t, db, "outbox", ""); n != 0 {
		t.Fatalf("%d outbox rows after the hook failed; want 0", n)
	}

	recording := OnEnqueue(ctx, func(tx *Tx, it OutboxItem) error {
		return tx.RecordRequest(ctx, HandledRequest{Folder: it.Group, ID: "r1", Type: "send_message", Response: []byte(`{"outbox_id":1}`)})
	})
	// As the router does it: its own transaction around the enqueue.
	if err := db.Tx(recording, func(tx *Tx) error {
		_, err := tx.EnqueueOutbox(recording, item)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "outbox", ""); n != 1 {
		t.Errorf("%d outbox rows; want 1", n)
	}
	if _, err := db.HandledRequest(ctx, "main", "r1"); err != nil {
		t.Errorf("record: %v; want it committed with the row", err)
	}
	// Recording the same request again fails the enqueue: no second row.
	if _, err := db.EnqueueOutbox(recording, item); !errors.Is(err, ErrExists) {
		t.Errorf("second enqueue of r1 = %v; want ErrExists", err)
	}
	if n := count(t, db, "outbox", ""); n != 1 {
		t.Errorf("%d outbox rows; want still 1", n)
	}
	// Without the hook, nothing is recorded.
	if _, err := db.EnqueueOutbox(ctx, item); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "handled_requests", ""); n != 1 {
		t.Errorf("%d records; want 1", n)
	}
}

// A second OnEnqueue adds to the first: both run, the outer one first, and
// the inner one only when the outer one succeeded.
func TestOnEnqueueChains(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	item := OutboxItem{Chat: "local:main", Group: "main", Text: "hello", Origin: OriginTool}
	var order []string
	outer := OnEnqueue(ctx, func(tx *Tx, it OutboxItem) error { order = append(order, "outer"); return nil })
	both := OnEnqueue(outer, func(tx *Tx, it OutboxItem) error { order = append(order, "inner"); return nil })
	if _, err := db.EnqueueOutbox(both, item); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ","); got != "outer,inner" {
		t.Errorf("hooks ran %q; want outer,inner", got)
	}
	order = nil
	errBoom := errors.New("boom")
	failing := OnEnqueue(ctx, func(tx *Tx, it OutboxItem) error { order = append(order, "outer"); return errBoom })
	failing = OnEnqueue(failing, func(tx *Tx, it OutboxItem) error { order = append(order, "inner"); return nil })
	if _, err := db.EnqueueOutbox(failing, item); !errors.Is(err, errBoom) {
		t.Fatalf("enqueue = %v; want boom", err)
	}
	if got := strings.Join(order, ","); got != "outer" {
		t.Errorf("hooks ran %q; want only outer", got)
	}
}
