package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Session transcripts go with the retention, but never the one of the
// session the group resumes next, however old: the next turn resumes it.
// A link the agent planted among them is left, and what it points to.
func TestE2EOldTranscriptsPruned(t *testing.T) {
	parallel(t, long)
	e := newEnv(t, "--idle-timeout", "3s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	if got := e.ask("local:main", "fake:reply one", 90*time.Second); got != "one" {
		t.Fatalf("got %q; want the reply", got)
	}
	// The agent plants an old transcript of another session and a link
	// named as one, pointing outside its tree.
	outside := filepath.Join(e.daemonDir(t), "precious.jsonl")
	if err := os.WriteFile(outside, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-400 * 24 * time.Hour)
	if err := os.Chtimes(outside, old, old); err != nil {
		t.Fatal(err)
	}
	planted := e.bash("local:main", `d=$(dirname $(ls ~/.claude/projects/*/*.jsonl | head -1)); echo '{}' > $d/0d9a0000-0000-4000-8000-00000000dead.jsonl; touch -d '2020-01-01 00:00:00' $d/0d9a0000-0000-4000-8000-00000000dead.jsonl; ln -s `+outside+` $d/planted.jsonl; echo planted`, 90*time.Second)
	if !strings.Contains(planted, "planted") {
		t.Fatalf("the agent printed %q; want planted", planted)
	}
	projects := filepath.Join(e.home, "data", "sessions", "main", ".claude", "projects")
	files, _ := filepath.Glob(filepath.Join(projects, "*", "*.jsonl"))
	var live, dead, link string
	for _, f := range files {
		switch base := filepath.Base(f); {
		case strings.HasSuffix(base, "dead.jsonl"):
			dead = f
		case base == "planted.jsonl":
			link = f
		default:
			live = f
		}
	}
	if live == "" || dead == "" || link == "" {
		t.Fatalf("transcripts %q; want the live one, the planted one and the link", files)
	}
	// The live session's transcript is older than the retention too; its
	// container has stopped (idle), so nothing writes it meanwhile.
	if err := os.Chtimes(live, old, old); err != nil {
		t.Fatal(err)
	}
	// The retention's first pass runs a minute after the start.
	if !d.waitLog("pruned old session transcripts", 3*time.Minute) {
		t.Fatal("the retention pruned no transcript")
	}
	for path, want := range map[string]bool{live: true, dead: false, link: true, outside: true} {
		if _, err := os.Lstat(path); (err == nil) != want {
			t.Errorf("%s kept = %v; want %v", path, err == nil, want)
		}
	}
	// The next turn resumes the session: its transcript goes on.
	if got := e.ask("local:main", "fake:reply two", 90*time.Second); got != "two" {
		t.Fatalf("got %q; want the reply", got)
	}
	if b, err := os.ReadFile(live); err != nil || !strings.Contains(string(b), "two") {
		t.Errorf("the live session's transcript after the next turn: %v; want it resumed and holding the new turn", err)
	}
	d.stop(t)
}
