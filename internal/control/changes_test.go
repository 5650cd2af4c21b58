package control

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/snapshot"
	"github.com/bridged-app/bridged/internal/store"
)

// The owner's /undo in the main chat undoes a turn and says what it did;
// a conflict is told with how to choose; an undo while the turn runs is
// refused with the reason; anyone else's /undo is refused; a /undo in
// another chat, or another text, is not taken.
func TestChatUndo(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	dir := t.TempDir()
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := hm.Layout().Prepare(); err != nil {
		t.Fatal(err)
	}
	busy := false
	a := &Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC,
		Snapshots: snapshot.New(snapshot.Config{Dir: hm.Layout().SnapshotsDir()}, db, hm, zerolog.Nop()),
		Idle: func(_ store.Folder, fn func() error) error {
			if busy {
				return agentrun.ErrTurnRunning
			}
			return fn()
		}}
	for _, g := range []GroupAdd{{Chat: "local:main", Name: "main", IsMain: true}, {Chat: "local:fam", Name: "fam", Folder: "fam"}} {
		if _, err := a.AddGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	note := filepath.Join(hm.Layout().GroupDir("fam"), "note.txt")
	turn := func(text string) store.ChangeID {
		id, err := a.Snapshots.Begin(ctx, snapshot.Start{Folder: "fam", Kind: store.ChangeTurn})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(note, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := a.Snapshots.End(ctx, snapshot.Finish{Folder: "fam"}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := turn("one\n")
	turn("two\n")
	say := func(chat, text string, owner bool) (string, bool) {
		return a.ChatUndo(ctx, channel.Message{Chat: chat, Text: text, FromMe: owner})
	}
	for _, tc := range []struct {
		chat, text string
		owner      bool
		taken      bool
		want       string
	}{
		{"local:fam", "/undo fam 1", true, false, ""},
		{"local:main", "undo fam 1", true, false, ""},
		{"local:main", "/undo fam 1", false, true, "Only the owner"},
		{"local:main", "/undo fam", true, true, "Usage: /undo GROUP TURN"},
		{"local:main", "/undo fam 1", true, true, "changed again since the turn"},
	} {
		got, taken := say(tc.chat, tc.text, tc.owner)
		if taken != tc.taken || !strings.Contains(got, tc.want) {
			t.Errorf("%s %q (owner %v): %q, taken %v; want %q, %v", tc.chat, tc.text, tc.owner, got, taken, tc.want, tc.taken)
		}
	}
	busy = true
	if got, _ := say("local:main", "/undo fam 1 force", true); !strings.Contains(got, "working on a turn") {
		t.Errorf("while the turn runs: %q; want it refused with the reason", got)
	}
	busy = false
	got, _ := say("local:main", "/undo fam 1 force", true)
	if !strings.Contains(got, "Undone: note.txt of fam") || !strings.Contains(got, "overwritten") {
		t.Errorf("forced: %q", got)
	}
	if _, err := os.Lstat(note); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("note.txt after undo of turn %d: %v", first, err)
	}
}
