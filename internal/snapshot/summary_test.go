package snapshot

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// The weekly summary tells the main chat each week's net memory gain and
// loss, bounded, once: not before it is due, not again after a restart.
func TestWeeklySummaryPostsEachWeekOnce(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC) // a Friday
	clock := func() time.Time { return now }
	f := newFixture(t, Config{Now: clock})
	for _, g := range []store.Group{{Chat: "local:main", Folder: "main", IsMain: true}, {Chat: "local:fam", Folder: "fam"}} {
		if _, err := f.db.Groups.Add(f.ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	f.write(f.groupPath("CLAUDE.md"), "# Fam\nold rule\n")
	f.turn(func() { f.write(f.groupPath("CLAUDE.md"), "# Fam\nold rule\nlast week's line\n") })
	woken := 0
	w := &Weekly{S: f.s, Now: clock, Loc: time.UTC, Wake: func() { woken++ }}
	posts := func() []string {
		t.Helper()
		items, err := f.db.Outbox.Pending(f.ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			if it.Chat != "local:main" {
				t.Errorf("posted to %s; want the main chat", it.Chat)
			}
			out = append(out, it.Text)
		}
		return out
	}
	// Monday 09:30: last week's summary.
	now = time.Date(2026, 11, 23, 9, 30, 0, 0, time.UTC)
	if ok, err := w.Once(f.ctx); !ok || err != nil {
		t.Fatalf("Once on Monday = %v, %v; want posted", ok, err)
	}
	if p := posts(); len(p) != 1 || !strings.Contains(p[0], "fam: +1 −0") || !strings.Contains(p[0], "+ CLAUDE.md: last week's line") {
		t.Fatalf("posts = %q; want last week's line", p)
	}
	// This week: a line removed, the agent's own memory gains 12.
	now = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	f.turn(func() { f.write(f.groupPath("CLAUDE.md"), "# Fam\nlast week's line\n") })
	now = now.Add(24 * time.Hour)
	f.turn(func() {
		var b strings.Builder
		for i := range 12 {
			fmt.Fprintf(&b, "fact %d\n", i)
		}
		f.write(f.claudePath("CLAUDE.md"), b.String())
	})
	for _, at := range []time.Time{time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 8, 59, 0, 0, time.UTC)} {
		now = at
		if ok, err := w.Once(f.ctx); ok || err != nil {
			t.Fatalf("Once at %v = %v, %v; want nothing before Monday 09:00", at, ok, err)
		}
	}
	now = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	if ok, err := w.Once(f.ctx); !ok || err != nil {
		t.Fatalf("Once on the next Monday = %v, %v; want posted", ok, err)
	}
	p := posts()
	if len(p) != 2 {
		t.Fatalf("posts = %q; want two", p)
	}
	for _, want := range []string{"Nov 23 – Nov 30", "fam: +12 −1", "− CLAUDE.md: old rule", "+ .claude/CLAUDE.md: fact 0", "… and 5 more"} {
		if !strings.Contains(p[1], want) {
			t.Errorf("summary %q lacks %q", p[1], want)
		}
	}
	if strings.Contains(p[1], "last week's line") {
		t.Errorf("summary %q tells last week's line again", p[1])
	}
	// A restart the same day posts nothing more.
	now = now.Add(3 * time.Hour)
	again := &Weekly{S: New(Config{Dir: f.s.cfg.Dir, Now: clock}, f.db, f.s.home, f.s.log), Now: clock, Loc: time.UTC, Wake: func() { woken++ }}
	if ok, err := again.Once(f.ctx); ok || err != nil {
		t.Fatalf("Once after a restart = %v, %v; want nothing", ok, err)
	}
	if len(posts()) != 2 || woken != 2 {
		t.Errorf("%d posts, woken %d times; want 2 and 2", len(posts()), woken)
	}
}

func TestCheckSummary(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "off": true, "weekly": true, "daily": false, "Weekly": false} {
		if (CheckSummary(v) == nil) != ok {
			t.Errorf("CheckSummary(%q) = %v", v, CheckSummary(v))
		}
	}
}
