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

// Agent actions happen exactly once across kill -9 (issue 10, items 1 and 6).

// waitRequestFile waits until a request file appears in the group's
// requests/ (the dead daemon's container making its tool call) and returns
// its name.
func (e *env) waitRequestFile(folder string, within time.Duration) string {
	e.t.Helper()
	dir := filepath.Join(e.home, "data", "ipc", folder, "requests")
	deadline := time.After(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		entries, _ := os.ReadDir(dir)
		for _, de := range entries {
			if strings.HasSuffix(de.Name(), ".json") {
				return de.Name()
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			e.t.Fatalf("no request appeared in %s within %s", dir, within)
		}
	}
}

// killMidToolCall has the agent begin a turn that calls tool (a fake:tool
// directive) once the test lets it, kills the daemon with -9 while the turn
// waits, then lets it, and waits until the dead daemon's container, still
// running, has written its tool request. It returns the posted message's id
// and the request file's name. The turn waits on a file, not a clock: a
// kill that came late on a busy machine, after the tool call, would find
// the call carried out by the live daemon, and no request left to write.
// A turn run again after the restart finds the file and goes on at once.
func killMidToolCall(t *testing.T, e *env, d *daemon, tool string) (int64, string) {
	t.Helper()
	id := e.post("local:main", gatedTurn(".began", ".go")+"\n"+tool)
	e.waitGroupFile(t, ".began", 90*time.Second)
	if out := e.outSince("local:main", id); len(out) != 0 {
		t.Fatalf("messages went out before the kill; the test did not kill mid-turn: %+v", out)
	}
	d.kill9()
	e.openGate(t, ".go")
	return id, e.waitRequestFile("main", time.Minute)
}

// kill -9 while a turn waits and then sends "hello" with send_message: the
// dead daemon's container writes its request anyway; after the restart the
// leftover container is stopped, its request quarantined, the turn run again,
// and "hello" arrives exactly once.
func TestE2EKill9SendMessageOnce(t *testing.T) {
	parallel(t, light)
	testKill9SendMessageOnce(t, newEnv(t, "--idle-timeout", "2s"))
}

// The same on rootless Podman, the daemon running as the service's user.
func TestE2EKill9SendMessageOncePodman(t *testing.T) {
	parallel(t, light)
	testKill9SendMessageOnce(t, newPodmanEnv(t, "--idle-timeout", "2s"))
}

func testKill9SendMessageOnce(t *testing.T, e *env) {
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	id, reqFile := killMidToolCall(t, e, d, `fake:tool send_message {"text":"hello"}`)

	d2 := e.start()
	// The re-run's turn calls the tool, then replies: once its reply (the
	// first message that is not hello) is out, every hello is.
	var got []chatMessage
	for n := 1; ; n++ {
		got = e.waitOut("local:main", id, n, 2*time.Minute)
		if got[n-1].Text != "hello" {
			break
		}
	}
	hellos := 0
	for _, m := range got {
		if m.Text == "hello" {
			hellos++
		}
	}
	if hellos != 1 {
		t.Errorf("hello arrived %d times before the turn's reply; want exactly once: %+v", hellos, got)
	}
	// The dead daemon's request was not carried out: stopped, its container
	// withdrew it, or it was quarantined in errors/; it never got an answer.
	if _, err := os.Lstat(filepath.Join(e.home, "data", "ipc", "main", "responses", reqFile)); err == nil {
		t.Errorf("the dead daemon's request %s was answered; want it not carried out", reqFile)
	}
	if _, err := os.Lstat(filepath.Join(e.home, "data", "ipc", "main", "requests", reqFile)); err == nil {
		t.Errorf("the dead daemon's request %s is still in requests/", reqFile)
	}
	for _, m := range e.messages("local:main", got[len(got)-1].ID, 3*time.Second) {
		if m.Text == "hello" {
			t.Errorf("another hello after the turn's reply: %+v", m)
		}
	}
	d2.stop(t)
}

var taskIDRE = regexp.MustCompile(`task-[0-9a-f]{12}`)

// The same with schedule_task: exactly one task exists afterwards.
func TestE2EKill9ScheduleTaskOnce(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "2s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	args := `{"prompt":"fake\u003areply good morning","schedule_type":"cron","schedule_value":"0 9 * * *","context_mode":"isolated"}`
	id, _ := killMidToolCall(t, e, d, "fake:tool schedule_task "+args)

	d2 := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchContainers(ctx)
	got := e.waitOut("local:main", id, 1, 2*time.Minute)
	if !taskIDRE.MatchString(got[0].Text) {
		t.Fatalf("answer after the restart %q; want the scheduled task's id", got[0].Text)
	}
	w.waitRunning(t, 0, time.Minute)
	d2.stop(t)
	list := e.mustCLI("tasks", "list")
	if ids := taskIDRE.FindAllString(list, -1); len(ids) != 1 {
		t.Errorf("%d tasks exist; want exactly one:\n%s", len(ids), list)
	}
}

// kill -9 during a cron task's run: the run was claimed visibly (a running
// row in its run log), and after the restart it is an "interrupted" error run
// and the chat gets one notice.
func TestE2EKill9DuringRecurringTask(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "2s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchContainers(ctx)

	args := `{"prompt":"fake\u003asleep 15s","schedule_type":"cron","schedule_value":"* * * * *","context_mode":"isolated"}`
	id := e.post("local:main", "fake:tool schedule_task "+args)
	answer := e.waitOut("local:main", id, 1, time.Minute)[0]
	task := taskIDRE.FindString(answer.Text)
	if task == "" {
		t.Fatalf("schedule_task answer %q; want a task id", answer.Text)
	}
	w.waitRunning(t, 0, time.Minute) // the message container closed

	// Within the minute the run is claimed and its container starts.
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(e.mustCLI("tasks", "runs", task), "running") {
		if time.Now().After(deadline) {
			t.Fatalf("no running run of %s within 90s:\n%s", task, e.mustCLI("tasks", "runs", task))
		}
		e.messages("local:main", answer.ID, time.Second) // a one-second wait on the chat
	}
	w.waitRunning(t, 1, time.Minute)
	d.kill9()

	d2 := e.start()
	notices := e.waitOut("local:main", answer.ID, 1, time.Minute)
	if !strings.Contains(notices[0].Text, task) || !strings.Contains(notices[0].Text, "interrupted") {
		t.Fatalf("first message after the restart %q; want a notice that %s was interrupted", notices[0].Text, task)
	}
	runs := e.mustCLI("tasks", "runs", task)
	if !strings.Contains(runs, "error") || !strings.Contains(runs, "interrupted") {
		t.Errorf("run log of %s has no interrupted run:\n%s", task, runs)
	}
	e.messages("local:main", notices[0].ID, 3*time.Second) // time for a second notice to show
	n := 0
	for _, m := range e.outSince("local:main", answer.ID) {
		if strings.Contains(m.Text, "interrupted") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d interruption notices; want exactly one: %+v", n, e.outSince("local:main", answer.ID))
	}
	d2.stop(t)
}
