package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// A fresh home, one main group, a message through `bridged chat -m`: the
// agent's reply is printed. A second message while the container lives is
// answered by the same container.
func TestE2EChatAndFollowUp(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchContainers(ctx)

	out := e.mustCLI("chat", "-m", "hello", "main")
	if !strings.Contains(out, "echo: hello") {
		t.Fatalf("bridged chat -m hello main printed %q; want the agent's reply %q", out, "echo: hello")
	}
	first := e.containers(ctx)
	if len(first) != 1 {
		t.Fatalf("got %d containers after the first reply; want 1 live container", len(first))
	}

	// The follow-up is answered by the same container: fake:bash env shows
	// the container's HOSTNAME, and no credential.
	id := e.post("local:main", "fake:bash env")
	reply := e.waitOut("local:main", id, 1, 60*time.Second)[0].Text
	if !strings.Contains(reply, "HOSTNAME="+first[0].ID[:12]) {
		t.Errorf("follow-up answered by another container: reply %q, live container %s", reply, first[0].ID[:12])
	}
	if strings.Contains(reply, secret) || strings.Contains(reply, "ANTHROPIC_API_KEY=") {
		t.Errorf("a Bash command saw the credential: %q", reply)
	}
	if _, _, starts := w.snapshot(); starts != 1 {
		t.Errorf("containers started: %d; want 1", starts)
	}

	d.stop(t)
	if left := e.containers(context.Background()); len(left) != 0 {
		t.Fatalf("after SIGTERM %d managed containers are left: %+v", len(left), left)
	}
	if hits := grepFiles(t, e.home, secret); len(hits) > 0 {
		t.Errorf("the credential was written to %v", hits)
	}
	if strings.Contains(d.logs(), secret) {
		t.Errorf("the credential appears in the daemon's log")
	}
}

// A short idle timeout closes and removes the container.
func TestE2EIdleTimeoutRemovesContainer(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "2s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchContainers(ctx)

	id := e.post("local:main", "ping")
	e.waitOut("local:main", id, 1, 60*time.Second)
	w.waitStarts(t, 1, 30*time.Second)
	w.waitGone(t, 30*time.Second)
	if left := e.containers(ctx); len(left) != 0 {
		t.Fatalf("idle container not removed: %+v", left)
	}
	d.stop(t)
}

// Five groups with a cap of two: never more than two containers, all answered.
func TestE2EConcurrencyCap(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--max-containers", "2", "--idle-timeout", "1s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	names := []string{"g1", "g2", "g3", "g4", "g5"}
	for _, n := range names {
		e.mustCLI("groups", "add", "--tools", "full", "--name", n, "--no-trigger", "local:"+n)
	}
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchContainers(ctx)

	ids := map[string]int64{}
	for _, n := range names {
		ids[n] = e.post("local:"+n, "fake:sleep 1s\nfake:reply done "+n)
	}
	for _, n := range names {
		got := e.waitOut("local:"+n, ids[n], 1, 3*time.Minute)
		if got[0].Text != "done "+n {
			t.Errorf("group %s got %q; want %q", n, got[0].Text, "done "+n)
		}
	}
	w.waitRunning(t, 0, time.Minute)
	if _, maxRunning, starts := w.snapshot(); maxRunning > 2 || starts < 5 {
		t.Fatalf("at most %d containers ran at once over %d starts; want ≤ 2 over ≥ 5", maxRunning, starts)
	}
	d.stop(t)
}

// taskLead is how far ahead a test schedules a once task: far enough that
// the agent's tool call, a container start later, is still before it (a
// time already past is refused).
const taskLead = 20 * time.Second

// A task scheduled through the agent's tool runs and its output arrives in the
// chat.
func TestE2EScheduledTask(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "3s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()

	at := time.Now().Add(taskLead).UTC().Format(time.RFC3339)
	// The colon of the task's own directive is escaped, or the fake would
	// read it as the end of the tool's arguments.
	args := fmt.Sprintf(`{"prompt":"fake\u003areply the task ran","schedule_type":"once","schedule_value":%q,"context_mode":"isolated"}`, at)
	id := e.post("local:main", "fake:tool schedule_task "+args)
	first := e.waitOut("local:main", id, 1, 60*time.Second)[0].Text
	if strings.Contains(first, "tool error") || !strings.Contains(first, "task") {
		t.Fatalf("schedule_task answer %q; want a task id and next run", first)
	}
	got := e.waitOut("local:main", id, 2, taskLead+90*time.Second)
	if got[1].Text != "the task ran" {
		t.Fatalf("task output %q; want %q", got[1].Text, "the task ran")
	}
	// Stopping drains the task's container, which records its run.
	d.stop(t)
	if out := e.mustCLI("tasks", "list"); !strings.Contains(out, "done") {
		t.Errorf("tasks list does not show the once task as done:\n%s", out)
	}
}

// A non-main group's send_message to another chat is refused and nothing is
// sent there.
func TestE2ECrossChatSendRefused(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "3s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "other", "--no-trigger", "local:other")
	d := e.start()

	before := e.outSince("local:main", 0)
	id := e.post("local:other", `fake:tool send_message {"text":"sneaky","target_chat":"local:main"}`)
	reply := e.waitOut("local:other", id, 1, 60*time.Second)[0].Text
	if !strings.Contains(reply, "tool error") {
		t.Errorf("agent saw %q; want the refusal as a tool error", reply)
	}
	after := e.outSince("local:main", 0)
	if len(after) != len(before) {
		t.Fatalf("main received %d new messages; want none: %+v", len(after)-len(before), after)
	}
	d.stop(t)
}

// kill -9 while an agent is mid-turn, then a restart: the leftover container
// is removed and the message is answered exactly once.
func TestE2EKill9MidTurn(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "2s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchContainers(ctx)

	id := e.post("local:main", gatedTurn(".began", ".go")+"\nfake:reply survived")
	w.waitRunning(t, 1, 60*time.Second)
	e.waitGroupFile(t, ".began", 90*time.Second)
	leftover := e.containers(ctx)
	if len(leftover) != 1 {
		t.Fatalf("got %d containers mid-turn; want the one running the turn: %+v", len(leftover), leftover)
	}
	if len(e.outSince("local:main", id)) != 0 {
		t.Fatal("a reply went out before the kill; the test did not kill mid-turn")
	}
	d.kill9()

	d2 := e.start()
	e.openGate(t, ".go")
	got := e.waitOut("local:main", id, 1, 2*time.Minute)
	if strings.TrimSpace(got[0].Text) != "survived" {
		t.Fatalf("reply %q; want %q", got[0].Text, "survived")
	}
	for _, c := range leftover {
		if _, err := docker.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{}); err == nil {
			// It may still be running only if it is the new daemon's.
			t.Errorf("leftover container %s of the killed daemon is still there", c.ID[:12])
		}
	}
	w.waitRunning(t, 0, time.Minute)
	if n := len(e.outSince("local:main", id)); n != 1 {
		t.Fatalf("the message was answered %d times; want exactly once: %+v", n, e.outSince("local:main", id))
	}
	d2.stop(t)
}

// fake:crash in every attempt ends, after the retries, in one visible
// failure, not a loop.
func TestE2ECrashEveryAttempt(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--retry-base", "100ms", "--idle-timeout", "2s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchContainers(ctx)

	id := e.post("local:main", "fake:crash")
	got := e.waitOut("local:main", id, 1, 3*time.Minute)
	notice := strings.ToLower(got[0].Text)
	if !strings.Contains(notice, "fail") && !strings.Contains(notice, "could not") && !strings.Contains(notice, "couldn't") {
		t.Fatalf("first outbound message %q; want a failure notice", got[0].Text)
	}
	w.waitStarts(t, 1, time.Minute)
	w.waitRunning(t, 0, time.Minute)
	_, _, starts := w.snapshot()
	if starts != 6 {
		t.Errorf("containers started: %d; want 6 (one run and five retries)", starts)
	}
	// No loop: nothing else starts, nothing else is sent. The wait is the
	// longest retry delay several times over.
	if more := e.messages("local:main", got[0].ID, 5*time.Second); len(more) != 0 {
		t.Errorf("more messages after the failure notice: %+v", more)
	}
	if _, _, again := w.snapshot(); again != starts {
		t.Errorf("another container started after the retries ended: %d → %d", starts, again)
	}
	status := e.mustCLI("status")
	if !strings.Contains(strings.ToLower(status), "fail") {
		t.Errorf("bridged status does not show the failure:\n%s", status)
	}
	d.stop(t)
}

// An unpaired home: the daemon starts, says once that WhatsApp is not
// paired, and serves the local channel.
func TestE2EUnpairedWhatsApp(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "2s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	out := e.mustCLI("chat", "-m", "still here?", "main")
	if !strings.Contains(out, "echo: still here?") {
		t.Fatalf("local channel reply %q", out)
	}
	if n := strings.Count(strings.ToLower(d.logs()), "not paired"); n != 1 {
		t.Errorf("the log says %d times that WhatsApp is not paired; want once", n)
	}
	status := strings.ToLower(e.mustCLI("status"))
	if !strings.Contains(status, "not paired") && !strings.Contains(status, "not-paired") {
		t.Errorf("bridged status does not report WhatsApp as not paired:\n%s", status)
	}
	d.stop(t)
}
