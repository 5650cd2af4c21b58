package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/channeltest"
	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipc/ipctest"
	"github.com/bridged-app/bridged/internal/store"
)

func TestReplyFlow(t *testing.T) {
	h := newHarness(t, nil)
	// The reply must be in the outbox, pending, before the channel sees it.
	var committedFirst []bool
	h.ch.FailWith(func(m channel.Outgoing) error {
		rows, err := h.db.Outbox.Pending(context.Background(), 0)
		if err != nil {
			return err
		}
		committedFirst = append(committedFirst, slices.ContainsFunc(rows, func(it store.OutboxItem) bool {
			return it.ExternalID == m.ID && it.Text == m.Text
		}))
		if len(committedFirst) == 1 {
			return errTransient // the first attempt fails; the retry reuses the id
		}
		return nil
	})
	h.start()
	id := h.post(mainChat, `hi <there> & "you"`)
	run := h.nextRun()

	in := run.spec.Input
	if !strings.Contains(in.Prompt, `<message sender="Alice"`) || !strings.Contains(in.Prompt, "hi &lt;there&gt; &amp; &quot;you&quot;</message>") {
		t.Fatalf("prompt: got %q; want Alice's escaped message", in.Prompt)
	}
	if in.Group != "main" || !in.IsMain || in.IsTask || in.AssistantName != testName {
		t.Fatalf("run input: got %+v; want group main, main, not a task, assistant %s", in, testName)
	}
	if raw, _ := json.Marshal(in); strings.Contains(string(raw), "sk-secret-value") || !slices.Contains(run.spec.Forbidden, "sk-secret-value") {
		t.Fatalf("run input %s, forbidden %q: want no credential in the input, and the credential forbidden in the spec", raw, run.spec.Forbidden)
	}
	for _, e := range run.spec.Env {
		if strings.Contains(e, "sk-secret-value") {
			t.Fatalf("container env carries the secret: %q", e)
		}
	}
	if run.spec.Image != "bridged-agent:test" || run.spec.Instance != "test-instance" || run.spec.User == "" {
		t.Fatalf("spec: got image %q instance %q user %q", run.spec.Image, run.spec.Instance, run.spec.User)
	}
	want := append(container.Mounts(home.Layout{Dir: h.home}, "main", true, store.Sees{}, nil), container.PolicyMount(home.Layout{Dir: h.home}, "main"))
	mounts := slices.Clone(run.spec.Mounts)
	for i := range mounts {
		if mounts[i].ID.IsZero() {
			t.Fatalf("mount %s reached the runtime without the device and inode of the source checked", mounts[i].Target)
		}
		mounts[i].ID = container.FileID{}
	}
	if !slices.Equal(mounts, want) {
		t.Fatalf("mounts: got %+v; want %+v", run.spec.Mounts, want)
	}
	for _, p := range []string{
		filepath.Join(h.home, "groups", "main", "CLAUDE.md"),
		filepath.Join(h.home, "groups", "global", "CLAUDE.md"),
		filepath.Join(h.home, "data", "sessions", "main", ".claude", "settings.json"),
	} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("group setup: %v", err)
		}
	}
	run.spec.Stderr("runner says hello")

	run.emit(ipc.Event{Type: ipc.EventSession, SessionID: "sess-1"})
	run.emit(ipc.Event{Type: ipc.EventResult, Text: "Hello Alice <internal>she seems nice</internal>", SessionID: "sess-1", LastUUID: "u-1", CostUSD: 0.5})
	got := h.nextSend()
	if got.Text != "Hello Alice" || got.Chat != string(mainChat) {
		t.Fatalf("sent: got %+v; want %q to %s", got, "Hello Alice", mainChat)
	}
	if len(committedFirst) != 2 || !committedFirst[0] || !committedFirst[1] {
		t.Fatalf("outbox row present at each send attempt: got %v; want [true true]", committedFirst)
	}
	if tries := h.ch.Tries(); tries[0].ID != tries[1].ID || got.ID == "" {
		t.Fatalf("retry ids: got %q and %q; want the same non-empty id", tries[0].ID, tries[1].ID)
	}
	if c := h.cursor("main"); c != id {
		t.Fatalf("cursor after reply: got %d; want %d", c, id)
	}
	sess, err := h.db.Sessions.Get(context.Background(), "main")
	if err != nil || sess.SessionID != "sess-1" || sess.LastUUID != "u-1" {
		t.Fatalf("session: got %+v, %v; want sess-1 at u-1", sess, err)
	}

	// A second turn through the pipe; the first reply is not sent again.
	h.post(mainChat, "and again")
	inputs := waitInputs(t, h.inputDir("main"), 1)
	run.result("Second answer")
	if got := h.nextSend(); got.Text != "Second answer" {
		t.Fatalf("second send: got %q; want %q", got.Text, "Second answer")
	}
	consume(t, h.inputDir("main"), inputs)
	run.exit(0)
	h.waitIdle("main")
	if texts := h.ch.SentTexts(); !slices.Equal(texts, []string{"Hello Alice", "Second answer"}) {
		t.Fatalf("sent: got %q; want each reply exactly once", texts)
	}
	pollUntil(t, func() bool {
		rows, err := h.db.Outbox.Pending(context.Background(), 0)
		return err == nil && len(rows) == 0
	}, "every reply marked sent")

	// The run log holds the stderr line and the exit, never the secret.
	logs, _ := filepath.Glob(filepath.Join(h.home, "data", "logs", "main", "run-*.log"))
	if len(logs) != 1 {
		t.Fatalf("run logs: got %v; want one", logs)
	}
	if fi, err := os.Stat(logs[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("run log: %v, %v; want mode 0600", fi, err)
	}
	if fi, err := os.Stat(filepath.Dir(logs[0])); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("run log directory: %v, %v; want mode 0700", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(h.home, "groups", "main", "logs")); !os.IsNotExist(err) {
		t.Fatalf("groups/main/logs: %v; want no run logs in the group folder", err)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.Contains(text, "runner says hello") || !strings.Contains(text, "exit code: 0") {
		t.Fatalf("run log: got %q; want the stderr line and the exit code", text)
	}
	if strings.Contains(text, "sk-secret-value") || strings.Contains(text, "hi &lt;there") {
		t.Fatalf("run log carries the secret or the prompt: %q", text)
	}
}

// waitInputs waits for n input files in dir and returns their names.
func waitInputs(t *testing.T, dir string, n int) []string {
	t.Helper()
	var names []string
	waitDir(t, dir, func() bool { names = jsonFiles(t, dir); return len(names) >= n }, "%d input files in %s", n, dir)
	return names
}

// consume deletes input files as the runner does once it read them.
func consume(t *testing.T, dir string, names []string) {
	t.Helper()
	for _, n := range names {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTriggerGate(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.post(famChat, "just chatting")
	h.post(famChat, "ask @"+testName+" later")
	h.post(famChat, "@"+testName+"'s opinion?")
	run := h.nextRun()
	p := run.spec.Input.Prompt
	for _, want := range []string{"just chatting", "ask @" + testName + " later", "@" + testName + "&apos;s opinion?"} {
		if !strings.Contains(p, want) {
			t.Fatalf("prompt: got %q; want it to hold %q (untriggered messages are context)", p, want)
		}
	}
	if run.spec.Input.IsMain {
		t.Fatalf("fam run input says main")
	}
	run.result("ok")
	h.nextSend()
	run.exit(0)
	h.waitIdle("fam")
	if n := h.rt.starts(); n != 1 {
		t.Fatalf("containers started: got %d; want 1", n)
	}
}

func TestPipeIntoLiveContainer(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.post(mainChat, "first")
	run := h.nextRun()
	second := h.post(mainChat, "second")
	names := waitInputs(t, h.inputDir("main"), 1)
	b, err := os.ReadFile(filepath.Join(h.inputDir("main"), names[0]))
	if err != nil {
		t.Fatal(err)
	}
	in, err := ipc.DecodeInput(b)
	if err != nil || !strings.Contains(in.Text, ">second</message>") || strings.Contains(in.Text, ">first</message>") {
		t.Fatalf("piped input: got %+v, %v; want only the new message", in, err)
	}
	if n := h.rt.starts(); n != 1 {
		t.Fatalf("containers started: got %d; want 1 (the message is piped)", n)
	}
	run.result("both answered")
	h.nextSend()
	consume(t, h.inputDir("main"), names)
	run.exit(0)
	h.waitIdle("main")
	if c := h.cursor("main"); c != second {
		t.Fatalf("cursor: got %d; want %d", c, second)
	}
	if n := h.rt.starts(); n != 1 {
		t.Fatalf("containers started: got %d; want 1", n)
	}
}

// A message piped while the agent is busy may wait for a turn of its own, so
// the reply to the turn in flight must not store it as handled: killed at
// that moment, the daemon would never answer it.
func TestReplyDoesNotSettleMessagesPipedWhileBusy(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	first := h.post(mainChat, "first")
	run := h.nextRun()
	second := h.post(mainChat, "second") // piped while the first turn runs
	names := waitInputs(t, h.inputDir("main"), 1)
	consume(t, h.inputDir("main"), names)
	run.result("answer one")
	h.nextSend()
	if c := h.cursor("main"); c != first {
		t.Fatalf("cursor after the first answer: got %d; want %d (the piped message is not answered yet)", c, first)
	}
	run.result("answer two")
	h.nextSend()
	if c := h.cursor("main"); c != second {
		t.Fatalf("cursor after the second answer: got %d; want %d", c, second)
	}
	run.exit(0)
	h.waitIdle("main")
}

// A message piped into an idle agent starts a turn at once, so its answer
// stores it as handled.
func TestReplySettlesMessagesPipedWhileIdle(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.post(mainChat, "first")
	run := h.nextRun()
	run.result("answer one")
	h.nextSend()
	second := h.post(mainChat, "second")
	names := waitInputs(t, h.inputDir("main"), 1)
	consume(t, h.inputDir("main"), names)
	run.result("answer two")
	h.nextSend()
	if c := h.cursor("main"); c != second {
		t.Fatalf("cursor: got %d; want %d", c, second)
	}
	run.exit(0)
	h.waitIdle("main")
}

// A mention of the bot wakes a group that needs a trigger, and the flag is
// stored: a message that arrived before the router started (as after a
// restart) still wakes the agent.
func TestMentionStoredAndTriggersAfterStart(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	if _, err := h.r.in.Inbound(ctx, channel.Message{Chat: string(famChat), ExternalID: "m1", Sender: "bob@x", SenderName: "Bob",
		Text: "what do you think, Robo?", SentAt: time.Now(), Mentioned: true}); err != nil {
		t.Fatal(err)
	}
	msgs, err := h.db.Messages.After(ctx, famChat, 0, 0)
	if err != nil || len(msgs) != 1 || !msgs[0].Mentioned {
		t.Fatalf("stored: got %+v, %v; want one message with the mention flag", msgs, err)
	}
	h.start()
	run := h.nextRun()
	if !strings.Contains(run.spec.Input.Prompt, "what do you think, Robo?") {
		t.Fatalf("prompt %q; want the mentioning message", run.spec.Input.Prompt)
	}
	run.result("I think so")
	h.nextSend()
	run.exit(0)
	h.waitIdle("fam")
}

func TestUnreadPipedInputRunsAgain(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	first := h.post(mainChat, "first")
	run := h.nextRun()
	run.result("answer one")
	h.nextSend()
	h.post(mainChat, "second")
	waitInputs(t, h.inputDir("main"), 1)
	run.exit(1) // crashed before reading the piped message
	again := h.nextRun()
	if p := again.spec.Input.Prompt; !strings.Contains(p, ">second</message>") || strings.Contains(p, ">first</message>") {
		t.Fatalf("follow-up prompt: got %q; want only the unread message", p)
	}
	if n := len(jsonFiles(t, h.inputDir("main"))); n != 0 {
		t.Fatalf("input files after the crash: got %d; want 0 (their messages are in the new prompt)", n)
	}
	if c := h.cursor("main"); c != first {
		t.Fatalf("stored cursor during the follow-up: got %d; want %d", c, first)
	}
	again.result("answer two")
	h.nextSend()
	again.exit(0)
	h.waitIdle("main")
}

func TestNoPipeIntoTaskContainer(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	task, err := h.db.Tasks.Create(context.Background(), store.Task{Folder: "main", Chat: mainChat, Prompt: "water the plants", Kind: "once", Value: "2026-01-01T00:00:00Z", ContextMode: store.ContextIsolated})
	if err != nil {
		t.Fatal(err)
	}
	h.r.EnqueueTask(task)
	run := h.nextRun()
	if in := run.spec.Input; !in.IsTask || !strings.Contains(in.Prompt, "water the plants") || in.SessionID != "" {
		t.Fatalf("task input: got %+v; want a task with its prompt and no session", in)
	}
	h.post(mainChat, "are you there?")
	pollUntil(t, func() bool {
		for _, g := range h.r.Status().Queue.Groups {
			if g.Group == "main" && g.PendingMessages {
				return true
			}
		}
		return false
	}, "the message waiting for the task to end")
	if n := len(jsonFiles(t, h.inputDir("main"))); n != 0 {
		t.Fatalf("input files during the task: got %d; want 0 (never piped into a task)", n)
	}
	run.result("plants watered")
	if got := h.nextSend(); got.Text != "plants watered" {
		t.Fatalf("task output: got %q", got.Text)
	}
	// A message waits: the idle task container is closed at once.
	waitFile(t, filepath.Join(h.inputDir("main"), ipc.CloseName))
	run.exit(0)
	msgRun := h.nextRun()
	if in := msgRun.spec.Input; in.IsTask || !strings.Contains(in.Prompt, "are you there?") {
		t.Fatalf("after the task: got %+v; want a message run with the waiting message", in)
	}
	if _, err := os.Stat(filepath.Join(h.inputDir("main"), ipc.CloseName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale close sentinel at the next start: got %v; want it removed", err)
	}
	msgRun.result("yes")
	h.nextSend()
	msgRun.exit(0)
	h.waitIdle("main")
	runs, err := h.db.Tasks.Runs(context.Background(), task.ID, 0)
	if err != nil || len(runs) != 1 || runs[0].Status != store.RunOK || runs[0].Result != "plants watered" {
		t.Fatalf("task runs: got %+v, %v; want one ok run with its result", runs, err)
	}
}

func TestTaskCloseDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 10 * time.Second
		h := newHarness(t, func(c *Config) { c.TaskCloseDelay = delay })
		h.start()
		h.r.EnqueueTask(store.Task{ID: "task-x", Folder: "fam", Chat: famChat, Prompt: "report", Kind: "once", ContextMode: store.ContextGroup})
		run := h.nextRun()
		run.result("report done")
		if got := h.nextSend(); got.Text != "report done" || got.Chat != string(famChat) {
			t.Fatalf("task output: got %+v", got)
		}
		closePath := filepath.Join(h.inputDir("fam"), ipc.CloseName)
		advance(delay - time.Millisecond)
		if fileExists(closePath) {
			t.Fatalf("task container closed before its close delay %s", delay)
		}
		advance(time.Millisecond)
		if !fileExists(closePath) {
			t.Fatalf("task container not closed %s after its first result", delay)
		}
		run.exit(0)
		h.waitIdle("fam")
	})
}

func TestIdleTimeoutWritesClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 30 * time.Minute
		h := newHarness(t, func(c *Config) { c.IdleTimeout = idle })
		h.start()
		h.post(mainChat, "hello")
		run := h.nextRun()
		run.result("hi")
		h.nextSend()
		closeFile := filepath.Join(h.inputDir("main"), ipc.CloseName)
		advance(idle - time.Second)
		if fileExists(closeFile) {
			t.Fatalf("closed a second before the idle timeout %s", idle)
		}
		advance(time.Second)
		if !fileExists(closeFile) {
			t.Fatalf("not closed at the idle timeout %s", idle)
		}
		run.exit(0)
		h.waitIdle("main")
		if stops := h.rt.stops(); len(stops) != 0 {
			t.Fatalf("containers stopped: got %v; want none (closed gracefully)", stops)
		}
	})
}

func TestHardTimeout(t *testing.T) {
	t.Run("no output: stopped and retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.ContainerTimeout = 50 * time.Millisecond })
			h.start()
			h.post(mainChat, "hello")
			run := h.nextRun()
			<-run.exited // stopped by the timeout
			if stops := h.rt.stops(); len(stops) == 0 || stops[0] != run.id {
				t.Fatalf("stopped: got %v; want %s first", stops, run.id)
			}
			retry := h.nextRun()
			if !strings.Contains(retry.spec.Input.Prompt, ">hello</message>") {
				t.Fatalf("retry prompt: got %q; want the same message again", retry.spec.Input.Prompt)
			}
			if c := h.cursor("main"); c != 0 {
				t.Fatalf("cursor after a timeout without reply: got %d; want 0", c)
			}
		})
	})
	t.Run("after a reply: a normal end", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.ContainerTimeout = 200 * time.Millisecond })
			h.start()
			id := h.post(mainChat, "hello")
			run := h.nextRun()
			run.result("hi")
			h.nextSend()
			<-run.exited
			st := h.waitIdle("main")
			if st.Retries != 0 || h.rt.starts() != 1 {
				t.Fatalf("after the timeout: retries %d, starts %d; want 0 and 1", st.Retries, h.rt.starts())
			}
			if c := h.cursor("main"); c != id {
				t.Fatalf("cursor: got %d; want %d", c, id)
			}
		})
	})
}

func TestCursorRules(t *testing.T) {
	t.Run("rolled back when no reply went out", func(t *testing.T) {
		h := newHarness(t, nil)
		h.start()
		id := h.post(mainChat, "hello")
		run := h.nextRun()
		run.result("<internal>nothing to say yet</internal>")
		run.emit(ipc.Event{Type: ipc.EventError, Message: "claude exited", Retryable: true})
		run.exit(1)
		retry := h.nextRun()
		if !strings.Contains(retry.spec.Input.Prompt, ">hello</message>") {
			t.Fatalf("retry prompt: got %q; want the same message", retry.spec.Input.Prompt)
		}
		if c := h.cursor("main"); c != 0 {
			t.Fatalf("stored cursor before any reply: got %d; want 0", c)
		}
		retry.result("answered")
		h.nextSend()
		retry.exit(0)
		h.waitIdle("main")
		if c := h.cursor("main"); c != id {
			t.Fatalf("cursor: got %d; want %d", c, id)
		}
	})
	t.Run("kept after a reply went out", func(t *testing.T) {
		h := newHarness(t, nil)
		h.start()
		id := h.post(mainChat, "hello")
		run := h.nextRun()
		run.result("answered")
		h.nextSend()
		run.exit(1)
		st := h.waitIdle("main")
		if c := h.cursor("main"); c != id {
			t.Fatalf("cursor: got %d; want %d", c, id)
		}
		if n := h.rt.starts(); n != 1 || st.Retries != 0 {
			t.Fatalf("starts %d, retries %d; want 1 and 0 (the question is not answered twice)", n, st.Retries)
		}
	})
	t.Run("send_message to its own chat counts as a reply", func(t *testing.T) {
		h := newHarness(t, nil)
		h.start()
		id := h.post(mainChat, "hello")
		run := h.nextRun()
		if _, err := h.r.SendMessage(context.Background(), nil, string(mainChat), "on it", store.OriginTool, "main"); err != nil {
			t.Fatal(err)
		}
		h.nextSend()
		if c := h.cursor("main"); c != id {
			t.Fatalf("cursor after send_message: got %d; want %d", c, id)
		}
		run.exit(1)
		h.waitIdle("main")
		if n := h.rt.starts(); n != 1 {
			t.Fatalf("starts: got %d; want 1", n)
		}
	})
	t.Run("error result before a reply closes and retries", func(t *testing.T) {
		h := newHarness(t, nil)
		h.start()
		h.post(mainChat, "hello")
		run := h.nextRun()
		run.emit(ipc.Event{Type: ipc.EventResult, IsError: true, Text: "API Error: overloaded"})
		waitFile(t, filepath.Join(h.inputDir("main"), ipc.CloseName))
		run.exit(0)
		retry := h.nextRun()
		retry.result("better now")
		if got := h.nextSend(); got.Text != "better now" {
			t.Fatalf("sent: got %q; want only the retry's answer (no error text)", got.Text)
		}
		retry.exit(0)
		h.waitIdle("main")
	})
	t.Run("runner error event before a reply closes and retries", func(t *testing.T) {
		h := newHarness(t, nil)
		h.start()
		h.post(mainChat, "hello")
		run := h.nextRun()
		// claude crashed mid-turn; the runner restarted it but the turn is lost.
		run.emit(ipc.Event{Type: ipc.EventError, Message: "claude exited unexpectedly; restarted with --resume", Retryable: true})
		waitFile(t, filepath.Join(h.inputDir("main"), ipc.CloseName))
		run.exit(0)
		retry := h.nextRun()
		if !strings.Contains(retry.spec.Input.Prompt, "hello") {
			t.Fatalf("retry prompt %q; want the unanswered message again", retry.spec.Input.Prompt)
		}
		retry.result("answered")
		if got := h.nextSend(); got.Text != "answered" {
			t.Fatalf("sent: got %q; want the retry's answer", got.Text)
		}
		retry.exit(0)
		h.waitIdle("main")
	})
	t.Run("runner error event after a reply changes nothing", func(t *testing.T) {
		h := newHarness(t, nil)
		h.start()
		h.post(mainChat, "hello")
		run := h.nextRun()
		run.result("first answer")
		h.nextSend()
		run.emit(ipc.Event{Type: ipc.EventError, Message: "claude exited unexpectedly", Retryable: true})
		run.exit(0)
		h.waitIdle("main")
		if n := h.rt.starts(); n != 1 {
			t.Fatalf("starts: got %d; want 1 (no retry after a reply)", n)
		}
	})
}

func TestRetriesExhaustedNoticeOnce(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RetryDelays = []time.Duration{time.Millisecond, time.Millisecond} })
	h.rt.onStart = func(r *fakeRun) { r.exit(1) }
	h.start()
	h.post(mainChat, "hello")
	notice := h.nextSend()
	if !strings.Contains(notice.Text, "failed 3 times") {
		t.Fatalf("notice: got %q; want it to say the agent failed 3 times", notice.Text)
	}
	st := h.waitIdle("main")
	if !st.GaveUp || h.rt.starts() != 3 {
		t.Fatalf("gave up %v after %d starts; want true after 3", st.GaveUp, h.rt.starts())
	}
	if texts := h.ch.SentTexts(); len(texts) != 1 {
		t.Fatalf("sent: got %q; want exactly one notice", texts)
	}
	fs := h.r.Status().Failures
	if len(fs) != 1 || fs[0].Group != "main" || fs[0].Kind != "messages" {
		t.Fatalf("status failures: got %+v; want one for main", fs)
	}
	rows, err := h.db.Outbox.RecentFailures(context.Background(), time.Time{}, 0)
	if err != nil || len(rows) != 0 {
		t.Fatalf("outbox failures: got %v, %v; want none (the notice was sent)", rows, err)
	}
	// The next message starts a fresh sequence with the old one as context.
	h.rt.mu.Lock()
	h.rt.onStart = nil
	h.rt.mu.Unlock()
	h.post(mainChat, "still there?")
	run := h.nextRun()
	for !strings.Contains(run.spec.Input.Prompt, "still there?") {
		run = h.nextRun() // skip the failed runs
	}
	if !strings.Contains(run.spec.Input.Prompt, ">hello</message>") {
		t.Fatalf("next prompt: got %q; want the unanswered message too", run.spec.Input.Prompt)
	}
	run.result("yes")
	h.nextSend()
	run.exit(0)
	h.waitIdle("main")
}

func TestOutboxSentAtStart(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	left, err := h.db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: mainChat, Text: "left over", Origin: store.OriginReply, Group: "main"})
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	got := h.nextSend()
	if got.Text != "left over" || got.ID != left.ExternalID {
		t.Fatalf("sent at start: got %+v; want %q with id %s", got, "left over", left.ExternalID)
	}
	pollUntil(t, func() bool {
		it, err := h.db.Outbox.Get(ctx, left.ID)
		return err == nil && it.State == store.OutboxSent
	}, "row marked sent")
}

func TestOutboxFailures(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.ch.FailWith(func(m channel.Outgoing) error {
		if strings.HasPrefix(m.Text, "bad") {
			return fmt.Errorf("unknown chat: %w", channel.ErrPermanent)
		}
		return nil
	})
	bad, err := h.r.SendMessage(ctx, nil, string(mainChat), "bad one", store.OriginTool, "main")
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := h.r.SendMessage(ctx, nil, "nowhere:1", "nobody owns this chat", store.OriginTool, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.r.SendMessage(ctx, nil, string(mainChat), "good one", store.OriginTool, "main"); err != nil {
		t.Fatal(err)
	}
	h.start()
	if got := h.nextSend(); got.Text != "good one" {
		t.Fatalf("sent: got %q; want the good one (the permanent failure does not block it)", got.Text)
	}
	for _, id := range []store.OutboxID{bad.ID, orphan.ID} {
		pollUntil(t, func() bool {
			it, err := h.db.Outbox.Get(ctx, id)
			return err == nil && it.State == store.OutboxFailed && it.LastError != ""
		}, "row %d failed", id)
	}
}

func TestSendMessageStripsInternal(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	if _, err := h.r.SendMessage(ctx, nil, string(mainChat), "<internal>only thoughts</internal>\n", store.OriginTool, "main"); !errors.Is(err, ErrEmpty) {
		t.Fatalf("internal-only text: got %v; want ErrEmpty", err)
	}
	it, err := h.r.SendMessage(ctx, nil, string(mainChat), "Done.<internal>\nchecked twice\n</internal>", store.OriginTool, "main")
	if err != nil {
		t.Fatal(err)
	}
	if it.Text != "Done." || it.State != store.OutboxPending || it.Origin != store.OriginTool {
		t.Fatalf("outbox row: got %+v; want pending %q from the tool", it, "Done.")
	}
	h.start()
	if got := h.nextSend(); got.Text != "Done." {
		t.Fatalf("sent: got %q; want %q", got.Text, "Done.")
	}
	pollUntil(t, func() bool { rows, err := h.db.Outbox.Pending(ctx, 0); return err == nil && len(rows) == 0 }, "outbox sent")
	if texts := h.ch.SentTexts(); !slices.Equal(texts, []string{"Done."}) {
		t.Fatalf("sent: got %q; want only %q (nothing committed for the empty message)", texts, "Done.")
	}
}

func TestLeftoversStoppedAndRerun(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.rt.managed = []container.Info{
		{ID: "old-1", Name: "bridged-main-1", Group: "main", Instance: "previous", Home: container.HomeLabel(h.home)},
		{ID: "old-2", Name: "bridged-fam-1", Group: "fam", Instance: "previous", Home: container.HomeLabel(h.home)},
		// Another daemon's container on the same engine is left alone.
		{ID: "other-home", Name: "bridged-main-9", Group: "main", Instance: "elsewhere", Home: container.HomeLabel("/srv/other")},
	}
	// A message the killed daemon had handed over without replying, and
	// an input file its container never read.
	id, _, err := h.db.Messages.Insert(ctx, store.Message{Chat: mainChat, ExternalID: "x1", SenderName: "Alice", Text: "were you listening?", SentAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ipctest.WriteInput(ipc.Layout{Root: filepath.Join(h.home, "data", "ipc", "main")}, "stale"); err != nil {
		t.Fatal(err)
	}
	h.start()
	run := h.nextRun()
	h.rt.mu.Lock()
	history := slices.Clone(h.rt.history)
	h.rt.mu.Unlock()
	if len(history) != 3 || history[2] != "start main" || !slices.Contains(history[:2], "stop old-1") || !slices.Contains(history[:2], "stop old-2") {
		t.Fatalf("runtime calls: got %v; want both leftovers stopped, then main started", history)
	}
	if !strings.Contains(run.spec.Input.Prompt, "were you listening?") {
		t.Fatalf("prompt: got %q; want the unanswered message", run.spec.Input.Prompt)
	}
	if n := len(jsonFiles(t, h.inputDir("main"))); n != 0 {
		t.Fatalf("stale input files: got %d; want 0", n)
	}
	run.result("yes, sorry")
	h.nextSend()
	run.exit(0)
	h.waitIdle("main")
	if n := h.rt.starts(); n != 1 {
		t.Fatalf("starts: got %d; want the message re-run exactly once", n)
	}
	if c := h.cursor("main"); c != id {
		t.Fatalf("cursor: got %d; want %d", c, id)
	}
}

func TestSessionUpdates(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	if err := h.db.Sessions.Set(ctx, store.Session{Folder: "main", SessionID: "old", LastUUID: "old-u"}); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.post(mainChat, "hello")
	run := h.nextRun()
	if in := run.spec.Input; in.SessionID != "old" || in.ResumeAt != "old-u" {
		t.Fatalf("resume: got %q at %q; want old at old-u", in.SessionID, in.ResumeAt)
	}
	run.emit(ipc.Event{Type: ipc.EventSession, SessionID: "new", Fresh: true})
	pollUntil(t, func() bool {
		s, err := h.db.Sessions.Get(ctx, "main")
		return err == nil && s.SessionID == "new" && s.LastUUID == ""
	}, "fresh session stored without the old uuid")
	run.emit(ipc.Event{Type: ipc.EventResult, Text: "hi", SessionID: "new", LastUUID: "new-u"})
	h.nextSend()
	s, err := h.db.Sessions.Get(ctx, "main")
	if err != nil || s.SessionID != "new" || s.LastUUID != "new-u" {
		t.Fatalf("session: got %+v, %v; want new at new-u", s, err)
	}
	run.exit(0)
	h.waitIdle("main")
}

func TestTaskFailureNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil)
		h.rt.onStart = func(r *fakeRun) { r.exit(2) }
		h.start()
		ctx := context.Background()
		task, err := h.db.Tasks.Create(ctx, store.Task{Folder: "fam", Chat: famChat, Prompt: "report", Kind: "once", Value: "2026-01-01T00:00:00Z"})
		if err != nil {
			t.Fatal(err)
		}
		h.r.EnqueueTask(task)
		got := h.nextSend()
		if got.Chat != string(famChat) || !strings.Contains(got.Text, string(task.ID)) {
			t.Fatalf("notice: got %+v; want one naming the task in its chat", got)
		}
		h.waitIdle("fam")
		runs, err := h.db.Tasks.Runs(ctx, task.ID, 0)
		if err != nil || len(runs) != 1 || runs[0].Status != store.RunError || !strings.Contains(runs[0].Error, "code 2") {
			t.Fatalf("task runs: got %+v, %v; want one error run naming the exit code", runs, err)
		}
		// A task that failed last time fails quietly (no notice per run).
		task.LastResult = "error: container exited with code 2"
		task.ID = "task-again"
		h.r.EnqueueTask(task)
		pollUntil(t, func() bool { return h.rt.starts() == 2 }, "the second task run")
		h.waitIdle("fam")
		st, err := h.db.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(h.ch.SentTexts()); n != 1 || st.PendingOutbox != 0 {
			t.Fatalf("notices: %d sent, %d pending; want 1 and 0", n, st.PendingOutbox)
		}
	})
}

func TestInboundStoresChatAndDedupes(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	m := channel.Message{Chat: string(famChat), ChatName: "The Family", IsGroup: true, ExternalID: "wa-1", Sender: "bob@x", SenderName: "Bob", Text: "@" + testName + " hi", SentAt: time.Now()}
	var ids []store.MessageID
	for range 2 { // a redelivery is stored once, and gives the stored id back
		id, err := h.r.in.Inbound(ctx, m)
		if err != nil {
			t.Fatalf("inbound: %v", err)
		}
		ids = append(ids, id)
	}
	if ids[0] == 0 || ids[1] != ids[0] {
		t.Fatalf("ids of a message and its redelivery: %v; want one nonzero id twice", ids)
	}
	if id, err := h.r.in.Inbound(ctx, channel.Message{Chat: "fake:stranger", ExternalID: "wa-2", Text: "hello?"}); err != nil || id != 0 {
		t.Fatalf("inbound from an unregistered chat: id %d, %v; want 0 and no error", id, err)
	}
	if _, err := h.r.in.Inbound(ctx, channel.Message{Chat: " ", Text: "x"}); err == nil {
		t.Fatalf("inbound without a chat: got nil; want an error")
	}
	c, err := h.db.Chats.Get(ctx, famChat)
	if err != nil || c.Name != "The Family" || c.Channel != "fake" || !c.IsGroup {
		t.Fatalf("chat: got %+v, %v; want name, channel fake, group", c, err)
	}
	if _, err := h.db.Chats.Get(ctx, "fake:stranger"); err != nil {
		t.Fatalf("unregistered chat's metadata: %v", err)
	}
	msgs, err := h.db.Messages.After(ctx, famChat, 0, 0)
	if err != nil || len(msgs) != 1 || msgs[0].ID != ids[0] {
		t.Fatalf("stored messages: got %+v, %v; want 1, id %d", msgs, err, ids[0])
	}
	h.start()
	run := h.nextRun()
	if st := h.r.Status(); len(st.Containers) != 1 || st.Containers[0].Group != "fam" || st.Containers[0].Kind != "messages" {
		t.Fatalf("status containers: got %+v; want fam's message container", st.Containers)
	}
	if n := strings.Count(run.spec.Input.Prompt, "<message "); n != 1 {
		t.Fatalf("prompt holds %d messages; want 1", n)
	}
	run.result("hi Bob")
	h.nextSend()
	run.exit(0)
	h.waitIdle("fam")
	if st := h.r.Status(); len(st.Containers) != 0 {
		t.Fatalf("status containers after the run: got %+v; want none", st.Containers)
	}
}

func TestTypingWhileAgentWorks(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.post(mainChat, "hello")
	run := h.nextRun()
	pollUntil(t, func() bool {
		return slices.Equal(h.ch.Typing(), []channeltest.Typing{{Chat: string(mainChat), On: true}})
	}, "typing on once the agent has the messages")
	run.result("hi")
	h.nextSend()
	pollUntil(t, func() bool {
		return slices.Equal(h.ch.Typing(), []channeltest.Typing{{Chat: string(mainChat), On: true}, {Chat: string(mainChat), On: false}})
	}, "typing off once the reply is out")
	run.exit(0)
	h.waitIdle("main")
}

// The message loop's read of the pending messages that woke the agent is
// the one the run starts with: a message run reads them from the store once.
func TestOnePendingReadPerRun(t *testing.T) {
	h := newHarness(t, nil)
	h.post(mainChat, "hello")
	h.start() // the loop looks at both groups once: two reads
	run := h.nextRun()
	if !strings.Contains(run.spec.Input.Prompt, "hello") {
		t.Fatalf("prompt: got %q; want the message", run.spec.Input.Prompt)
	}
	// The run may start before the loop's first pass has looked at the
	// other group: a round trip through the loop waits for the pass's end.
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := h.r.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.r.pendingReads.Load(); got != 2 {
		t.Fatalf("pending reads: got %d; want 2 (one per group, none more for the run)", got)
	}
	run.result("hi")
	h.nextSend()
	run.exit(0)
	h.waitIdle("main")
}

// A message's group is looked up once on its way from the channel to the
// reply, by the ingest (for the allow list): the message loop takes it from
// there, the container start and the reply look it up no more. Both the
// path that starts a container and the pipe into the live one.
func TestOneGroupLookupPerMessage(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := h.r.Ping(ctx); err != nil { // the loop's first pass looked at every group
		t.Fatal(err)
	}
	lookups := func(what string, do func()) {
		t.Helper()
		before := h.db.Groups.Lookups()
		do()
		if got := h.db.Groups.Lookups() - before; got != 1 {
			t.Errorf("%s: %d group lookups; want 1", what, got)
		}
	}
	var run *fakeRun
	lookups("a message that starts the container, to its reply", func() {
		h.post(mainChat, "hello")
		run = h.nextRun()
		run.result("hi")
		h.nextSend()
	})
	lookups("a message piped into the live container, to its reply", func() {
		h.post(mainChat, "and again")
		inputs := waitInputs(t, h.inputDir("main"), 1)
		run.result("hi again")
		h.nextSend()
		consume(t, h.inputDir("main"), inputs)
	})
	run.exit(0)
	h.waitIdle("main")
}

// A batch waiting for a slot starts its container with the group as it is
// then: a change of the group while it waited (here its model) reaches the
// container, because the run reads the group again when the registry
// changed since the message loop looked it up.
func TestQueuedBatchSeesGroupChange(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxContainers = 1 })
	ctx := context.Background()
	h.start()
	h.post(mainChat, "hello")
	first := h.nextRun()
	h.post(famChat, "@Robo hi")
	pollUntil(t, func() bool { return slices.Contains(h.r.Status().Queue.Waiting, "fam") }, "fam waiting for a slot")
	g, err := h.db.Groups.ByFolder(ctx, "fam")
	if err != nil {
		t.Fatal(err)
	}
	g.ContainerConfig.Model = "opus"
	if err := h.db.Groups.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	first.result("hi")
	h.nextSend()
	first.exit(0)
	run := h.nextRun()
	if run.spec.Group != "fam" || run.spec.Input.Model != "opus" {
		t.Fatalf("next run: group %q, model %q; want fam with the model set while it waited", run.spec.Group, run.spec.Input.Model)
	}
	if !strings.Contains(run.spec.Input.Prompt, "@Robo hi") {
		t.Fatalf("prompt: got %q; want the waiting message", run.spec.Input.Prompt)
	}
	run.result("hello fam")
	h.nextSend()
	run.exit(0)
	h.waitIdle("fam")
}
