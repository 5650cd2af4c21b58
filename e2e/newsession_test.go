package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sessionRe finds the session id in the fake's fake:pid reply.
var sessionRe = regexp.MustCompile(`session=(\S+)`)

// sessionOf asks chat's agent for its session id (fake:pid).
func sessionOf(t *testing.T, e *env, chat string, within time.Duration) string {
	t.Helper()
	got := e.ask(chat, "fake:pid", within)
	m := sessionRe.FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("fake:pid in %s answered %q; want pid=… session=…", chat, got)
	}
	return m[1]
}

// A fresh start: the owner's /new in the chat ends the group's session,
// while a turn runs (the turn finishes in the old session, the next turn
// starts a new one) and `bridged groups new-session` does the same with the
// agent idle (its container is stopped at once); the group's files stay.
// Someone else's /new is an ordinary message: the session goes on.
func TestE2ENewSession(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "5m")
	e.mustCLI("groups", "add", "--name", "main", "--main", "--tools", "full", "local:main")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := e.watchContainers(ctx)
	const wait = 90 * time.Second

	if got := e.bash("local:main", "echo kept > keep.txt && echo wrote", wait); got != "wrote" {
		t.Fatalf("writing a file got %q; want wrote", got)
	}
	first := sessionOf(t, e, "local:main", wait)
	if again := sessionOf(t, e, "local:main", wait); again != first {
		t.Fatalf("session %s, then %s, with nothing between; want one session", first, again)
	}

	// /new from the owner during a turn: the turn ends in the old session.
	busy := e.post("local:main", "fake:sleep 5s\nfake:pid")
	waitBusy(t, e, "main", wait)
	e.post("local:main", "/new")
	replies := e.waitOut("local:main", busy, 2, 2*wait)
	var notice, turn string
	for _, r := range replies[:2] {
		if strings.HasPrefix(r.Text, "New session") {
			notice = r.Text
		} else {
			turn = r.Text
		}
	}
	if !strings.Contains(notice, "files and memory stay") || !strings.Contains(notice, "turn in progress finishes first") {
		t.Errorf("/new during a turn was answered %q; want a new session after the turn in progress", notice)
	}
	if !strings.Contains(turn, "session="+first) {
		t.Errorf("the turn in progress answered %q; want it to end in session %s", turn, first)
	}
	second := sessionOf(t, e, "local:main", wait)
	if second == first {
		t.Errorf("the turn after /new ran in session %s; want a new session", first)
	}
	if got := e.bash("local:main", "cat keep.txt", wait); got != "kept" {
		t.Errorf("the group's file after /new: %q; want kept", got)
	}
	if third := sessionOf(t, e, "local:main", wait); third != second {
		t.Errorf("session %s after /new, then %s; want the new one to go on", second, third)
	}

	// Someone else's /new is a message to the agent like any other.
	bob, err := e.postAs("local:main", "bob", "/new")
	if err != nil {
		t.Fatal(err)
	}
	if got := e.waitOut("local:main", bob, 1, wait)[0].Text; strings.HasPrefix(got, "New session") {
		t.Errorf("bob's /new was answered %q; want it handed to the agent, not obeyed", got)
	}
	if got := sessionOf(t, e, "local:main", wait); got != second {
		t.Errorf("the session after bob's /new is %s; want %s still", got, second)
	}

	// The command line, with the agent idle: its container stops now.
	watch.waitRunning(t, 1, wait)
	out := e.mustCLI("groups", "new-session", "main")
	if !strings.Contains(out, "New session for main") || !strings.Contains(out, "Applied: the running agent was stopped.") {
		t.Errorf("groups new-session with an idle agent said:\n%s\nwant a new session and the agent stopped", out)
	}
	watch.waitRunning(t, 0, wait)
	if got := sessionOf(t, e, "local:main", wait); got == second || got == first {
		t.Errorf("the turn after groups new-session ran in session %s; want a new one", got)
	}
	if b, err := os.ReadFile(filepath.Join(e.home, "groups", "main", "keep.txt")); err != nil || string(b) != "kept\n" {
		t.Errorf("groups/main/keep.txt after two new sessions: %q, %v; want kept", b, err)
	}
	if out, errs, code, _ := e.chatM("main", "/new"); code != 0 || !strings.HasPrefix(out, "New session") {
		t.Errorf("chat -m /new: exit %d, stdout %q, stderr %q; want the new session told at once", code, out, errs)
	}
	if _, err := e.cli("groups", "new-session", "nosuch"); err == nil {
		t.Error("groups new-session of an unknown folder succeeded; want an error")
	}
	d.stop(t)
}
