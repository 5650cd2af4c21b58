package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // reads the daemon's database
)

// storedTasks counts folder's tasks in the daemon's database, as stored.
func (e *env) storedTasks(folder string) int {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.home, "store", "bridged.db")+"?mode=ro")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM tasks WHERE folder = ?`, folder).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// listedTask is a task as `tasks list --json` shows it.
type listedTask struct {
	ID               string `json:"id"`
	Folder           string `json:"folder"`
	Prompt           string `json:"prompt"`
	Status           string `json:"status"`
	LastResult       string `json:"last_result"`
	Failures         int    `json:"failures"`
	PausedByFailures bool   `json:"paused_by_failures"`
}

func (e *env) listTasks() []listedTask {
	e.t.Helper()
	var out struct {
		Tasks []listedTask `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI("tasks", "list", "--json")), &out); err != nil {
		e.t.Fatal(err)
	}
	return out.Tasks
}

// toolErrors returns the lines of an agent's reply that are tool errors.
func toolErrors(reply string) []string {
	var out []string
	for _, l := range strings.Split(reply, "\n") {
		if strings.HasPrefix(l, "tool error") {
			out = append(out, l)
		}
	}
	return out
}

// scheduleCall is a fake:tool line that has the agent call schedule_task
// for a daily task (none runs during the test) with prompt.
func scheduleCall(prompt, targetGroup string) string {
	args := map[string]string{"prompt": prompt, "schedule_type": "cron", "schedule_value": "0 9 * * *", "context_mode": "isolated"}
	if targetGroup != "" {
		args["target_group"] = targetGroup
	}
	b, _ := json.Marshal(args)
	return "fake:tool schedule_task " + string(b)
}

// An agent told to schedule tasks without end: past 50 (the default
// BRIDGED_MAX_TASKS) each schedule_task is refused with an error that names
// the cap and how to make room, and the database holds exactly 50; main
// cannot add one for it either. A prompt over 16 KiB (the default
// BRIDGED_MAX_TASK_PROMPT) is refused and nothing is stored. Cancelling a
// task makes room for one.
func TestE2ETaskCapAndPromptSize(t *testing.T) {
	parallel(t, light)
	onEngines(t, testE2ETaskCapAndPromptSize)
}

func testE2ETaskCapAndPromptSize(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "30s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "family", "--no-trigger", "local:family")
	d := e.start()

	// An oversized prompt: refused, saying why, nothing stored.
	reply := e.ask("local:family", scheduleCall(strings.Repeat("water the plants ", 1100), ""), 2*time.Minute)
	if errs := toolErrors(reply); len(errs) != 1 || !strings.Contains(errs[0], "over the 16384-byte limit") ||
		!strings.Contains(errs[0], "BRIDGED_MAX_TASK_PROMPT") {
		t.Fatalf("schedule_task with an 18 KiB prompt answered %q; want one tool error naming the 16384-byte limit", reply)
	}
	if n := e.storedTasks("family"); n != 0 {
		t.Fatalf("%d tasks stored after the oversized prompt; want none", n)
	}

	// 53 calls in one turn: 50 are scheduled, 3 refused.
	var calls []string
	for i := range 53 {
		calls = append(calls, scheduleCall(fmt.Sprintf("task number %d", i), ""))
	}
	reply = e.ask("local:family", strings.Join(calls, "\n"), 4*time.Minute)
	errs := toolErrors(reply)
	if len(errs) != 3 {
		t.Fatalf("53 schedule_task calls: %d tool errors; want 3 (past the cap of 50):\n%s", len(errs), tail(reply, 2000))
	}
	for _, err := range errs {
		for _, want := range []string{"refused", "already has 50 scheduled tasks", "BRIDGED_MAX_TASKS=50", "cancel_task"} {
			if !strings.Contains(err, want) {
				t.Errorf("refusal %q does not say %q", err, want)
			}
		}
	}
	if n := e.storedTasks("family"); n != 50 {
		t.Fatalf("the database holds %d tasks of family; want exactly the cap, 50", n)
	}

	// Main scheduling for the full group is held to the same cap.
	reply = e.ask("local:main", scheduleCall("one more from main", "family"), 2*time.Minute)
	if errs := toolErrors(reply); len(errs) != 1 || !strings.Contains(errs[0], "already has 50 scheduled tasks") {
		t.Fatalf("main's schedule_task for the full group answered %q; want the cap's refusal", reply)
	}

	// Cancelling one makes room for exactly one.
	var victim string
	for _, tk := range e.listTasks() {
		if tk.Folder == "family" {
			victim = tk.ID
			break
		}
	}
	e.mustCLI("tasks", "cancel", victim)
	reply = e.ask("local:family", scheduleCall("after a cancel", "")+"\n"+scheduleCall("one too many", ""), 2*time.Minute)
	if errs := toolErrors(reply); len(errs) != 1 || !strings.Contains(reply, "task-") {
		t.Fatalf("after one cancel, two calls answered %q; want one scheduled and one refused", reply)
	}
	if n := e.storedTasks("family"); n != 50 {
		t.Fatalf("the database holds %d tasks of family; want 50", n)
	}
	d.stop(t)
}

// A task whose runs keep failing pauses itself at BRIDGED_TASK_MAX_FAILURES
// failures in a row (2 here, so the test takes two minutes, not fifteen),
// with one alert in the main chat; tasks list shows why; `tasks resume`
// restarts it with a fresh count. (The back-off between the failures, and
// the default of 5, are internal/scheduler's TestFailingTaskBacksOffAndPausesItself.)
func TestE2EFailingTaskPausesItself(t *testing.T) {
	// It waits more than it works (two minute slots of its task).
	parallel(t, long)
	e := newEnv(t, "--idle-timeout", "3s", "--task-max-failures", "2")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()

	// The colon of the task's directive is escaped, or the fake would read
	// it as the end of the tool's arguments. Every minute on the minute: the
	// first run comes at the next minute, the second a minute later (the
	// back-off after one failure lets that slot through).
	id := e.post("local:main", `fake:tool schedule_task {"prompt":"fake\u003aerror API Error: the task is broken","schedule_type":"cron","schedule_value":"* * * * *","context_mode":"isolated"}`)
	first := e.waitOut("local:main", id, 1, time.Minute)[0].Text
	if strings.Contains(first, "tool error") {
		t.Fatalf("schedule_task answered %q", first)
	}

	var task listedTask
	deadline := time.Now().Add(5 * time.Minute)
	for cursor := id; ; {
		ts := e.listTasks()
		if len(ts) != 1 {
			t.Fatalf("tasks: %+v; want the one task", ts)
		}
		task = ts[0]
		if task.Status != "active" || time.Now().After(deadline) {
			break
		}
		// Wait for news in the chat (the failure notice, the alert), at
		// most 10 s, not a fixed time.
		for _, m := range e.messages("local:main", cursor, 10*time.Second) {
			cursor = max(cursor, m.ID)
		}
	}
	if task.Status != "paused" || !task.PausedByFailures || task.Failures != 2 {
		t.Fatalf("the failing task: %+v; want paused by its 2 failures in a row", task)
	}
	if out := e.mustCLI("tasks", "list"); !strings.Contains(out, "paused (failed 2× in a row)") {
		t.Errorf("tasks list does not show why the task is paused:\n%s", out)
	}
	if !d.waitLog("task paused after failing too many times in a row", 30*time.Second) {
		t.Error("the daemon did not log the pause")
	}

	var alerts []string
	for _, m := range e.outSince("local:main", id) {
		if strings.Contains(m.Text, "failed 2 times in a row and is paused") {
			alerts = append(alerts, m.Text)
		}
	}
	if len(alerts) != 1 || !strings.Contains(alerts[0], "bridged tasks resume "+task.ID) || !strings.Contains(alerts[0], "the task is broken") {
		t.Fatalf("owner alerts about the pause: %q; want exactly one, naming the error and `bridged tasks resume %s`", alerts, task.ID)
	}

	out := e.mustCLI("tasks", "resume", task.ID)
	if !strings.Contains(out, "Resumed task "+task.ID) {
		t.Errorf("tasks resume printed %q", out)
	}
	ts := e.listTasks()
	if len(ts) != 1 || ts[0].Status != "active" || ts[0].Failures != 0 || ts[0].PausedByFailures {
		t.Fatalf("after tasks resume: %+v; want active with its count back at 0", ts)
	}
	if out := e.mustCLI("tasks", "cancel", task.ID); !strings.Contains(out, "its runs stay") {
		t.Errorf("tasks cancel printed %q; want it to say the runs stay", out)
	}
	// Cancelled, the task keeps its run history.
	var runs struct {
		Runs []struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"runs"`
	}
	if out := e.mustCLI("tasks", "runs", "--json", task.ID); json.Unmarshal([]byte(out), &runs) != nil || len(runs.Runs) != 2 ||
		runs.Runs[0].Status != "error" || !strings.Contains(runs.Runs[0].Error, "the task is broken") {
		t.Errorf("tasks runs of the cancelled task:\n%s\nwant its two failed runs", out)
	}
	if out := e.mustCLI("tasks", "runs", task.ID); !strings.Contains(out, "the task is broken") {
		t.Errorf("tasks runs of the cancelled task:\n%s\nwant its runs listed", out)
	}
	d.stop(t)
}
