package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestImportTaskKeepsItsID(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	created := t0.Add(-48 * time.Hour)
	in := Task{ID: "task-1700000000000-abc123", Folder: "main", Chat: "local:main", Prompt: "p", Kind: TaskInterval, Value: "1h0m0s",
		Status: TaskPaused, NextRun: ptr(t0.Add(time.Hour)), CreatedAt: created, PromptBy: "main"}
	if _, err := db.Tasks.Import(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, err := db.Tasks.Get(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != TaskPaused || !got.CreatedAt.Equal(created) || got.PromptBy != "main" || got.NextRun == nil || !got.NextRun.Equal(t0.Add(time.Hour)) {
		t.Errorf("got %+v; want the task as given, under its own id", got)
	}
	if _, err := db.Tasks.Import(ctx, in); !errors.Is(err, ErrExists) {
		t.Errorf("second import: %v; want ErrExists", err)
	}
	for _, id := range []TaskID{"1700000000000", "task-../x", "task-ABC", ""} {
		bad := in
		bad.ID = id
		if _, err := db.Tasks.Import(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("id %q: %v; want ErrInvalid", id, err)
		}
	}
}
