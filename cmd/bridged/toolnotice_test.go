package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/approvals"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// postedNotices records what settleApprovals posts.
type postedNotices struct{ texts []string }

func (p *postedNotices) SendMessage(_ context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	p.texts = append(p.texts, chat+"|"+string(origin)+"|"+folder+"|"+text)
	return store.OutboxItem{}, nil
}

// The owner is told once, in the main chat, that the groups registered
// before tool profiles keep full: at the first start after the upgrade of a
// store that had a group besides main, never again, and never on a store
// that had only main or nothing (a fresh install).
func TestToolProfilesNoticeOnceAfterTheUpgrade(t *testing.T) {
	const beforeProfiles = 12 // the last migration before tool profiles
	testUpgradeNotice(t, beforeProfiles, "Tool profiles:", "--tools ask")
}

// The owner is told once, in the main chat, that the main group of a home
// made before `--sees` still sees every group's folder, and how to narrow
// it; never on a store with only main or nothing (a fresh install).
func TestMainSeesNoticeOnceAfterTheUpgrade(t *testing.T) {
	const beforeSees = 20 // the last migration before the main group's sees
	testUpgradeNotice(t, beforeSees, "Other groups' folders:", "--sees")
}

// testUpgradeNotice upgrades a store from migration before and starts
// three times: the notice starting with prefix and naming flag is posted
// in the main chat once when the store had a group besides main, else
// never.
func testUpgradeNotice(t *testing.T, before int, prefix, flag string) {
	for _, tc := range []struct {
		name   string
		groups []string // folders registered before the upgrade; the first is main
		posted int
	}{
		{"fresh install", nil, 0},
		{"main only", []string{"main"}, 0},
		{"main and a family group", []string{"main", "family"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "bridged.db")
			if len(tc.groups) > 0 {
				old := storetest.Before(t, path, before)
				for i, f := range tc.groups {
					if _, err := old.ExecContext(ctx, `INSERT INTO registered_groups (chat, name, folder, is_main, created_at) VALUES (?, ?, ?, ?, 1)`,
						"local:"+f, f, f, i == 0); err != nil {
						t.Fatal(err)
					}
				}
				if err := old.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				// A fresh install registers main after the migrations.
				db := storetest.OpenAt(t, path)
				if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:main", Name: "main", Folder: "main", IsMain: true}); err != nil {
					t.Fatal(err)
				}
				db.Close()
			}
			p := &postedNotices{}
			for start := 1; start <= 3; start++ {
				db := storetest.OpenAt(t, path)
				ap := approvals.New(db, nil, 0, zerolog.Nop())
				if err := settleApprovals(ctx, db, ap, p, zerolog.Nop()); err != nil {
					t.Fatalf("start %d: %v", start, err)
				}
				db.Close()
			}
			var got []string
			for _, s := range p.texts {
				if strings.HasPrefix(s, "local:main|notice||"+prefix) {
					got = append(got, s)
				}
			}
			if len(got) != tc.posted {
				t.Fatalf("posted %q over three starts; want %d notice(s) starting %q", p.texts, tc.posted, prefix)
			}
			for _, s := range got {
				if !strings.Contains(s, flag) {
					t.Errorf("notice %q; want it to name %s", s, flag)
				}
			}
		})
	}
}
