package agentrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// These tests drive a group's run object alone: a real store and home, a
// fake container runtime, and fakes for the queue's slot and the owner.

// ---- fakes ----

// ctr is one fake container: the test writes its stdout and ends it.
type ctr struct {
	spec   container.Spec
	mu     sync.Mutex
	closed bool
	code   int
	events chan ipc.Event
	exited chan struct{}
}

func (c *ctr) ID() string               { return "c-" + c.spec.Name }
func (c *ctr) Events() <-chan ipc.Event { return c.events }
func (c *ctr) Wait(ctx context.Context) (container.Exit, error) {
	select {
	case <-c.exited:
		c.mu.Lock()
		defer c.mu.Unlock()
		return container.Exit{Code: c.code}, nil
	case <-ctx.Done():
		return container.Exit{}, ctx.Err()
	}
}

func (c *ctr) emit(ev ipc.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.events <- ev
	}
}

func (c *ctr) result(text string) {
	c.emit(ipc.Event{Type: ipc.EventResult, Text: text, SessionID: "s1"})
}

func (c *ctr) exit(code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed, c.code = true, code
	close(c.events)
	close(c.exited)
}

type runtime struct {
	started chan *ctr
	mu      sync.Mutex
	stopped int
}

func (r *runtime) Start(ctx context.Context, spec container.Spec) (container.Run, error) {
	c := &ctr{spec: spec, events: make(chan ipc.Event, 16), exited: make(chan struct{})}
	r.started <- c
	return c, nil
}

func (r *runtime) Stop(ctx context.Context, id string, grace time.Duration) error {
	r.mu.Lock()
	r.stopped++
	r.mu.Unlock()
	return nil
}

func (r *runtime) ListManaged(ctx context.Context) ([]container.Info, error) { return nil, nil }

// slot is the queue's object for one run: it records what the run told
// it, and answers MarkIdle with back.
type slot struct {
	group  string
	events chan string
	back   bool
}

func newSlot(group string) *slot { return &slot{group: group, events: make(chan string, 64)} }

func (s *slot) Group() string  { return s.group }
func (s *slot) Begin()         { s.events <- "begin" }
func (s *slot) MarkIdle() bool { s.events <- "idle"; return s.back }
func (s *slot) MarkBusy()      { s.events <- "busy" }
func (s *slot) MarkClosing()   { s.events <- "closing" }

// next returns what the run told its slot since the last call.
func (s *slot) next() []string {
	var out []string
	for {
		select {
		case e := <-s.events:
			out = append(out, e)
		default:
			return out
		}
	}
}

type queue struct {
	mu    sync.Mutex
	asked []string
}

func (q *queue) EnqueueMessages(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.asked = append(q.asked, name)
}

func (q *queue) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.asked
	q.asked = nil
	return out
}

type owner struct {
	mu      sync.Mutex
	notices []string
	typing  []string
	reads   int
	batch   Batch // what Batch answers (ok when it has messages)
}

func (o *owner) Notice(chat store.ChatID, folder store.Folder, text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.notices = append(o.notices, text)
}
func (o *owner) Spent(context.Context, store.Group)       {}
func (o *owner) Paused(context.Context, store.Group) bool { return false }
func (o *owner) Alert(func(context.Context, Alerts))      {}
func (o *owner) Wake()                                    {}
func (o *owner) SetTyping(chat store.ChatID, on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.typing = append(o.typing, fmt.Sprint(on))
}
func (o *owner) Batch(ctx context.Context, grp *Group, folder store.Folder) (Batch, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	b := o.batch
	b.After = grp.Handed()
	return b, len(b.Msgs) > 0, nil
}

// ---- harness ----

type rig struct {
	t     *testing.T
	x     *Runner
	db    *store.DB
	rt    *runtime
	q     *queue
	o     *owner
	dir   string
	group store.Group
}

const idleTimeout = 30 * time.Minute

func newRig(t *testing.T, mod func(*Config)) *rig {
	t.Helper()
	dir := t.TempDir()
	db := storetest.OpenHome(t, dir)
	fam := store.Group{Chat: "local:fam", Name: "Fam", Folder: "fam", Trigger: "@Robo"}
	if _, err := db.Groups.Add(context.Background(), fam); err != nil {
		t.Fatal(err)
	}
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		uid, gid = 61000, 61000
	}
	cfg := Config{AssistantName: "Robo", Timezone: time.UTC, Instance: "test", IdleTimeout: idleTimeout,
		TaskCloseDelay: 10 * time.Second, ContainerTimeout: time.Hour, StartTimeout: 2 * time.Minute}
	if mod != nil {
		mod(&cfg)
	}
	r := &rig{t: t, db: db, rt: &runtime{started: make(chan *ctr, 4)}, q: &queue{}, o: &owner{}, dir: dir, group: fam}
	r.x = New(cfg, Deps{
		Store: db, Runtime: r.rt, Home: hm, Queue: r.q, Owner: r.o, Log: zerolog.Nop(), Now: time.Now,
		Specs: container.SpecBuilder{Home: hm, AssistantName: "Robo", Timezone: time.UTC, Image: "img", Instance: "test", UID: uid, GID: gid},
	})
	return r
}

func (r *rig) batch(ids ...store.MessageID) Batch {
	b := Batch{Group: r.group, Version: r.db.Groups.Version()}
	for _, id := range ids {
		b.Msgs = append(b.Msgs, store.Message{ID: id, Chat: r.group.Chat, Sender: "alice", SenderName: "Alice", Text: fmt.Sprintf("message %d", id), SentAt: time.Now()})
	}
	return b
}

// hand hands b to the group's run object, as the message loop does.
func (r *rig) hand(b Batch) {
	grp := r.x.Group("fam")
	grp.Lock()
	defer grp.Unlock()
	if err := grp.Load(context.Background(), r.db, "fam"); err != nil {
		r.t.Fatal(err)
	}
	b.After = grp.Handed()
	r.x.Hand(grp, b)
}

// start runs a message run on s, as the queue does when it grants the
// slot, and returns its container and where RunMessages' error goes.
func (r *rig) start(s *slot) (*ctr, chan error) {
	done := make(chan error, 1)
	go func() { done <- r.x.RunMessages(context.Background(), s) }()
	synctest.Wait()
	select {
	case c := <-r.rt.started:
		return c, done
	default:
		r.t.Fatal("no container started")
		return nil, nil
	}
}

// live reads the group's run state under its lock.
func (r *rig) live() (handed store.MessageID, waiting, closing bool) {
	grp := r.x.Group("fam")
	grp.Lock()
	defer grp.Unlock()
	if run := grp.run; run != nil {
		return grp.Handed(), run.waiting, run.closing
	}
	return grp.Handed(), false, false
}

func (r *rig) cursor() store.MessageID {
	c, err := r.db.Sessions.Cursor(context.Background(), "fam")
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

func (r *rig) inputs() []string {
	names, _ := ipc.List(filepath.Join(r.dir, "data", "ipc", "fam", ipc.InputDir))
	return slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, ".json") })
}

func (r *rig) closed() bool {
	_, err := os.Lstat(filepath.Join(r.dir, "data", "ipc", "fam", ipc.InputDir, ipc.CloseName))
	return err == nil
}

func want(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %q; want %q", what, got, want)
	}
}

// ---- tests ----

// With no live container a batch is kept for the next start and the group
// asks the queue for a slot; a newer batch replaces it, and the start takes
// it without reading again.
func TestBatchKeptForNextStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.hand(r.batch(1))
		r.hand(r.batch(1, 2))
		want(t, "slots asked for", r.q.take(), []string{"fam", "fam"})
		s := newSlot("fam")
		c, done := r.start(s)
		if !strings.Contains(c.spec.Input.Prompt, "message 2") || r.o.reads != 0 {
			t.Fatalf("prompt %q after %d reads; want the newer batch, no read", c.spec.Input.Prompt, r.o.reads)
		}
		if h, _, _ := r.live(); h != 2 {
			t.Fatalf("handed: got %d; want 2", h)
		}
		c.result("hi")
		synctest.Wait()
		if got := r.cursor(); got != 2 {
			t.Fatalf("cursor after the reply: got %d; want 2", got)
		}
		c.exit(0)
		if err := <-done; err != nil {
			t.Fatalf("RunMessages: %v", err)
		}
		want(t, "slot reports", s.next(), []string{"begin", "idle", "closing"})

		// A retry has no batch: the owner reads again; nothing to wake
		// the agent starts nothing.
		if err := r.x.RunMessages(context.Background(), newSlot("fam")); err != nil || r.o.reads != 1 {
			t.Fatalf("RunMessages without a batch: %v after %d reads; want nil after 1", err, r.o.reads)
		}
	})
}

// A batch handed to a live, waiting agent is written as an input file: the
// agent is busy again (the queue hears it, the typing indicator goes on),
// and the next result stores the cursor of the piped messages.
func TestPipeIntoWaitingRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.hand(r.batch(1))
		s := newSlot("fam")
		c, done := r.start(s)
		c.result("hi")
		synctest.Wait()
		if _, waiting, _ := r.live(); !waiting {
			t.Fatal("after a result: busy; want waiting")
		}
		r.q.take()
		s.next()

		r.hand(r.batch(2, 3))
		if got := r.inputs(); len(got) != 1 {
			t.Fatalf("input files: got %q; want 1", got)
		}
		if handed, waiting, _ := r.live(); handed != 3 || waiting {
			t.Fatalf("after the pipe: handed %d, waiting %v; want 3, busy", handed, waiting)
		}
		want(t, "slot reports", s.next(), []string{"busy"})
		want(t, "slots asked for", r.q.take(), nil)
		c.result("again")
		synctest.Wait()
		if got := r.cursor(); got != 3 {
			t.Fatalf("cursor after the piped turn's reply: got %d; want 3", got)
		}
		c.exit(0)
		<-done
	})
}

// A waiting container closes after the idle timeout, counted from its last
// result; a pipe meanwhile makes it busy and stops the timer.
func TestIdleTimerCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.hand(r.batch(1))
		s := newSlot("fam")
		c, done := r.start(s)
		c.result("hi")
		synctest.Wait()
		time.Sleep(idleTimeout / 2)
		r.hand(r.batch(2))
		time.Sleep(idleTimeout)
		synctest.Wait()
		if r.closed() {
			t.Fatal("a busy container was closed by the idle timer")
		}
		c.result("again")
		synctest.Wait()
		time.Sleep(idleTimeout - time.Second)
		synctest.Wait()
		if r.closed() {
			t.Fatal("closed before the idle timeout")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if _, _, closing := r.live(); !r.closed() || !closing {
			t.Fatal("not closed at the idle timeout")
		}
		c.exit(0)
		<-done
		want(t, "slot reports", s.next(), []string{"begin", "idle", "busy", "idle", "closing"})
	})
}

// A change of the group's settings reaches a busy agent at its turn's end:
// it takes no more messages meanwhile, and its container closes when the
// turn ends. An agent that waits is closed at once.
func TestStaleSettingsCloseAtTurnEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.hand(r.batch(1))
		s := newSlot("fam")
		c, done := r.start(s)
		r.q.take()
		changed := r.group
		changed.ContainerConfig.Model = "other"
		grp := r.x.Group("fam")
		grp.Lock()
		applied := r.x.Apply(grp, changed)
		grp.Unlock()
		if applied != AppliesAtTurnEnd {
			t.Fatalf("Apply to a busy agent: got %v; want %v", applied, AppliesAtTurnEnd)
		}
		r.group = changed
		r.hand(r.batch(2))
		if got := r.inputs(); len(got) != 0 {
			t.Fatalf("piped into a stale container: %q", got)
		}
		want(t, "slots asked for", r.q.take(), []string{"fam"})
		if r.closed() {
			t.Fatal("closed with its turn in flight")
		}
		c.result("hi")
		synctest.Wait()
		if !r.closed() {
			t.Fatal("not closed at the turn's end")
		}
		c.exit(0)
		<-done
		want(t, "slot reports", s.next(), []string{"begin", "idle", "closing"})

		// Waiting: closed at once.
		c, done = r.start(newSlot("fam"))
		c.result("hi")
		synctest.Wait()
		if r.closed() {
			t.Fatal("the next container starts with the close sentinel of the last")
		}
		changed.ContainerConfig.Model = "third"
		grp.Lock()
		applied = r.x.Apply(grp, changed)
		grp.Unlock()
		if applied != AppliedStopped || !r.closed() {
			t.Fatalf("Apply to a waiting agent: got %v, closed %v; want %v, closed", applied, r.closed(), AppliedStopped)
		}
		c.exit(0)
		<-done
	})
}

// A turn that fails rolls the cursor back to the last committed reply and
// returns its error for the queue to retry; the container is closed at once.
func TestFailedTurnRollsBackCursor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.hand(r.batch(1))
		s := newSlot("fam")
		c, done := r.start(s)
		c.result("hi")
		synctest.Wait()
		r.hand(r.batch(2))
		c.emit(ipc.Event{Type: ipc.EventError, Message: "claude died"})
		synctest.Wait()
		if _, _, closing := r.live(); !closing || !r.closed() {
			t.Fatal("a failed turn did not close the container")
		}
		c.exit(1)
		err := <-done
		if err == nil || !strings.Contains(err.Error(), "claude died") {
			t.Fatalf("RunMessages: got %v; want the turn's error", err)
		}
		if h, _, _ := r.live(); h != 1 || r.cursor() != 1 {
			t.Fatalf("handed %d, cursor %d after the failed turn; want both back at 1", h, r.cursor())
		}
	})
}

// The queue's ask for the slot closes a waiting agent only; at a turn's end
// the queue's answer closes it at once.
func TestQueueAsksForTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil)
		r.hand(r.batch(1))
		s := newSlot("fam")
		c, done := r.start(s)
		r.x.CloseIdle("fam") // busy: ignored
		if r.closed() {
			t.Fatal("the queue's ask closed a busy agent")
		}
		s.back = true
		c.result("hi")
		synctest.Wait()
		if !r.closed() {
			t.Fatal("the queue wanted the slot at the turn's end: not closed")
		}
		c.exit(0)
		<-done
		want(t, "slot reports", s.next(), []string{"begin", "idle", "closing"})
	})
}

// A held turn outlives the container's hard timeout; once released, the
// timeout counts again from then. The idle close never comes while it is
// held: the turn is in flight.
func TestHeldTurnOutlivesTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 10 * time.Minute
		r := newRig(t, func(c *Config) { c.ContainerTimeout = timeout; c.IdleTimeout = time.Minute })
		r.hand(r.batch(1))
		c, done := r.start(newSlot("fam"))
		c.emit(ipc.Event{Type: ipc.EventSession, SessionID: "s1"})
		grp := r.x.Group("fam")
		grp.Lock()
		release, ok := grp.Hold()
		grp.Unlock()
		if !ok {
			t.Fatal("Hold of a live run: not ok")
		}
		time.Sleep(3 * timeout)
		synctest.Wait()
		r.rt.mu.Lock()
		stopped := r.rt.stopped
		r.rt.mu.Unlock()
		if stopped != 0 {
			t.Fatal("a held turn was stopped by the hard timeout")
		}
		r.x.CloseIdle("fam")
		if r.closed() {
			t.Fatal("a held turn was closed as idle")
		}
		release()
		time.Sleep(timeout + time.Second)
		synctest.Wait()
		r.rt.mu.Lock()
		stopped = r.rt.stopped
		r.rt.mu.Unlock()
		if stopped != 1 {
			t.Fatalf("stops after the release and a timeout: got %d; want 1", stopped)
		}
		c.exit(137)
		if err := <-done; err == nil || !errors.Is(err, errTimedOut) {
			t.Fatalf("RunMessages: got %v; want the timeout", err)
		}
	})
}

// A task container closes TaskCloseDelay after its first result, later
// results notwithstanding; the queue's slot hears each turn end.
func TestTaskCloseDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(c *Config) { c.TaskCloseDelay = 10 * time.Second })
		s := newSlot("fam")
		done := make(chan error, 1)
		go func() {
			done <- r.x.Task(context.Background(), r.group, r.x.Group("fam"), s, store.Task{ID: "t1", Folder: "fam"}, "do it")
		}()
		synctest.Wait()
		c := <-r.rt.started
		c.result("first")
		time.Sleep(5 * time.Second)
		c.result("second")
		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		if r.closed() {
			t.Fatal("closed before the close delay")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !r.closed() {
			t.Fatal("not closed at the close delay after the first result")
		}
		c.exit(0)
		if err := <-done; err != nil {
			t.Fatalf("Task: %v", err)
		}
		want(t, "slot reports", s.next(), []string{"idle", "idle", "closing"})
	})
}
