package router

import (
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	_ "modernc.org/sqlite"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// laterTurn starts main's container, has its first turn answered, pipes a
// second message into the idle agent and lets the runner read it: the
// second turn is in flight. It returns the run and the two message ids.
func laterTurn(t *testing.T, h *harness) (*fakeRun, store.MessageID, store.MessageID) {
	t.Helper()
	first := h.post(mainChat, "first")
	run := h.nextRun()
	run.result("answer one")
	if got := h.nextSend(); got.Text != "answer one" {
		t.Fatalf("sent %q; want the first answer", got.Text)
	}
	second := h.post(mainChat, "second")
	consume(t, h.inputDir("main"), waitInputs(t, h.inputDir("main"), 1))
	if c := h.cursor("main"); c != first {
		t.Fatalf("cursor while the second turn runs: got %d; want %d", c, first)
	}
	return run, first, second
}

// nextRunWith waits for the next container and checks that its prompt holds
// the second message and not the first (answered) one.
func nextRunWith(t *testing.T, h *harness, want, notWant string) *fakeRun {
	t.Helper()
	run := h.nextRun()
	p := run.spec.Input.Prompt
	if !strings.Contains(p, ">"+want+"</message>") || strings.Contains(p, ">"+notWant+"</message>") {
		t.Fatalf("retry prompt %q; want %q and not %q", p, want, notWant)
	}
	return run
}

// retryingFailure returns main's failure that Status shows while the queue
// retries, if any.
func retryingFailure(h *harness) (Failure, bool) {
	for _, f := range h.r.Status().Failures {
		if f.Group == "main" && f.Kind == "messages" && strings.HasPrefix(f.Error, "attempt ") {
			return f, true
		}
	}
	return Failure{}, false
}

// A later turn whose claude died (the runner reports an error while the
// agent works on the turn) fails: the container is closed at once instead of
// staying busy, the cursor goes back to the last reply, the failure shows in
// status, and a retry answers the message.
func TestLaterTurnRunnerErrorRetried(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RetryDelays = []time.Duration{time.Millisecond} })
	h.start()
	run, first, second := laterTurn(t, h)

	run.emit(ipc.Event{Type: ipc.EventError, Message: "claude exited with status 2; restarted with --resume sess-1", Retryable: true})
	waitFile(t, filepath.Join(h.inputDir("main"), ipc.CloseName))
	run.exit(0) // the runner closed: nothing answered the turn

	retry := nextRunWith(t, h, "second", "first")
	if c := h.cursor("main"); c != first {
		t.Fatalf("cursor during the retry: got %d; want %d (rolled back to the last reply)", c, first)
	}
	f, ok := retryingFailure(h)
	if !ok || !strings.Contains(f.Error, "claude exited with status 2") {
		t.Fatalf("status failures %+v; want the failed turn with its reason while it is retried", h.r.Status().Failures)
	}
	retry.result("answer two")
	if got := h.nextSend(); got.Text != "answer two" {
		t.Fatalf("sent %q; want the retry's answer", got.Text)
	}
	retry.exit(0)
	h.waitIdle("main")
	if c := h.cursor("main"); c != second {
		t.Fatalf("cursor: got %d; want %d", c, second)
	}
	if _, ok := retryingFailure(h); ok {
		t.Fatalf("status failures %+v; want the retrying entry gone after the good run", h.r.Status().Failures)
	}
	if texts := h.ch.SentTexts(); !slices.Equal(texts, []string{"answer one", "answer two"}) {
		t.Fatalf("sent %q; want each answer once", texts)
	}
}

// The runner re-sends the turn in flight to the restarted claude: when that
// turn's result commits, nothing failed and nothing runs again.
func TestLaterTurnRecoveredByResend(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	run, _, second := laterTurn(t, h)
	run.emit(ipc.Event{Type: ipc.EventError, Message: "claude exited with status 2; restarted with --resume sess-1, the turn in flight sent again", Retryable: true})
	waitFile(t, filepath.Join(h.inputDir("main"), ipc.CloseName))
	run.result("answer two")
	if got := h.nextSend(); got.Text != "answer two" {
		t.Fatalf("sent %q; want the re-sent turn's answer", got.Text)
	}
	run.exit(0)
	st := h.waitIdle("main")
	if n := h.rt.starts(); n != 1 || st.Retries != 0 {
		t.Fatalf("starts %d, retries %d; want 1 and 0", n, st.Retries)
	}
	if c := h.cursor("main"); c != second {
		t.Fatalf("cursor: got %d; want %d", c, second)
	}
}

// A container killed during a later turn (docker kill) loses that turn: it
// is retried, never skipped.
func TestLaterTurnContainerKilled(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	run, first, second := laterTurn(t, h)
	run.exit(137)
	retry := nextRunWith(t, h, "second", "first")
	if c := h.cursor("main"); c != first {
		t.Fatalf("cursor during the retry: got %d; want %d", c, first)
	}
	retry.result("answer two")
	h.nextSend()
	retry.exit(0)
	h.waitIdle("main")
	if c := h.cursor("main"); c != second {
		t.Fatalf("cursor: got %d; want %d", c, second)
	}
}

// A later turn that hangs past the container timeout is retried; the
// timeout is not a normal end while a turn is unanswered.
func TestLaterTurnHangRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.ContainerTimeout = 300 * time.Millisecond })
		h.start()
		first := h.post(mainChat, "first")
		run := h.nextRun()
		h.post(mainChat, "second") // piped while the first turn runs: its own turn follows
		consume(t, h.inputDir("main"), settledInputs(t, h.inputDir("main"), 1))
		run.result("answer one")
		h.nextSend()
		<-run.exited // the second turn prints nothing: stopped by the timeout
		retry := nextRunWith(t, h, "second", "first")
		if c := h.cursor("main"); c != first {
			t.Fatalf("cursor during the retry: got %d; want %d", c, first)
		}
		retry.result("answer two")
		if got := h.nextSend(); got.Text != "answer two" {
			t.Fatalf("sent %q; want the retry's answer", got.Text)
		}
		retry.exit(0)
		h.waitIdle("main")
	})
}

// A later turn that ends with an error result fails like a first turn: the
// container is closed, later results of it are not committed (they would
// store a cursor past the failed turn), and the messages are retried.
func TestLaterTurnErrorResultRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	run, _, second := laterTurn(t, h)
	run.emit(ipc.Event{Type: ipc.EventResult, IsError: true, Text: "API Error: overloaded"})
	waitFile(t, filepath.Join(h.inputDir("main"), ipc.CloseName))
	run.result("a late answer")
	run.exit(0)
	retry := nextRunWith(t, h, "second", "first")
	retry.result("answer two")
	if got := h.nextSend(); got.Text != "answer two" {
		t.Fatalf("sent %q; want the retry's answer (no error text, no late answer)", got.Text)
	}
	retry.exit(0)
	h.waitIdle("main")
	if texts := h.ch.SentTexts(); !slices.Equal(texts, []string{"answer one", "answer two"}) {
		t.Fatalf("sent %q; want the two answers only", texts)
	}
	if c := h.cursor("main"); c != second {
		t.Fatalf("cursor: got %d; want %d", c, second)
	}
}

// diskFull makes every outbox insert of h's store fail as a full disk would,
// until the returned function is called.
func diskFull(t *testing.T, h *harness) (restore func()) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(h.home, "store", "bridged.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TRIGGER test_disk_full BEFORE INSERT ON outbox BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := db.Exec(`DROP TRIGGER test_disk_full`); err != nil {
			t.Fatal(err)
		}
	}
}

// A reply that cannot be committed fails its turn: the cursor never moves
// past its message, status and the failure notice say why, and the message
// is answered once space returns.
func TestReplyNotCommittedFailsTurn(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RetryDelays = []time.Duration{time.Millisecond} })
	h.start()
	first := h.post(mainChat, "first")
	run := h.nextRun()
	run.result("answer one")
	h.nextSend()

	restore := diskFull(t, h)
	h.post(mainChat, "second")
	consume(t, h.inputDir("main"), waitInputs(t, h.inputDir("main"), 1))
	run.result("answer two")
	waitFile(t, filepath.Join(h.inputDir("main"), ipc.CloseName))
	run.exit(0)
	if c := h.cursor("main"); c != first {
		t.Fatalf("cursor after the reply could not be committed: got %d; want %d", c, first)
	}

	// The retry cannot commit either: the retries end in a notice that
	// says why (sent straight through the channel, as the outbox is full).
	retry := nextRunWith(t, h, "second", "first")
	if f, ok := retryingFailure(h); !ok || !strings.Contains(f.Error, "failed, retrying: could not store the reply: disk full") {
		t.Fatalf("status failures %+v; want the failed turn saying the disk is full", h.r.Status().Failures)
	}
	retry.result("answer two again")
	retry.exit(0)
	notice := h.nextSend()
	if !strings.Contains(notice.Text, "(could not store the reply: disk full") || !strings.Contains(notice.Text, "failed 2 times") {
		t.Fatalf("notice %q; want it to say the agent failed 2 times because the disk is full", notice.Text)
	}
	h.waitIdle("main")
	fs := h.r.Status().Failures
	if len(fs) != 1 || !strings.Contains(fs[0].Error, "could not store the reply: disk full") || !strings.Contains(fs[0].Error, "database or disk is full") {
		t.Fatalf("status failures %+v; want one saying the reply could not be stored because the disk is full", fs)
	}
	if c := h.cursor("main"); c != first {
		t.Fatalf("cursor after the retries: got %d; want %d", c, first)
	}

	// Space returns: the next message runs with the unanswered one.
	restore()
	third := h.post(mainChat, "third")
	again := h.nextRun()
	if p := again.spec.Input.Prompt; !strings.Contains(p, ">second</message>") || !strings.Contains(p, ">third</message>") {
		t.Fatalf("prompt %q; want the unanswered message with the new one", p)
	}
	again.result("answers two and three")
	if got := h.nextSend(); got.Text != "answers two and three" {
		t.Fatalf("sent %q", got.Text)
	}
	again.exit(0)
	h.waitIdle("main")
	if c := h.cursor("main"); c != third {
		t.Fatalf("cursor: got %d; want %d", c, third)
	}
	if texts := h.ch.SentTexts(); slices.Contains(texts, "answer two") || slices.Contains(texts, "answer two again") {
		t.Fatalf("sent %q; a reply that was never committed went out", texts)
	}
}

// A first turn whose reply cannot be committed is not counted as answered:
// without a reply the run fails and is retried.
func TestFirstReplyNotCommittedRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	restore := diskFull(t, h)
	h.post(mainChat, "hello")
	run := h.nextRun()
	run.result("hi")
	waitFile(t, filepath.Join(h.inputDir("main"), ipc.CloseName))
	restore()
	run.exit(0)
	retry := h.nextRun()
	if !strings.Contains(retry.spec.Input.Prompt, ">hello</message>") {
		t.Fatalf("retry prompt %q; want the message again", retry.spec.Input.Prompt)
	}
	retry.result("hi again")
	if got := h.nextSend(); got.Text != "hi again" {
		t.Fatalf("sent %q; want the retry's answer", got.Text)
	}
	retry.exit(0)
	h.waitIdle("main")
}

// A first turn that never starts (the container prints nothing at all) is
// stopped by the start timeout, well before the container timeout, and a
// hang is retried once: the notice comes after two attempts, not six.
func TestFirstTurnHangNoticeAfterTwoAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(c *Config) {
			c.StartTimeout = 50 * time.Millisecond
			c.RetryDelays = []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond}
		})
		h.start()
		h.post(mainChat, "hello")
		notice := h.nextSend()
		if !strings.Contains(notice.Text, "failed 2 times") || !strings.Contains(notice.Text, "did not start") {
			t.Fatalf("notice %q; want it to say the agent did not start, twice", notice.Text)
		}
		st := h.waitIdle("main")
		if n := h.rt.starts(); n != 2 || !st.GaveUp {
			t.Fatalf("starts %d, gave up %v; want 2 and true", n, st.GaveUp)
		}
		if fs := h.r.Status().Failures; len(fs) != 1 || !strings.Contains(fs[0].Error, "no output within 50ms") {
			t.Fatalf("status failures %+v; want the hang", fs)
		}
	})
}

// A turn that starts and then hangs past the container timeout is retried
// once, then reported.
func TestTurnHangRetriedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(c *Config) {
			c.ContainerTimeout = 100 * time.Millisecond
			c.RetryDelays = []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond}
		})
		h.rt.onStart = func(r *fakeRun) { r.emit(ipc.Event{Type: ipc.EventSession, SessionID: "sess-1"}) }
		h.start()
		h.post(mainChat, "hello")
		notice := h.nextSend()
		if !strings.Contains(notice.Text, "failed 2 times") || !strings.Contains(notice.Text, "container timeout") {
			t.Fatalf("notice %q; want it to say the agent hung past the container timeout, twice", notice.Text)
		}
		if n := h.rt.starts(); n != 2 {
			t.Fatalf("starts %d; want 2", n)
		}
		// The next message starts a fresh sequence.
		h.rt.mu.Lock()
		h.rt.onStart = nil
		h.rt.mu.Unlock()
		h.post(mainChat, "still there?")
		run := h.nextRun()
		for !strings.Contains(run.spec.Input.Prompt, "still there?") {
			run = h.nextRun() // skip the hung runs
		}
		run.result("yes")
		if got := h.nextSend(); got.Text != "yes" {
			t.Fatalf("sent %q", got.Text)
		}
		run.exit(0)
		h.waitIdle("main")
	})
}
