package groupqueue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Defaults used when the corresponding Config field is zero.
const DefaultMaxConcurrent = 5

// DefaultRetryDelays returns the back-off delays of a failed message run,
// a new slice on every call.
func DefaultRetryDelays() []time.Duration {
	return []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second}
}

// ErrPanic marks the error of a handler that panicked.
var ErrPanic = errors.New("handler panicked")

// ErrNoRetry, wrapped in a RunMessages error, ends the group's retry
// sequence at once: the run is not retried and the group waits for its next
// message, as when the retries run out.
var ErrNoRetry = errors.New("not retried")

// ErrHang, wrapped in a RunMessages error, marks a run stopped by a
// timeout. A hang is retried once: the Config.MaxHangs-th hang of a retry
// sequence ends it, so a hanging agent is reported after two timeouts, not
// after every retry.
var ErrHang = errors.New("run hung")

// DefaultMaxHangs is Config.MaxHangs when zero.
const DefaultMaxHangs = 2

// ErrShutdown is returned by Run when the queue was already shut down.
var ErrShutdown = errors.New("group queue is shut down")

// RunKind says what a run does.
type RunKind string

// Run kinds. The zero RunKind means "no run".
const (
	KindMessages RunKind = "messages"
	KindTask     RunKind = "task"
)

// TaskRef[T] is a scheduled task of type T handed through the queue. The queue
// only reads ID (to avoid queuing the same task twice); Task is passed back
// to Handlers.RunTask untouched.
type TaskRef[T any] struct {
	ID   string
	Task T
}

// Event is what an Outcome[T] reports.
type Event int

// Outcome[T] events.
const (
	// Succeeded: a message run ended well; its group's retry sequence, if
	// any, is over.
	Succeeded Event = iota + 1
	// Retrying: a message run failed and is retried (attempt Attempt of
	// Attempts, at RetryAt).
	Retrying
	// GaveUp: a message run failed for good (after Attempt attempts); the
	// group waits for its next message.
	GaveUp
	// Dropped: a task the queue accepted or was offered will never run
	// (the queue is shutting down, or the task has no ID).
	Dropped
)

// Outcome[T] is how the queue judged the end of a run (or a task it will not
// run). Err is the failed run's error.
type Outcome[T any] struct {
	Event             Event
	Task              TaskRef[T] // Dropped
	Err               error
	Attempt, Attempts int
	RetryAt           time.Time
}

// Outcomes hears the outcome of every run, as the queue judges it: the one
// way the queue reports to its owner. Outcome[T] is called without the queue's
// lock held and must not block for long. Message runs that end during
// shutdown report nothing.
type Outcomes[T any] interface {
	Outcome(group string, o Outcome[T])
}

// Handlers are the caller's side of the queue. RunMessages, RunTask and
// CloseIdle are required; Outcomes is optional.
type Handlers[T any] struct {
	// RunMessages runs one container for the pending messages of
	// run.Group() and returns when the container is gone. run is the run's
	// object: the run reports through it what its container does. A non-nil
	// error is a failed run, which is retried unless it wraps ErrNoRetry.
	// ctx is cancelled only when Shutdown's deadline passes.
	// It calls run.Begin once it has taken the group's pending messages.
	RunMessages func(ctx context.Context, run *Run) error
	// RunTask runs one container for one scheduled task of run.Group() and
	// returns when the container is gone; run is as for RunMessages. Errors
	// are logged; the queue does not retry tasks.
	RunTask func(ctx context.Context, run *Run, t TaskRef[T]) error
	// CloseIdle asks the group holding a slot to give it back: to close its
	// container now if its agent still waits for input (the holder checks,
	// under its own lock; a holder that became busy since ignores it). It
	// is called on a goroutine of its own, never under the caller's locks,
	// and must not block for long.
	CloseIdle func(group string)
	// Outcomes, if set, hears how runs ended: every message run's
	// success, retry or final failure, and every task dropped (pending when
	// the queue shuts down, enqueued after that, or without an ID).
	Outcomes Outcomes[T]
}

// Config tunes the queue. Zero values mean the defaults.
type Config struct {
	// MaxConcurrent caps the runs (containers) active at once over all
	// groups. 0 means DefaultMaxConcurrent.
	MaxConcurrent int
	// RetryDelays are the waits before each retry of a failed message run.
	// nil means DefaultRetryDelays; an empty non-nil slice disables retries.
	RetryDelays []time.Duration
	// MaxHangs is how many runs of a retry sequence may end in a hang
	// (ErrHang) before the retries stop. 0 means DefaultMaxHangs.
	MaxHangs int
}

func (c Config) withDefaults() (Config, error) {
	if c.MaxConcurrent < 0 {
		return c, fmt.Errorf("max concurrent runs must not be negative, got %d", c.MaxConcurrent)
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.MaxHangs <= 0 {
		c.MaxHangs = DefaultMaxHangs
	}
	if c.RetryDelays == nil {
		c.RetryDelays = DefaultRetryDelays()
	}
	c.RetryDelays = slices.Clone(c.RetryDelays)
	for i, d := range c.RetryDelays {
		if d <= 0 {
			return c, fmt.Errorf("retry delay %d must be positive, got %s", i+1, d)
		}
	}
	return c, nil
}

// Retry is where a group's sequence of failed message runs is.
type Retry int

// Retry states.
const (
	// NotRetrying: no retry is pending (the count of failed runs may still
	// be above zero while a retry runs).
	NotRetrying Retry = iota
	// Backoff: a retry waits out its delay.
	Backoff
	// Exhausted: the retries ran out; the next message starts over.
	Exhausted
)

// group is the queue's state for one group, guarded by Queue.mu: the
// slot it holds (if any), what its holder last said of it, and the work
// that waits for its next slot. What the run does with the slot (its
// container, whether the agent is busy, its idle timer) is the holder's.
type group[T any] struct {
	name string

	// The current run; kind is "" when there is none.
	kind    RunKind
	task    TaskRef[T]
	runID   uint64
	started time.Time
	begun   bool // the message run took the group's pending messages (Run.Begin)
	// What the holder last reported (Run): since when its agent waits for
	// input (zero: busy), and whether its container is going away. asked:
	// the queue asked the holder to give the slot back (CloseIdle) and it
	// has not said since.
	idleSince time.Time
	closing   bool
	asked     bool

	// Pending work.
	pendingMsgs bool
	tasks       []TaskRef[T]
	waiting     bool    // in Queue.waiting
	last        RunKind // the kind of the group's last run, for taking turns

	// Retries of failed message runs.
	retry      Retry
	retries    int // consecutive failed message runs
	hangs      int // of which ended in a hang (ErrHang)
	retryAt    time.Time
	retryTimer *time.Timer
	retryGen   uint64
}

// yieldable reports whether the holder of g's slot said its agent waits for
// input, and nobody has asked for the slot or seen it go since.
func (g *group[T]) yieldable() bool {
	return g.active() && !g.closing && !g.asked && !g.idleSince.IsZero()
}

// msgsRunnable reports whether g's waiting messages may run now: they
// wait, and no retry back-off holds them.
func (g *group[T]) msgsRunnable() bool { return g.pendingMsgs && g.retry != Backoff }

func (g *group[T]) active() bool { return g.kind != "" }
func (g *group[T]) hasTask(id string) bool {
	if g.kind == KindTask && g.task.ID == id {
		return true
	}
	return slices.ContainsFunc(g.tasks, func(t TaskRef[T]) bool { return t.ID == id })
}

func (g *group[T]) stopRetry() {
	if g.retryTimer != nil {
		g.retryTimer.Stop()
		g.retryTimer = nil
	}
	g.retryGen++
	if g.retry == Backoff {
		g.retry = NotRetrying
	}
	g.retryAt = time.Time{}
}

// Queue schedules runs per group. Create it with New, start it with
// Queue.Run.
type Queue[T any] struct {
	cfg Config
	h   Handlers[T]
	log zerolog.Logger

	mu         sync.Mutex
	groups     map[string]*group[T]
	waiting    []*group[T] // FIFO; exactly the inactive groups with runnable work
	active     int
	nextRunID  uint64
	runCtx     context.Context // nil until Run starts
	cancelRuns context.CancelFunc
	shutting   bool
	drained    chan struct{} // closed when shutting and no run is active

	wg sync.WaitGroup // run goroutines; waited for by Run
}

// New returns a queue that starts no run until Queue.Run is called. It
// fails if a required handler is missing or cfg holds a negative value.
func New[T any](cfg Config, h Handlers[T], log zerolog.Logger) (*Queue[T], error) {
	if h.RunMessages == nil || h.RunTask == nil || h.CloseIdle == nil {
		return nil, errors.New("new group queue: RunMessages, RunTask and CloseIdle handlers are required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("new group queue: %w", err)
	}
	return &Queue[T]{
		cfg:    cfg,
		h:      h,
		log:    log.With().Str("component", "groupqueue").Logger(),
		groups: make(map[string]*group[T]),
	}, nil
}

// Run starts the queued work and keeps starting runs as work arrives and
// slots free. It blocks until ctx ends, then shuts the queue down (as
// Shutdown does, without a deadline) and returns once every run has ended;
// call Shutdown with a deadline to bound that wait. The runs' contexts do not
// inherit ctx's cancellation, so a run is not killed just because Run's
// context ended. It returns nil, or ErrShutdown if the queue was already shut
// down, or an error if Run is already running.
func (q *Queue[T]) Run(ctx context.Context) error {
	q.mu.Lock()
	if q.shutting {
		q.mu.Unlock()
		return ErrShutdown
	}
	if q.runCtx != nil {
		q.mu.Unlock()
		return errors.New("run group queue: already running")
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	q.runCtx, q.cancelRuns = runCtx, cancel
	closes := q.settleLocked()
	q.mu.Unlock()
	q.closeIdle(closes)

	<-ctx.Done()
	q.beginShutdown()
	q.wg.Wait()
	cancel()
	return nil
}

// Shutdown stops intake, drops pending work, closes idle containers and
// waits for active runs to end. It blocks until they have all ended (nil) or
// ctx is done; then it cancels the remaining runs' contexts and returns an
// error naming their groups, without waiting further. It may be called more
// than once, and before or without Run.
func (q *Queue[T]) Shutdown(ctx context.Context) error {
	q.beginShutdown()
	q.mu.Lock()
	drained := q.drained
	q.mu.Unlock()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	names := q.activeNamesLocked()
	cancel := q.cancelRuns
	q.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	if cancel != nil {
		cancel()
	}
	return fmt.Errorf("shut down group queue: runs still active for %s: %w", strings.Join(names, ", "), ctx.Err())
}

// beginShutdown switches the queue to shutting down once; later calls do
// nothing.
func (q *Queue[T]) beginShutdown() {
	q.mu.Lock()
	if q.shutting {
		q.mu.Unlock()
		return
	}
	q.shutting = true
	q.drained = make(chan struct{})
	if q.active == 0 {
		close(q.drained)
	}
	type drop struct {
		group string
		task  TaskRef[T]
	}
	var drops []drop
	for _, g := range q.sortedGroupsLocked() {
		g.stopRetry()
		g.pendingMsgs = false
		for _, t := range g.tasks {
			drops = append(drops, drop{g.name, t})
		}
		g.tasks = nil
		g.waiting = false
	}
	q.waiting = nil
	closes := q.settleLocked()
	running := q.active
	q.mu.Unlock()

	q.log.Info().Int("running", running).Int("dropped_tasks", len(drops)).Msg("group queue shutting down")
	for _, d := range drops {
		q.log.Warn().Str("group", d.group).Str("task", d.task.ID).Msg("task dropped at shutdown")
		q.taskDropped(d.group, d.task)
	}
	q.closeIdle(closes)
}

// EnqueueMessages records that the group has messages to handle. It never
// blocks on a run: the messages run when the group and a slot are free, or
// in a follow-up run if a run is active (a message run that has not taken
// the group's messages yet, Run.Begin, takes these too). Repeated calls
// coalesce into one run. After Shutdown it does nothing (debug log).
func (q *Queue[T]) EnqueueMessages(name string) {
	q.mu.Lock()
	if q.shutting {
		q.mu.Unlock()
		q.log.Debug().Str("group", name).Msg("messages ignored: queue shutting down")
		return
	}
	g := q.groupLocked(name)
	if g.kind == KindMessages && !g.begun {
		q.mu.Unlock()
		return // the run starting now reads them
	}
	inSequence := g.retry == Backoff || (g.kind == KindMessages && g.retries > 0)
	if !inSequence {
		g.retries, g.hangs, g.retry = 0, 0, NotRetrying
	}
	g.pendingMsgs = true
	q.refreshLocked(g)
	closes := q.settleLocked()
	q.mu.Unlock()
	q.closeIdle(closes)
}

// EnqueueTask queues a scheduled task for the group. It never blocks on a
// run. A task whose ID is already queued or running for the group is
// ignored; if the group's container is idle it is closed at once so the task
// can run after it exits. After Shutdown, or without an ID, the task is
// ignored and reported through Handlers.Outcomes (Dropped).
func (q *Queue[T]) EnqueueTask(name string, t TaskRef[T]) {
	if t.ID == "" {
		q.log.Warn().Str("group", name).Msg("task without id ignored")
		q.taskDropped(name, t)
		return
	}
	q.mu.Lock()
	if q.shutting {
		q.mu.Unlock()
		q.log.Debug().Str("group", name).Str("task", t.ID).Msg("task ignored: queue shutting down")
		q.taskDropped(name, t)
		return
	}
	g := q.groupLocked(name)
	if g.hasTask(t.ID) {
		q.mu.Unlock()
		q.log.Debug().Str("group", name).Str("task", t.ID).Msg("task already queued")
		return
	}
	g.tasks = append(g.tasks, t)
	q.refreshLocked(g)
	closes := q.settleLocked()
	q.mu.Unlock()
	q.closeIdle(closes)
}

// Active reports whether the group has a run and whether that run is a
// task. Non-blocking.
func (q *Queue[T]) Active(name string) (running bool, isTask bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.groups[name]
	if g == nil || !g.active() {
		return false, false
	}
	return true, g.kind == KindTask
}

// groupLocked returns the group's state, creating it.
func (q *Queue[T]) groupLocked(name string) *group[T] {
	g := q.groups[name]
	if g == nil {
		g = &group[T]{name: name}
		q.groups[name] = g
	}
	return g
}

// refreshLocked keeps g's membership of the waiting list in step with its
// state: a group waits exactly when it has no run and has runnable work.
func (q *Queue[T]) refreshLocked(g *group[T]) {
	runnable := !q.shutting && !g.active() && (len(g.tasks) > 0 || g.msgsRunnable())
	switch {
	case runnable && !g.waiting:
		g.waiting = true
		q.waiting = append(q.waiting, g)
	case !runnable && g.waiting:
		g.waiting = false
		q.waiting = slices.DeleteFunc(q.waiting, func(w *group[T]) bool { return w == g })
	}
}

// settleLocked starts runs while slots are free and returns the groups whose
// idle containers must be closed now; the caller calls closeIdle with them
// after unlocking.
func (q *Queue[T]) settleLocked() []string {
	if q.runCtx != nil && !q.shutting {
		for q.active < q.cfg.MaxConcurrent && len(q.waiting) > 0 {
			g := q.waiting[0] // in the order the groups began to wait
			q.waiting = slices.Delete(q.waiting, 0, 1)
			g.waiting = false
			q.startLocked(g)
		}
	}

	var closes []string
	var idle []*group[T]
	closing := 0
	for _, g := range q.sortedGroupsLocked() {
		if !g.active() {
			continue
		}
		if g.closing || g.asked {
			closing++
			continue
		}
		if !g.yieldable() {
			continue
		}
		if q.shutting || len(g.tasks) > 0 || g.msgsRunnable() {
			g.asked = true
			closes = append(closes, g.name)
			closing++
			continue
		}
		idle = append(idle, g)
	}
	// Other groups wait for a slot: free as many as are needed, longest idle
	// first. Runs already closing will free their slots on their own.
	if need := len(q.waiting) - closing; need > 0 && q.active >= q.cfg.MaxConcurrent {
		sort.SliceStable(idle, func(i, j int) bool { return idle[i].idleSince.Before(idle[j].idleSince) })
		for _, g := range idle[:min(need, len(idle))] {
			g.asked = true
			closes = append(closes, g.name)
		}
	}
	return closes
}

// startLocked starts g's next run: its first task, or its messages. When
// both wait they take turns: messages after a task run, a task after any
// other run.
func (q *Queue[T]) startLocked(g *group[T]) {
	msgs := g.msgsRunnable()
	if len(g.tasks) > 0 && !(msgs && g.last == KindTask) {
		g.kind = KindTask
		g.task = g.tasks[0]
		g.tasks = slices.Delete(g.tasks, 0, 1)
	} else {
		g.kind = KindMessages
		g.task = TaskRef[T]{}
		g.pendingMsgs = false
	}
	g.last = g.kind
	q.nextRunID++
	g.runID = q.nextRunID
	g.started = time.Now()
	g.begun, g.idleSince, g.closing, g.asked = false, time.Time{}, false, false
	q.active++
	q.wg.Add(1)
	go q.execute(q.runCtx, g, &Run{group: g.name, kind: g.kind, id: g.runID, q: q}, g.task)
}

// execute runs one handler call and records its end. It is the body of
// every run goroutine.
func (q *Queue[T]) execute(ctx context.Context, g *group[T], run *Run, t TaskRef[T]) {
	defer q.wg.Done()
	log := q.log.With().Str("group", g.name).Str("kind", string(run.kind)).Logger()
	if run.kind == KindTask {
		log = log.With().Str("task", t.ID).Logger()
	}
	log.Debug().Msg("run started")
	err := q.invoke(ctx, log, run, t)
	q.finish(log, g, run.kind, run.id, err)
}

func (q *Queue[T]) invoke(ctx context.Context, log zerolog.Logger, run *Run, t TaskRef[T]) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error().Interface("panic", p).Bytes("stack", debug.Stack()).Msg("run handler panicked")
			err = fmt.Errorf("%w: %v", ErrPanic, p)
		}
	}()
	if run.kind == KindTask {
		return q.h.RunTask(ctx, run, t)
	}
	return q.h.RunMessages(ctx, run)
}

// finish records the end of a run: retry bookkeeping, then the next runs.
func (q *Queue[T]) finish(log zerolog.Logger, g *group[T], kind RunKind, runID uint64, err error) {
	q.mu.Lock()
	duration := time.Since(g.started)
	g.kind = ""
	g.task = TaskRef[T]{}
	g.begun, g.idleSince, g.closing, g.asked = false, time.Time{}, false, false
	q.active--
	if q.shutting && q.active == 0 {
		close(q.drained)
	}

	var retryIn time.Duration
	var out *Outcome[T]
	switch {
	case kind == KindTask:
	case err == nil:
		g.retries, g.hangs, g.retry = 0, 0, NotRetrying
		out = &Outcome[T]{Event: Succeeded}
	case q.shutting:
	default:
		g.retries++
		if errors.Is(err, ErrHang) {
			g.hangs++
		}
		out = &Outcome[T]{Event: GaveUp, Err: err, Attempt: g.retries, Attempts: len(q.cfg.RetryDelays) + 1}
		if g.retries <= len(q.cfg.RetryDelays) && g.hangs < q.cfg.MaxHangs && !errors.Is(err, ErrNoRetry) {
			retryIn = q.cfg.RetryDelays[g.retries-1]
			g.pendingMsgs = true
			g.retry = Backoff
			g.retryAt = time.Now().Add(retryIn)
			g.retryGen++
			gen := g.retryGen
			g.retryTimer = time.AfterFunc(retryIn, func() { q.retryDue(g, gen) })
			out.Event, out.RetryAt = Retrying, g.retryAt
		} else {
			g.pendingMsgs = false
			g.retry = Exhausted
		}
	}
	retries, gaveUp := g.retries, g.retry == Exhausted
	q.refreshLocked(g)
	closes := q.settleLocked()
	q.mu.Unlock()

	switch {
	case err == nil:
		log.Debug().Dur("duration", duration).Msg("run finished")
	case kind == KindTask:
		log.Warn().Err(err).Dur("duration", duration).Msg("task run failed")
	case retryIn > 0:
		log.Warn().Err(err).Int("attempt", retries).Dur("retry_in", retryIn).Msg("message run failed, will retry")
	case gaveUp:
		log.Error().Err(err).Int("attempts", retries).Msg("message run failed for good, waiting for the next message")
	default:
		log.Warn().Err(err).Msg("message run failed during shutdown")
	}
	if out != nil {
		q.outcome(g.name, *out)
	}
	q.closeIdle(closes)
}

// retryDue ends a back-off: the group's messages become runnable again.
func (q *Queue[T]) retryDue(g *group[T], gen uint64) {
	q.mu.Lock()
	if g.retryGen != gen || q.shutting {
		q.mu.Unlock()
		return
	}
	g.retryTimer = nil
	g.retry = NotRetrying
	g.retryAt = time.Time{}
	g.pendingMsgs = true
	q.refreshLocked(g)
	closes := q.settleLocked()
	q.mu.Unlock()
	q.closeIdle(closes)
}

// closeIdle asks the holders of names' slots to give them back, each on
// a goroutine of its own: the caller may hold a group's lock (a holder's
// report, a hand-over that enqueues), and CloseIdle takes the group's.
func (q *Queue[T]) closeIdle(names []string) {
	for _, name := range names {
		q.wg.Add(1)
		go func() {
			defer q.wg.Done()
			q.closeOne(name)
		}()
	}
}

func (q *Queue[T]) closeOne(name string) {
	q.log.Debug().Str("group", name).Msg("closing idle container")
	defer func() {
		if p := recover(); p != nil {
			q.log.Error().Str("group", name).Interface("panic", p).Bytes("stack", debug.Stack()).Msg("close handler panicked")
		}
	}()
	q.h.CloseIdle(name)
}
func (q *Queue[T]) taskDropped(name string, t TaskRef[T]) {
	q.outcome(name, Outcome[T]{Event: Dropped, Task: t})
}

// outcome reports o to the owner's Outcomes, if any. Call it unlocked.
func (q *Queue[T]) outcome(name string, o Outcome[T]) {
	if q.h.Outcomes == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			q.log.Error().Str("group", name).Interface("panic", p).Bytes("stack", debug.Stack()).Msg("outcome handler panicked")
		}
	}()
	q.h.Outcomes.Outcome(name, o)
}

func (q *Queue[T]) sortedGroupsLocked() []*group[T] {
	gs := make([]*group[T], 0, len(q.groups))
	for _, g := range q.groups {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].name < gs[j].name })
	return gs
}

func (q *Queue[T]) activeNamesLocked() []string {
	var names []string
	for _, g := range q.sortedGroupsLocked() {
		if g.active() {
			names = append(names, g.name)
		}
	}
	return names
}
