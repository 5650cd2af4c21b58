package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/snapshot"
	"github.com/bridged-app/bridged/internal/store"
)

// With the daemon stopped, `changes`, `diff` and `undo` read and write the
// home directly: a turn's change is listed and shown, its undo puts the
// file back and is itself listed.
func TestChangesDiffUndoStopped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--home", dir, "--name", "fam", "local:fam"); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, filepath.Join(dir, "store", "bridged.db"), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	s := snapshot.New(snapshot.Config{Dir: hm.Layout().SnapshotsDir()}, db, hm, zerolog.Nop())
	note := filepath.Join(hm.Layout().GroupDir("fam"), "note.txt")
	if _, err := s.Begin(ctx, snapshot.Start{Folder: "fam", Kind: store.ChangeTurn}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(note, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.End(ctx, snapshot.Finish{Folder: "fam"}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	out, _, err := cli(t, ctx, nil, "", "changes", "--home", dir, "fam")
	if err != nil || !strings.Contains(out, "files changed: +1 −0") {
		t.Fatalf("changes: %v\n%s", err, out)
	}
	out, _, err = cli(t, ctx, nil, "", "diff", "--home", dir, "fam", "1")
	if err != nil || !strings.Contains(out, "added note.txt") || !strings.Contains(out, "+hello") {
		t.Fatalf("diff: %v\n%s", err, out)
	}
	out, _, err = cli(t, ctx, nil, "", "undo", "--home", dir, "fam", "1")
	if err != nil || !strings.Contains(out, "restored note.txt") || !strings.Contains(out, "recorded as turn 2") {
		t.Fatalf("undo: %v\n%s", err, out)
	}
	if _, err := os.Lstat(note); !os.IsNotExist(err) {
		t.Errorf("note.txt after undo: %v", err)
	}
	if _, _, err := cli(t, ctx, nil, "", "diff", "--home", dir, "fam", "x"); err == nil {
		t.Error("diff of turn x: no error")
	}
}
