package home

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Everything claude would read as configuration is moved to the daemon's
// quarantine, keeping its path; bridged's own settings.json, the CLI's own
// plugin cache and everything else stay; no link is followed.
func TestQuarantineMovesPlantedConfiguration(t *testing.T) {
	h, dir := newHome(t)
	if err := h.Layout().Prepare(); err != nil {
		t.Fatal(err)
	}
	claude := filepath.Join(dir, "data", "sessions", "fam", ".claude")
	group := filepath.Join(dir, "groups", "fam")
	precious := outside(t)
	ours := `{"env":{}}`
	write(t, filepath.Join(claude, "settings.json"), ours)
	write(t, filepath.Join(claude, "settings.local.json"), `{"permissions":{"allow":["Bash"]}}`)
	write(t, filepath.Join(claude, "skills", "x", "SKILL.md"), "---\nallowed-tools: Bash\n---\n")
	write(t, filepath.Join(claude, "plugins", "store", "builtin.json"), "{}")
	write(t, filepath.Join(claude, "plugins", "evil", "plugin.json"), "{}")
	write(t, filepath.Join(claude, "projects", "s.jsonl"), "{}")
	write(t, filepath.Join(group, ".mcp.json"), `{"mcpServers":{}}`)
	write(t, filepath.Join(group, "pkg", ".claude", "skills", "x", "SKILL.md"), "---\nallowed-tools: Bash\n---\n")
	write(t, filepath.Join(group, "notes.md"), "keep")
	if err := os.MkdirAll(filepath.Join(group, "lnk"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(precious), filepath.Join(group, "lnk", ".claude")); err != nil {
		t.Fatal(err)
	}
	// A link to a directory outside holding a .mcp.json is never entered.
	write(t, filepath.Join(filepath.Dir(precious), ".mcp.json"), "outside")
	if err := os.Symlink(filepath.Dir(precious), filepath.Join(group, "out")); err != nil {
		t.Fatal(err)
	}

	rep, err := h.Quarantine("fam", []byte(ours), time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Partial || len(rep.Failed) > 0 {
		t.Fatalf("report %+v; want a whole walk and nothing failed", rep)
	}
	var from []string
	for _, m := range rep.Moved {
		from = append(from, m.Path)
		if !strings.HasPrefix(m.MovedTo, "data/quarantine/fam/20261128T090000.000000000Z/") {
			t.Errorf("%s moved to %s; want under the group's quarantine", m.Path, m.MovedTo)
		}
		if _, err := os.Lstat(filepath.Join(dir, m.MovedTo)); err != nil {
			t.Errorf("moved %s not found at %s: %v", m.Path, m.MovedTo, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, m.Path)); err == nil {
			t.Errorf("%s still there", m.Path)
		}
	}
	slices.Sort(from)
	want := []string{
		"data/sessions/fam/.claude/plugins/evil",
		"data/sessions/fam/.claude/settings.local.json",
		"data/sessions/fam/.claude/skills",
		"groups/fam/.mcp.json",
		"groups/fam/lnk/.claude",
		"groups/fam/pkg/.claude",
	}
	if !slices.Equal(from, want) {
		t.Errorf("moved %q; want %q", from, want)
	}
	q := filepath.Join(dir, "data", "quarantine", "fam", "20261128T090000.000000000Z")
	assertContent(t, filepath.Join(q, "group", "pkg", ".claude", "skills", "x", "SKILL.md"), "---\nallowed-tools: Bash\n---\n")
	if fi, err := os.Lstat(filepath.Join(q, "group", "lnk", ".claude")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link was not moved as a link: %v %v", fi, err)
	}
	assertContent(t, precious, "precious")
	assertContent(t, filepath.Join(filepath.Dir(precious), ".mcp.json"), "outside")
	assertContent(t, filepath.Join(claude, "settings.json"), ours)
	assertContent(t, filepath.Join(claude, "plugins", "store", "builtin.json"), "{}")
	assertContent(t, filepath.Join(group, "notes.md"), "keep")

	// A settings.json that is not ours moves too; nothing left, nothing moved.
	write(t, filepath.Join(claude, "settings.json"), `{"hooks":{}}`)
	rep, err = h.Quarantine("fam", []byte(ours), time.Date(2026, 11, 28, 9, 1, 0, 0, time.UTC))
	if err != nil || len(rep.Moved) != 1 || rep.Moved[0].Path != "data/sessions/fam/.claude/settings.json" {
		t.Fatalf("got %+v, %v; want the changed settings.json moved", rep, err)
	}
	rep, err = h.Quarantine("fam", []byte(ours), time.Now())
	if err != nil || len(rep.Moved) != 0 {
		t.Fatalf("got %+v, %v on a clean group; want nothing moved", rep, err)
	}
}

// The walk stops at its depth bound and says so.
func TestQuarantineWalkIsBounded(t *testing.T) {
	h, dir := newHome(t)
	if err := h.Layout().Prepare(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "groups", "fam")
	for range MaxQuarantineDepth + 2 {
		p = filepath.Join(p, "d")
	}
	write(t, filepath.Join(p, ".mcp.json"), "{}")
	rep, err := h.Quarantine("fam", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Partial || len(rep.Moved) != 0 {
		t.Errorf("report %+v; want a partial walk that did not reach the deep file", rep)
	}
}
