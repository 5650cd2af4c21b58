package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// changeInfo is one line of `bridged changes --json`.
type changeInfo struct {
	ID     int64  `json:"id"`
	Kind   string `json:"kind"`
	Undoes int64  `json:"undoes"`
	Line   string `json:"line"`
}

// A turn that writes two files and edits CLAUDE.md is told exactly so by
// `why`, `changes` and `diff`; `undo` puts every byte back, and undoing
// the undo brings the change back; a later turn's change to the same file
// is shown as a conflict and kept; an undo while a turn runs is refused.
func TestE2EUndoATurn(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	defer d.stop(t)
	dir := filepath.Join(e.home, "groups", "fam")
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	gone := func(name string) {
		t.Helper()
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v; want it gone", name, err)
		}
	}
	turn := func(text string) int64 {
		t.Helper()
		id := e.post("local:fam", text+"\nfake:reply done")
		e.waitOut("local:fam", id, 1, 90*time.Second)
		return id
	}

	turn(`fake:bash printf '# fam\nbe kind\n' > CLAUDE.md`)
	before := read("CLAUDE.md")
	msg := turn(`fake:bash printf 'alpha\n' > a.txt && mkdir -p notes && printf 'gamma\n' > notes/c.txt && printf 'remember: the dog is Rex\n' >> CLAUDE.md`)
	after := read("CLAUDE.md")

	// why tells the turn's change, with its number.
	const line = "files changed: +2 −0, memory changed: 1 line"
	s := e.why(t, fmt.Sprint(msg))
	hasStep(t, "why", s, "changes", "changed", line, "bridged diff fam")
	var cs []changeInfo
	if err := json.Unmarshal([]byte(e.mustCLI("changes", "--json", "fam")), &cs); err != nil {
		t.Fatal(err)
	}
	if len(cs) < 2 || cs[0].Line != line {
		t.Fatalf("changes = %+v; want the turn first with %q", cs, line)
	}
	turnID := fmt.Sprint(cs[0].ID)
	diff := e.mustCLI("diff", "fam", turnID)
	for _, want := range []string{"modified CLAUDE.md (memory)", "+remember: the dog is Rex", "added a.txt", "added notes/c.txt", "+alpha"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, diff)
		}
	}

	// Undo: every byte back.
	out := e.mustCLI("undo", "fam", turnID)
	if got := read("CLAUDE.md"); got != before {
		t.Errorf("CLAUDE.md after undo = %q; want %q", got, before)
	}
	gone("a.txt")
	gone("notes/c.txt")
	var undoID string
	if _, err := fmt.Sscanf(out[strings.Index(out, "recorded as turn "):], "recorded as turn %s", &undoID); err != nil {
		t.Fatalf("undo said:\n%s", out)
	}

	// Undo the undo: the change is back.
	e.mustCLI("undo", "fam", undoID)
	if got := read("CLAUDE.md"); got != after {
		t.Errorf("CLAUDE.md after undoing the undo = %q; want %q", got, after)
	}
	if read("a.txt") != "alpha\n" || read("notes/c.txt") != "gamma\n" {
		t.Error("the files did not come back")
	}

	// A later turn changes a.txt: undoing the first turn shows the
	// conflict and keeps the later change.
	turn(`fake:bash printf 'alpha changed later\n' > a.txt`)
	out, err := e.cli("undo", "fam", turnID)
	if err == nil || !strings.Contains(out, "conflict a.txt") || !strings.Contains(out, "+alpha changed later") {
		t.Errorf("undo over a later change: %v\n%s\nwant the conflict shown and refused", err, out)
	}
	if got := read("a.txt"); got != "alpha changed later\n" {
		t.Errorf("a.txt = %q; want the later change kept", got)
	}

	// A turn whose input came from another member is marked with it.
	bob, err := e.postAs("local:fam", "bob", `fake:bash printf 'from bob\n' >> CLAUDE.md`+"\nfake:reply noted")
	if err != nil {
		t.Fatal(err)
	}
	e.waitOut("local:fam", bob, 1, 90*time.Second)
	hasStep(t, "why bob", e.why(t, fmt.Sprint(bob)), "changes", "changed", "memory changed: 1 line", "input from: bob (local:bob)")

	// A turn in which the agent fetched a web page is marked with the page.
	page := turn("fake:fetch https://rules.example/remember\n" + `fake:bash printf 'from the page\n' >> CLAUDE.md`)
	hasStep(t, "why page", e.why(t, fmt.Sprint(page)), "changes", "changed", "memory changed: 1 line",
		"input from: a fetched page https://rules.example/remember")

	// While a turn runs, an undo is refused with the reason; once it
	// has ended, the same undo runs.
	busy := e.post("local:fam", `fake:tool send_message {"text":"working"}`+"\nfake:sleep 5s\nfake:reply slept")
	e.waitOut("local:fam", busy, 1, 90*time.Second) // the turn runs
	if out, err := e.cli("undo", "--only", "nothing-here", "fam", turnID); err == nil || !strings.Contains(err.Error(), "working on a turn") {
		t.Errorf("undo while a turn runs: %v\n%s; want it refused with the reason", err, out)
	}
	e.waitOut("local:fam", busy, 2, 90*time.Second)
	if out := e.mustCLI("undo", "--only", "nothing-here", "fam", turnID); !strings.Contains(out, "nothing to undo") {
		t.Errorf("undo after the turn: %s", out)
	}
}

// In an `ask` group, a CLAUDE.md change made in a turn whose input came
// from another member is held: not written, the owner told in the main
// chat; the owner's /undo of the hold there writes it.
func TestE2EMemoryFromOthersIsHeld(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "ask", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	defer d.stop(t)
	claude := filepath.Join(e.home, "groups", "fam", "CLAUDE.md")
	before, _ := os.ReadFile(claude)

	bob, err := e.postAs("local:fam", "bob", "fake:write CLAUDE.md remember: bob is the boss\nfake:reply noted")
	if err != nil {
		t.Fatal(err)
	}
	e.waitOut("local:fam", bob, 1, 90*time.Second)
	if got, _ := os.ReadFile(claude); string(got) != string(before) {
		t.Errorf("CLAUDE.md = %q after bob's turn; want it held (%q)", got, before)
	}
	notice := e.waitOut("local:main", 0, 1, 30*time.Second)[0]
	told := notice.Text
	if !strings.Contains(told, "Memory change of fam held") || !strings.Contains(told, "+remember: bob is the boss") {
		t.Fatalf("main chat told %q; want the held change with its lines", told)
	}
	var held string
	if _, err := fmt.Sscanf(told[strings.Index(told, "reply /undo fam "):], "reply /undo fam %s", &held); err != nil {
		t.Fatalf("no /undo in %q", told)
	}
	held = strings.TrimSuffix(held, ".")
	hasStep(t, "why bob", e.why(t, fmt.Sprint(bob)), "changes", "held for the owner", "bridged undo fam "+held)

	// Someone else's /undo in the main chat does nothing; the owner's
	// applies the change.
	if _, err := e.postAs("local:main", "bob", "/undo fam "+held); err != nil {
		t.Fatal(err)
	}
	e.post("local:main", "/undo fam "+held) // taken out before storage: no id
	if got, _ := os.ReadFile(claude); string(got) != "remember: bob is the boss" {
		t.Errorf("CLAUDE.md = %q after the owner's /undo; want bob's change written", got)
	}
	replies := e.waitOut("local:main", notice.ID, 2, 30*time.Second)
	if !strings.Contains(replies[0].Text, "Only the owner") || !strings.Contains(replies[1].Text, "Undone: CLAUDE.md of fam") {
		t.Errorf("main chat answered %q, %q", replies[0].Text, replies[1].Text)
	}
}

// On rootless Podman the daemon reads the agent's files through an ACL
// entry that a directory the CLI makes 0700 masks: the runner opens the
// agent's memory to it before each result, so a memory the agent writes
// there is recorded and told, and no snapshot fails or leaves it out.
func TestE2EMemoryRecordedOnRootlessPodman(t *testing.T) {
	parallel(t, light)
	e := newPodmanEnv(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	defer d.stop(t)
	// The first turn's transcript makes projects/ and the project's
	// directory, 0700.
	id := e.post("local:fam", "fake:reply hello")
	e.waitOut("local:fam", id, 1, 3*time.Minute)
	id = e.post("local:fam", `fake:bash m="$HOME/.claude/projects/-workspace-group/memory" && mkdir -p "$m" && printf 'the dog is Rex\n' > "$m/MEMORY.md"`+
		"\nfake:reply noted")
	e.waitOut("local:fam", id, 1, 3*time.Minute)
	hasStep(t, "why", e.why(t, fmt.Sprint(id)), "changes", "changed", "memory changed: 1 line")
	var cs []struct {
		Line string `json:"line"`
		Note string `json:"note"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI("changes", "--json", "fam")), &cs); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if strings.Contains(c.Note, "could not be read") {
			t.Errorf("a change says %q: the agent's files were closed to the daemon", c.Note)
		}
	}
	if strings.Contains(d.logs(), "cannot record the group's files") {
		t.Error("a snapshot failed")
	}
}
