package router

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipchost"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
)

// newIPCHost returns the real IPC host over the harness's store, with the
// router as its messenger, as the daemon wires them.
func newIPCHost(t *testing.T, h *harness) *ipchost.Host {
	t.Helper()
	host, err := ipchost.New(ipchost.Config{Trees: h.cfg.Home, AssistantName: testName}, h.db, h.r, nil, nil, testLogger(t))
	if err != nil {
		t.Fatalf("new ipc host: %v", err)
	}
	return host
}

func scheduleRequest() ipc.Request {
	return ipc.NewRequest(ipc.ScheduleTaskArgs{Prompt: "water the plants", ScheduleType: schedule.Cron, ScheduleValue: "0 9 * * *"})
}

func countTasks(t *testing.T, h *harness) int {
	t.Helper()
	tasks, err := h.db.Tasks.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return len(tasks)
}

// An agent action committed during a messages turn counts like a reply: it
// stores the turn's cursor in its own transaction, so when the turn then
// fails the messages are not run again (a re-run would schedule a second
// task); the chat is told instead.
func TestActionDuringFailedTurnNotRepeated(t *testing.T) {
	h := newHarness(t, nil)
	host := newIPCHost(t, h)
	h.start()
	id := h.post(mainChat, "remind me every morning")
	run := h.nextRun()
	if resp := host.Handle(context.Background(), "main", scheduleRequest()); !resp.OK {
		t.Fatalf("schedule_task: %+v", resp)
	}
	if c := h.cursor("main"); c != id {
		t.Fatalf("cursor after the action: got %d; want %d (stored with the task)", c, id)
	}
	run.emit(ipc.Event{Type: ipc.EventError, Message: "claude exited with status 2", Retryable: true})
	run.exit(1)
	notice := h.nextSend()
	if !strings.Contains(notice.Text, "already acted") || !strings.Contains(notice.Text, "claude exited with status 2") {
		t.Fatalf("sent %q; want the notice that the agent failed after it acted, with the reason", notice.Text)
	}
	h.waitIdle("main")
	if n := h.rt.starts(); n != 1 {
		t.Fatalf("containers started: %d; want 1 (the turn that acted is not run again)", n)
	}
	if n := countTasks(t, h); n != 1 {
		t.Fatalf("%d tasks; want 1", n)
	}
	if texts := h.ch.SentTexts(); len(texts) != 1 {
		t.Fatalf("sent %q; want only the notice", texts)
	}
}

// The same when the turn that acted ends with an error result.
func TestActionThenErrorResultNotRepeated(t *testing.T) {
	h := newHarness(t, nil)
	host := newIPCHost(t, h)
	h.start()
	h.post(mainChat, "remind me every morning")
	run := h.nextRun()
	if resp := host.Handle(context.Background(), "main", scheduleRequest()); !resp.OK {
		t.Fatalf("schedule_task: %+v", resp)
	}
	run.emit(ipc.Event{Type: ipc.EventResult, IsError: true, Text: "API Error: overloaded"})
	run.exit(0)
	if notice := h.nextSend(); !strings.Contains(notice.Text, "already acted") || !strings.Contains(notice.Text, "API Error: overloaded") {
		t.Fatalf("sent %q; want the notice that the agent failed after it acted", notice.Text)
	}
	h.waitIdle("main")
	if n := h.rt.starts(); n != 1 {
		t.Fatalf("containers started: %d; want 1", n)
	}
	if n := countTasks(t, h); n != 1 {
		t.Fatalf("%d tasks; want 1", n)
	}
}

// A turn that acted and then replied is an ordinary turn: no notice.
func TestActionThenReplyNoNotice(t *testing.T) {
	h := newHarness(t, nil)
	host := newIPCHost(t, h)
	h.start()
	h.post(mainChat, "remind me every morning")
	run := h.nextRun()
	if resp := host.Handle(context.Background(), "main", scheduleRequest()); !resp.OK {
		t.Fatalf("schedule_task: %+v", resp)
	}
	run.result("done: every morning at 9")
	if got := h.nextSend(); got.Text != "done: every morning at 9" {
		t.Fatalf("sent %q; want the reply", got.Text)
	}
	run.emit(ipc.Event{Type: ipc.EventError, Message: "claude exited with status 2", Retryable: true})
	run.exit(1)
	h.waitIdle("main")
	if texts := h.ch.SentTexts(); !slices.Equal(texts, []string{"done: every morning at 9"}) {
		t.Fatalf("sent %q; want the reply only", texts)
	}
	if n := h.rt.starts(); n != 1 {
		t.Fatalf("containers started: %d; want 1", n)
	}
}

// An action outside a message run (a scheduled task's container) stores no
// cursor.
func TestActionOutsideMessageRunStoresNoCursor(t *testing.T) {
	h := newHarness(t, nil)
	host := newIPCHost(t, h)
	if resp := host.Handle(context.Background(), "main", scheduleRequest()); !resp.OK {
		t.Fatalf("schedule_task: %+v", resp)
	}
	if c := h.cursor("main"); c != 0 {
		t.Fatalf("cursor: got %d; want 0", c)
	}
}

// A backlog larger than the prompt cap is answered, and the chat learns in
// one line how many older messages the agent did not read; a retry of the
// same prompt does not repeat the line.
func TestBacklogLeftOutNotice(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.PromptCap = 3 })
	for i := range 6 {
		h.post(famChat, "chatter "+string(rune('a'+i)))
	}
	h.post(famChat, "@Robo what did I miss?")
	h.start()
	run := h.nextRun()
	p := run.spec.Input.Prompt
	if !strings.Contains(p, "<note>4 earlier messages were left out</note>") || !strings.Contains(p, "what did I miss?") {
		t.Fatalf("prompt %q; want the note to the agent and the trigger", p)
	}
	if got := h.nextSend(); got.Text != "Note: 4 older messages were left out of what I read." {
		t.Fatalf("sent %q; want the left-out notice", got.Text)
	}
	// The turn fails before a reply: the retry reads the same messages and
	// the chat is not told again.
	run.emit(ipc.Event{Type: ipc.EventError, Message: "claude exited with status 2", Retryable: true})
	run.exit(1)
	retry := h.nextRun()
	retry.result("here is what you missed")
	if got := h.nextSend(); got.Text != "here is what you missed" {
		t.Fatalf("sent %q; want the reply", got.Text)
	}
	retry.exit(0)
	h.waitIdle("fam")
	if texts := h.ch.SentTexts(); len(texts) != 2 {
		t.Fatalf("sent %q; want the notice once and the reply", texts)
	}
}

// Messages piped into a live container are capped too, and the chat told.
func TestPipedBacklogLeftOutNotice(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.PromptCap = 2 })
	h.start()
	h.post(famChat, "@Robo hi")
	run := h.nextRun()
	run.result("hello")
	h.nextSend()
	// While the agent is idle, a burst arrives at once: stored before the
	// loop looks (the trigger last).
	for i := range 4 {
		if _, _, err := h.db.Messages.Insert(context.Background(), store.Message{
			Chat: famChat, ExternalID: "burst-" + string(rune('a'+i)), Sender: "bob@x", SenderName: "Bob", Text: "more chatter",
		}); err != nil {
			t.Fatal(err)
		}
	}
	h.post(famChat, "@Robo and now?")
	if got := h.nextSend(); got.Text != "Note: 3 older messages were left out of what I read." {
		t.Fatalf("sent %q; want the left-out notice for the piped prompt", got.Text)
	}
	consume(t, h.inputDir("fam"), waitInputs(t, h.inputDir("fam"), 1))
	run.result("caught up")
	if got := h.nextSend(); got.Text != "caught up" {
		t.Fatalf("sent %q; want the reply", got.Text)
	}
	run.exit(0)
	h.waitIdle("fam")
}
