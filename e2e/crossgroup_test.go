package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// taskCall is a fake:tool line that has the agent call tool with args. A
// fake: directive in an argument (a task's prompt) is written with its colon
// escaped, so the fake reads it as the argument's text, not as a directive of
// this turn.
func taskCall(tool string, args map[string]string) string {
	b, _ := json.Marshal(args)
	return "fake:tool " + tool + " " + strings.ReplaceAll(string(b), "fake:", `fake\u003a`)
}

// A read-only main agent cannot act through another group: asked to touch
// a file, it is refused; asked to schedule the same command as a task of a
// full group, to change that group's own task into it, or to resume that
// task, it is refused too, and its tool errors say why (its profile is
// read-only). A task main scheduled in the full group while it was full
// does not run once main is read-only: it is paused, the owner is told in
// the main chat, and nothing is written in the other group's folder.
func TestE2ENoEscapeThroughAnotherGroup(t *testing.T) {
	parallel(t, long)
	e := newEnv(t, "--idle-timeout", "30s")
	e.mustCLI("groups", "add", "--tools", "read-only", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	const wait = 2 * time.Minute
	famDir := filepath.Join(e.home, "groups", "fam")

	// fam schedules a harmless task of its own and pauses it.
	reply := e.ask("local:fam", taskCall("schedule_task", map[string]string{"prompt": "say hello", "schedule_type": "interval",
		"schedule_value": "1h", "context_mode": "isolated"}), wait)
	own := taskIDRE.FindString(reply)
	if own == "" || len(toolErrors(reply)) != 0 {
		t.Fatalf("fam's schedule_task answered %q; want its new task", reply)
	}
	if reply := e.ask("local:fam", taskCall("pause_task", map[string]string{"task_id": own}), wait); len(toolErrors(reply)) != 0 {
		t.Fatalf("fam's pause_task answered %q; want it paused", reply)
	}

	// Read-only main: the direct write is refused, and so is every way
	// through fam.
	if got := e.ask("local:main", "fake:bash touch /workspace/group/direct && echo no", wait); !strings.Contains(got, "read-only") {
		t.Fatalf("read-only main got %q for touch; want it refused", got)
	}
	escape := "fake:bash touch /workspace/group/escaped"
	calls := []string{
		taskCall("schedule_task", map[string]string{"prompt": escape, "schedule_type": "interval", "schedule_value": "1m",
			"context_mode": "isolated", "target_group": "fam"}),
		taskCall("update_task", map[string]string{"task_id": own, "prompt": escape}),
		taskCall("resume_task", map[string]string{"task_id": own}),
	}
	reply = e.ask("local:main", strings.Join(calls, "\n"), wait)
	errs := toolErrors(reply)
	if len(errs) != 3 {
		t.Fatalf("read-only main's schedule, update and resume in fam answered:\n%s\nwant three refusals", reply)
	}
	for _, err := range errs {
		for _, want := range []string{"refused", "tool profile is read-only", "group fam", "nothing was done"} {
			if !strings.Contains(err, want) {
				t.Errorf("refusal %q does not say %q", err, want)
			}
		}
	}
	for _, tk := range e.listTasks() {
		switch {
		case tk.ID != own:
			t.Errorf("task %s (%q) exists; want none but fam's own", tk.ID, tk.Prompt)
		case tk.Prompt != "say hello" || tk.Status != "paused":
			t.Errorf("fam's own task is %q, %s; want it unchanged and paused", tk.Prompt, tk.Status)
		}
	}

	// While full, main schedules the command in fam, due in a minute; then
	// the owner makes main read-only again before it is due.
	e.mustCLI("groups", "set", "--tools", "full", "main")
	reply = e.ask("local:main", taskCall("schedule_task", map[string]string{"prompt": "fake:bash touch /workspace/group/early",
		"schedule_type": "interval", "schedule_value": "1m", "context_mode": "isolated", "target_group": "fam"}), wait)
	early := taskIDRE.FindString(reply)
	if early == "" || len(toolErrors(reply)) != 0 {
		t.Fatalf("full main's schedule_task in fam answered %q; want a task", reply)
	}
	last := e.messages("local:main", 0, 0)
	e.mustCLI("groups", "set", "--tools", "read-only", "main")

	// When it comes due it is not run: the owner is told in the main chat.
	notice := e.waitText("local:main", last[len(last)-1].ID, "was not run", 3*time.Minute)
	for _, want := range []string{early, "was not run", "group main", "read-only", "bridged tasks resume " + early} {
		if !strings.Contains(notice, want) {
			t.Errorf("the owner was told %q; want it to say %q", notice, want)
		}
	}
	for _, tk := range e.listTasks() {
		if tk.ID == early && (tk.Status != "paused" || !strings.Contains(tk.LastResult, "not full")) {
			t.Errorf("main's task in fam is %s with last result %q; want it paused, saying why", tk.Status, tk.LastResult)
		}
	}
	for _, name := range []string{"direct", "escaped", "early"} {
		if exists(filepath.Join(famDir, name)) || exists(filepath.Join(e.home, "groups", "main", name)) {
			t.Errorf("%s was written; want nothing written through another group", name)
		}
	}
	d.stop(t)
}

// waitText waits until an outbound message after id in chat contains s and
// returns it.
func (e *env) waitText(chat string, after int64, s string, within time.Duration) string {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			e.t.Fatalf("waited %s for a message in %s saying %q; got none", within, chat, s)
		}
		for _, m := range e.messages(chat, after, max(min(left, 20*time.Second).Round(time.Second), time.Second)) {
			after = max(after, m.ID)
			if m.Direction == "out" && strings.Contains(m.Text, s) {
				return m.Text
			}
		}
	}
}
