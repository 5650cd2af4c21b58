package store

import (
	"context"
	"errors"
	"path/filepath"
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
		if _, err := tx.Tasks.Create(ctx, Task{Folder: "main", Chat: "local:main", Prompt: "p", Kind: "cron", Value: "v"}); err != nil {
			return err
		}
		if err := tx.Requests.Record(ctx, handled("main", "r1", `{"id":"r1","ok":true}`)); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Tx = %v; want boom", err)
	}
	if _, err := db.Requests.Get(ctx, "main", "r1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("record after rollback: %v; want ErrNotFound", err)
	}
	if n := count(t, db, "tasks", ""); n != 0 {
		t.Errorf("%d tasks after rollback; want 0", n)
	}

	// Committed with it.
	if err := db.Tx(ctx, func(tx *Tx) error {
		if _, err := tx.Tasks.Create(ctx, Task{Folder: "main", Chat: "local:main", Prompt: "p", Kind: "cron", Value: "v"}); err != nil {
			return err
		}
		return tx.Requests.Record(ctx, handled("main", "r1", `{"id":"r1","ok":true}`))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openAt(t, path)
	got, err := db.Requests.Get(ctx, "main", "r1")
	if err != nil {
		t.Fatal(err)
	}
	want := HandledRequest{Folder: "main", ID: "r1", Type: "schedule_task", Response: []byte(`{"id":"r1","ok":true}`), HandledAt: t0}
	if got.Folder != want.Folder || got.ID != want.ID || got.Type != want.Type || string(got.Response) != string(want.Response) || !got.HandledAt.Equal(t0) {
		t.Errorf("HandledRequest = %+v; want %+v", got, want)
	}

	// A second record of the same request fails, and its effect with it.
	err = db.Tx(ctx, func(tx *Tx) error {
		if _, err := tx.Tasks.Create(ctx, Task{Folder: "main", Chat: "local:main", Prompt: "p", Kind: "cron", Value: "v"}); err != nil {
			return err
		}
		return tx.Requests.Record(ctx, handled("main", "r1", `{"id":"r1","ok":true}`))
	})
	if !errors.Is(err, ErrExists) {
		t.Errorf("recording r1 again = %v; want ErrExists", err)
	}
	if n := count(t, db, "tasks", ""); n != 1 {
		t.Errorf("%d tasks; want 1 (the duplicate's rolled back)", n)
	}
	// The same id from another group is another request.
	if err := db.Tx(ctx, func(tx *Tx) error { return tx.Requests.Record(ctx, handled("work", "r1", `{}`)) }); err != nil {
		t.Errorf("r1 of another group: %v", err)
	}
	if err := db.Tx(ctx, func(tx *Tx) error { return tx.Requests.Record(ctx, HandledRequest{Folder: "main", ID: "r2"}) }); !errors.Is(err, ErrInvalid) {
		t.Errorf("record without type and response = %v; want ErrInvalid", err)
	}

	if err := db.Tx(ctx, func(tx *Tx) error { return tx.Requests.Forget(ctx, "work", "r1") }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Requests.Get(ctx, "work", "r1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("forgotten request: %v; want ErrNotFound", err)
	}
}

func TestPruneHandledRequests(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	for i, at := range []time.Time{t0.Add(-8 * 24 * time.Hour), t0.Add(-6 * 24 * time.Hour), t0} {
		db.now = func() time.Time { return at }
		id := string(rune('a' + i))
		if err := db.Tx(ctx, func(tx *Tx) error { return tx.Requests.Record(ctx, handled("main", id, `{}`)) }); err != nil {
			t.Fatal(err)
		}
	}
	db.now = func() time.Time { return t0 }
	n, err := db.Requests.Prune(ctx, 7*24*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("PruneHandledRequests = %d, %v; want 1", n, err)
	}
	if _, err := db.Requests.Get(ctx, "main", "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("8-day-old record kept: %v", err)
	}
	for _, id := range []string{"b", "c"} {
		if _, err := db.Requests.Get(ctx, "main", id); err != nil {
			t.Errorf("record %s pruned: %v", id, err)
		}
	}
}
