package store

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/migrations"
)

func TestApprovalDecidedOnce(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	err := db.Tx(ctx, func(tx *Tx) error {
		_, err := tx.Approvals.Add(ctx, Approval{ID: "abcd", Folder: "fam", RequestID: "r1", Tool: "Bash", Subject: "rm x", Rule: "Bash(rm x)"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Tx(ctx, func(tx *Tx) error {
		_, err := tx.Approvals.Add(ctx, Approval{ID: "efgh", Folder: "fam", RequestID: "r1", Tool: "Bash"})
		return err
	})
	if !errors.Is(err, ErrExists) {
		t.Errorf("a second approval for the same request = %v; want ErrExists", err)
	}
	decide := func(allow bool) bool {
		var changed bool
		if err := db.Tx(ctx, func(tx *Tx) error {
			var err error
			changed, err = tx.Approvals.Decide(ctx, "abcd", allow, false, "cli")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return changed
	}
	if !decide(true) {
		t.Fatal("the first decision changed nothing")
	}
	if decide(false) {
		t.Fatal("a second decision changed the request")
	}
	a, err := db.Approvals.Get(ctx, "abcd")
	if err != nil || a.State != ApprovalAllowed || a.DecidedBy != "cli" || a.DecidedAt.IsZero() {
		t.Errorf("got %+v, %v; want allowed by cli", a, err)
	}
}

// The tool-profile notice is owed only when groups other than the main
// one existed before profiles, and is taken once.
func TestTakeNoticeOnce(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	if told, err := db.Notices.Take(ctx, "tool_profiles"); err != nil || told {
		t.Fatalf("fresh store: TakeNotice = %v, %v; want nothing owed", told, err)
	}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO pending_notices (name) VALUES ('tool_profiles')`); err != nil {
		t.Fatal(err)
	}
	if told, _ := db.Notices.Take(ctx, "tool_profiles"); !told {
		t.Fatal("the pending notice was not taken")
	}
	if told, _ := db.Notices.Take(ctx, "tool_profiles"); told {
		t.Fatal("the notice was taken twice")
	}
}

// Upgrading to tool profiles owes the notice once when a group other than
// the main one was registered before, and never when only the main group
// was (or nothing was, a fresh install); every group then keeps full.
func TestToolProfilesNoticeOnUpgrade(t *testing.T) {
	ctx := context.Background()
	before := fstest.MapFS{}
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n >= "0013" {
			continue
		}
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		before[n] = &fstest.MapFile{Data: b}
	}
	for _, tc := range []struct {
		name   string
		groups [][2]string // chat, folder; the first is main
		owed   bool
	}{
		{"fresh install", nil, false},
		{"main only", [][2]string{{"local:main", "main"}}, false},
		{"main and a family group", [][2]string{{"local:main", "main"}, {"123@g.us", "family"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bridged.db")
			db, err := open(ctx, path, zerolog.Nop(), before)
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range tc.groups {
				if _, err := db.write.ExecContext(ctx, `INSERT INTO registered_groups (chat, name, folder, is_main, created_at)
					VALUES (?, ?, ?, ?, 1)`, g[0], g[1], g[1], i == 0); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()

			for reopen := 0; reopen < 2; reopen++ {
				db = openAt(t, path)
				told, err := db.Notices.Take(ctx, "tool_profiles")
				if err != nil {
					t.Fatal(err)
				}
				if want := tc.owed && reopen == 0; told != want {
					t.Errorf("start %d: notice owed = %v; want %v", reopen+1, told, want)
				}
				gs, err := db.Groups.List(ctx)
				if err != nil || len(gs) != len(tc.groups) {
					t.Fatalf("groups = %d, %v; want %d", len(gs), err, len(tc.groups))
				}
				for _, g := range gs {
					if g.Tools != ToolsFull {
						t.Errorf("group %s has tools %q after the upgrade; want full", g.Folder, g.Tools)
					}
				}
				db.Close()
			}
		})
	}
}

// A group's standing rules are dropped when its profile changes (in the
// transaction that changes it), and kept by any other change; a group
// registered again does not inherit the rules of one removed before.
func TestApprovalRulesDroppedWithTheProfile(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	for _, f := range []Folder{"fam", "work"} {
		if _, err := db.Groups.Add(ctx, Group{Chat: ChatID("local:" + f), Folder: f, Tools: ToolsAsk}); err != nil {
			t.Fatal(err)
		}
	}
	addRules := func() {
		t.Helper()
		if err := db.Tx(ctx, func(tx *Tx) error {
			for _, f := range []Folder{"fam", "work"} {
				if err := tx.Approvals.AddRule(ctx, f, "Bash(make)", "cli"); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	has := func(f Folder) bool {
		t.Helper()
		ok, err := db.Approvals.HasRule(ctx, f, "Bash(make)")
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	addRules()
	g, _ := db.Groups.ByFolder(ctx, "fam")
	g.Name = "Family"
	if err := db.Groups.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	if !has("fam") {
		t.Fatal("a change other than the profile dropped the rules")
	}
	for _, p := range []ToolProfile{ToolsFull, ToolsAsk} {
		g.Tools = p
		if err := db.Groups.Update(ctx, g); err != nil {
			t.Fatal(err)
		}
		if has("fam") {
			t.Errorf("rules kept after the profile became %s", p)
		}
		if !has("work") {
			t.Fatal("another group's rules were dropped")
		}
		addRules()
	}
	if err := db.Groups.Remove(ctx, "fam"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Groups.Add(ctx, Group{Chat: "local:fam", Folder: "fam", Tools: ToolsAsk}); err != nil {
		t.Fatal(err)
	}
	if has("fam") {
		t.Error("a group registered again inherited the rules of the one removed")
	}
}
