package e2e

import (
	"strings"
	"testing"
	"time"
)

// The owner schedules a task from the command line while the daemon runs:
// it fires on time and its output arrives in the group's chat; a schedule
// the task rules refuse is refused with the reason, and nothing is added.
func TestE2ETasksAddByTheOwner(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "3s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()

	if _, err := e.cli("tasks", "add", "--every", "5s", "main", "too often"); err == nil || !strings.Contains(err.Error(), "must be at least") {
		t.Errorf("tasks add --every 5s: %v; want it refused with the least interval", err)
	}
	before := len(e.outSince("local:main", 0))
	at := time.Now().Add(taskLead).UTC().Format(time.RFC3339)
	out := e.mustCLI("tasks", "add", "--at", at, "main", "fake:reply", "the owner's task ran")
	if !strings.Contains(out, "Scheduled task task-") || !strings.Contains(out, "for group main") {
		t.Fatalf("tasks add: %q; want the task scheduled", out)
	}
	got := e.waitOut("local:main", 0, before+1, taskLead+90*time.Second)
	if last := got[len(got)-1].Text; last != "the owner's task ran" {
		t.Errorf("the task's output %q; want %q", last, "the owner's task ran")
	}
	d.stop(t)
	list := e.mustCLI("tasks", "list")
	if strings.Count(list, "task-") != 1 || !strings.Contains(list, "done") {
		t.Errorf("tasks list:\n%s\nwant the one task, done", list)
	}
}
