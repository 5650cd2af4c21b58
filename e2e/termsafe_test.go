package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostile is text that would act on the owner's terminal: OSC 52 (sets the
// clipboard), clear screen, a window title, a bidi override.
const hostile = "A\x1b]52;c;cm0gLXJmIH4K\x07B\x1b[2J\x1b[HC\x1b]0;pwned\x07D\u202eE"

// assertSafe fails when out, the stdout of `bridged what`, carries ESC, a
// C1 control or a bidi override, or when want (a visible trace of the
// escapes) is not in it.
func assertSafe(t *testing.T, what, out, want string) {
	t.Helper()
	if strings.ContainsAny(out, "\x1b\u009b\u009d\u202e\u2066") {
		t.Errorf("bridged %s printed an escape or an override:\n%q", what, out)
	}
	if !strings.Contains(out, want) {
		t.Errorf("bridged %s printed:\n%q\nwant it to show %q", what, out, want)
	}
}

// What an agent or a member writes reaches the owner's terminal shown, never
// acted on: an agent that answers with OSC 52, clear-screen, title and bidi
// escapes (printf in its shell, so they are its own bytes), a member whose
// message carries them, a task prompt and an approval request that do: none
// of `bridged chat -m`, `why`, `approvals`, `tasks list` (and --json) prints
// an ESC byte or an override.
func TestE2ETerminalSafeOutput(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "30s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "--no-trigger", "local:fam")
	e.mustCLI("groups", "add", "--tools", "ask", "--name", "asking", "--no-trigger", "local:asking")
	d := e.start()
	const wait = 2 * time.Minute

	// The agent's own answer carries the escapes.
	out := e.mustCLI("chat", "-m", `fake:bash printf 'A\033]52;c;cm0gLXJmIH4K\007B\033[2JC\033]0;pwned\007D\342\200\256E'`, "fam")
	assertSafe(t, "chat -m", out, "A␛]52;c;cm0gLXJmIH4K␇B␛[2JC")

	// A member's message carries them (as stored); why tells its story.
	id := e.post("local:fam", "fake:reply seen "+hostile)
	e.waitOut("local:fam", id, 1, wait)
	assertSafe(t, "why", e.mustCLI("why", fmt.Sprint(id)), "␛]52")

	// A task's prompt carries them.
	reply := e.ask("local:fam", `fake:tool schedule_task {"prompt":"daily \u001b]52;c;cm0gLXJmIH4K\u0007 \u001b[2J \u202eword","schedule_type":"cron","schedule_value":"0 9 * * *","context_mode":"isolated"}`, wait)
	if len(toolErrors(reply)) != 0 {
		t.Fatalf("schedule_task answered %q; want a task", reply)
	}
	assertSafe(t, "tasks list", e.mustCLI("tasks", "list"), "␛]52")
	assertSafe(t, "tasks list --json", e.mustCLI("tasks", "list", "--json"), `\u202e`)

	// An approval request's command carries them, and so does one stored
	// with raw fields (as an older bridged stored a forged one's tool name).
	mainFrom := lastID(e, "local:main")
	e.post("local:asking", "fake:bash touch made && echo '"+hostile+"'")
	req, _ := e.waitApproval(mainFrom, wait)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.home, "store", "bridged.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), `INSERT INTO approvals (id, folder, request_id, tool, subject, rule, state, asked_at, decided_at, decided_by)
		VALUES ('zz01', 'asking', 'forged-1', ?, ?, 'x', 'denied', ?, ?, ?)`,
		"Bash"+hostile, hostile, time.Now().UnixMilli(), time.Now().UnixMilli(), "chat"+hostile); err != nil {
		t.Fatal(err)
	}
	assertSafe(t, "approvals", e.mustCLI("approvals"), "BashA␛]52")
	assertSafe(t, "approvals --json", e.mustCLI("approvals", "--json"), `\u202e`)
	e.mustCLI("deny", req)

	d.stop(t)
}
