// Package scheduler decides when scheduled tasks run (DESIGN §10).
//
// The scheduler owns no list of tasks: the store is the truth. Run sleeps
// until the earliest next run of an active task (store.NextDue), or until
// Wake says the tasks changed, then claims every due task (store.ClaimDue)
// and hands the claimed ones to an Enqueuer (the router, which queues them on
// the group queue). A claim advances the task's next run in the same
// transaction that selects it, so a task is never handed over twice for the
// same slot, not even when its run outlasts its interval. A task whose
// earlier run is still queued or running (waiting for its group's turn or
// container, or in one) when its next slot comes is not queued again: the
// slot is skipped, and the task runs at its first slot after that run ends.
// (The group queue also ignores a task whose id it holds already.)
//
// A task that fails counts its failed runs in a row (a good run sets the count
// back to 0; see store.FinishTaskRun). After n failures, its slots that come
// sooner than 2^(n-1)·FailureBackoff (at most MaxFailureBackoff) after the
// failed run's start are skipped, so a failing task is retried less and less
// often; the runner pauses it when the count reaches the configured most
// failures (BRIDGED_TASK_MAX_FAILURES), and `bridged tasks resume` or the
// resume_task tool restart it with a fresh count.
//
// Next runs come from package schedule: cron expressions are evaluated in the
// configured timezone (with robfig/cron's handling of daylight-saving
// changes: a time in the spring-forward gap is skipped, a time in the
// repeated fall-back hour fires twice), intervals stay anchored to their
// schedule (due + k·interval, never "end of the last run + interval"), and a
// once task has no next run, so the claim makes it running until its run is
// recorded. After downtime an overdue task runs once, not once per missed
// slot.
//
// A due task whose prompt another group's agent set runs only while that
// group is registered and full (rules.TaskMayRun): otherwise it is paused in
// the claim's transaction with the reason as its last result, and the
// Enqueuer, when it is a NotRunTeller, tells the owner.
//
// A due task whose group is no longer registered is not queued: it is paused,
// in the claim's transaction, with the last result "group <folder> was
// removed; task paused", so a person sees why, and it is not retried. A task
// whose stored schedule no longer parses is paused the same way with the
// parser's reason.
//
// Every claim is visible: it records a 'running' row in the task's run log,
// which the end of the run completes. Start-up: Recover (which Run calls if
// the daemon did not) closes the runs a previous daemon left in flight —
// recurring and once tasks alike, a claimed run is never repeated — as
// "interrupted" error runs, and commits one notice to each such task's chat
// (none when the task was failing already), so the daemon calls it before
// the router starts sending the outbox, and nothing else may run tasks
// before it. The sleep is capped
// at MaxSleep, so a wall-clock jump (a suspended machine, an NTP step) delays
// a task by at most that much; the cap is a safety net, not a polling
// interval.
package scheduler

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
)

// MaxSleep is the longest the scheduler sleeps without looking at the clock
// again.
const MaxSleep = time.Minute

// FailureBackoff and MaxFailureBackoff set the least time between the start
// of a failing task's run and its next run: FailureBackoff after its first
// failure in a row, doubling with each further one, at most
// MaxFailureBackoff. A slot of the task's schedule sooner than that is
// skipped, so an every-minute task that keeps failing runs 1, 2, 4 and 8
// minutes apart. A run starts a little after its slot (the queue, the
// container), so the delay is counted with backoffSlack to spare.
const (
	FailureBackoff    = time.Minute
	MaxFailureBackoff = time.Hour
	backoffSlack      = FailureBackoff / 2
)

// failureDelay is the least time between the start of a task's run that
// failed, its failures-th in a row, and its next run.
func failureDelay(failures int) time.Duration {
	switch {
	case failures <= 0:
		return 0
	case failures > 7: // 2^6·FailureBackoff is past the cap already
		return MaxFailureBackoff
	}
	return min(FailureBackoff<<(failures-1), MaxFailureBackoff)
}

// retryMin and retryMax bound the back-off after a database error.
const (
	retryMin = time.Second
	retryMax = time.Minute
)

// Enqueuer takes claimed tasks. EnqueueTask must not block on a run.
type Enqueuer interface {
	EnqueueTask(t store.Task)
}

// NotRunTeller is an optional ability of the Enqueuer: it tells the owner
// of a due task that was paused instead of run because the group whose
// agent set its prompt may no longer choose what the task's group runs
// (rules.TaskMayRun); why says so. TaskNotRun must not block for long.
type NotRunTeller interface {
	TaskNotRun(t store.Task, why string)
}

// Scheduler claims due tasks and hands them to an Enqueuer. Create it with
// New and start it with Run; Wake is safe to call from any goroutine, before
// or during Run.
type Scheduler struct {
	db  *store.DB
	q   Enqueuer
	loc *time.Location
	log zerolog.Logger
	now func() time.Time

	maxSleep time.Duration
	wake     chan struct{}

	recoverMu sync.Mutex
	recovered bool
}

// New returns a scheduler for the tasks in db. loc is the configured timezone
// (cron expressions are evaluated in it; nil means UTC) and now the clock
// (nil means time.Now).
func New(db *store.DB, q Enqueuer, loc *time.Location, log zerolog.Logger, now func() time.Time) *Scheduler {
	if loc == nil {
		loc = time.UTC
	}
	if now == nil {
		now = time.Now
	}
	return &Scheduler{
		db:       db,
		q:        q,
		loc:      loc,
		log:      log.With().Str("component", "scheduler").Logger(),
		now:      now,
		maxSleep: MaxSleep,
		wake:     make(chan struct{}, 1),
	}
}

// Wake tells the scheduler that tasks changed (created, updated, resumed), so
// it recomputes its sleep at once. It never blocks.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// interruptedNotice is what a task's chat is told when a run of the task
// was cut off by a restart. It has the shape of the router's notice for a
// failed task run.
func interruptedNotice(t store.Task) string {
	if strings.HasPrefix(t.LastResult, "error: ") {
		return "" // its runs were failing already, and the chat was told then
	}
	return fmt.Sprintf("Scheduled task %s failed: interrupted: bridged stopped during the run. It was not run again.", t.ID)
}

// Recover closes the task runs a previous daemon left in flight
// (store.FailInterrupted): each becomes an "interrupted" error run in the
// task's log, recurring and once tasks alike, and the task's chat gets one
// notice (none when the task's previous run had failed already, as for any
// failed run). The notices are committed to the outbox, so call Recover
// before the router starts sending it. It does the work once; Run calls it
// if it was not called.
func (s *Scheduler) Recover(ctx context.Context) error {
	s.recoverMu.Lock()
	defer s.recoverMu.Unlock()
	if s.recovered {
		return nil
	}
	closed, err := s.db.Tasks.FailInterrupted(ctx, interruptedNotice)
	if err != nil {
		return fmt.Errorf("close interrupted task runs: %w", err)
	}
	s.recovered = true
	for _, t := range closed {
		s.log.Warn().Str("task", string(t.ID)).Str("group", string(t.Folder)).Str("kind", string(t.Kind)).
			Msg("task run interrupted by a restart; recorded as failed")
	}
	return nil
}

// Run closes the task runs a previous daemon left in flight (Recover), then
// claims and enqueues due tasks until ctx ends. It returns nil when ctx ends,
// or an error if the start-up step fails. Database errors while running are
// logged and retried with back-off.
func (s *Scheduler) Run(ctx context.Context) error {
	if err := s.Recover(ctx); err != nil {
		return err
	}
	s.log.Info().Str("timezone", s.loc.String()).Msg("scheduler started")

	timer := time.NewTimer(0)
	defer timer.Stop()
	backoff := retryMin
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-s.wake:
		}
		d, err := s.tick(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.log.Error().Err(err).Dur("retry_in", backoff).Msg("scheduler pass failed")
			d = backoff
			backoff = min(backoff*2, retryMax)
		} else {
			backoff = retryMin
		}
		timer.Reset(d)
	}
}

// tick claims what is due, enqueues it, and returns how long to sleep.
func (s *Scheduler) tick(ctx context.Context) (sleep time.Duration, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("scheduler pass panicked: %v", r)
			s.log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("scheduler pass panicked")
		}
	}()
	next, err := s.db.Tasks.NextDue(ctx)
	if err != nil {
		return 0, err
	}
	if next != nil && !next.After(s.now()) {
		if err := s.claim(ctx); err != nil {
			return 0, err
		}
		if next, err = s.db.Tasks.NextDue(ctx); err != nil {
			return 0, err
		}
	}
	if next == nil {
		return s.maxSleep, nil
	}
	d := next.Sub(s.now())
	switch {
	case d < 0:
		// Due again already (a claim moved it to a time that has passed by
		// now): look once more without waiting.
		return 0, nil
	case d > s.maxSleep:
		return s.maxSleep, nil
	}
	return d, nil
}

// claim claims every due task and hands the runnable ones to the Enqueuer.
// A task that cannot run is paused in the claim's transaction.
func (s *Scheduler) claim(ctx context.Context) error {
	groups, err := s.db.Groups.List(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	registered := make(map[store.Folder]*store.Group, len(groups))
	for i, g := range groups {
		registered[g.Folder] = &groups[i]
	}

	now := s.now()
	paused := map[store.TaskID]string{}  // why a due task is paused instead of queued
	skipped := map[store.TaskID]string{} // why a due task's slot is skipped
	var notRun []store.Task              // paused because the group that set them may not direct theirs
	claimed, err := s.db.Tasks.ClaimDue(ctx, now, func(t store.Task) store.Claim {
		c := s.decide(t, now, registered[t.Folder] != nil)
		if c.Pause == "" {
			if err := rules.TaskMayRun(t, registered[t.PromptBy]); err != nil {
				c = store.Claim{Pause: err.Error()}
				t.LastResult = c.Pause
				notRun = append(notRun, t)
			}
		}
		switch {
		case c.Pause != "":
			paused[t.ID] = c.Pause
		case c.Skip != "" && c.Next != nil:
			skipped[t.ID] = c.Skip
		}
		return c
	})
	if err != nil {
		return fmt.Errorf("claim due tasks: %w", err)
	}
	for id, reason := range paused {
		s.log.Warn().Str("task", string(id)).Str("reason", reason).Msg("task paused instead of run")
	}
	if tell, ok := s.q.(NotRunTeller); ok {
		for _, t := range notRun {
			tell.TaskNotRun(t, t.LastResult)
		}
	}
	for id, reason := range skipped {
		s.log.Debug().Str("task", string(id)).Str("reason", reason).Msg("task slot skipped")
	}
	for _, t := range claimed {
		ev := s.log.Info().Str("task", string(t.ID)).Str("group", string(t.Folder)).Str("kind", string(t.Kind))
		if t.NextRun != nil {
			ev = ev.Time("next_run", t.NextRun.In(s.loc))
		}
		ev.Msg("task due")
		s.q.EnqueueTask(t)
	}
	return nil
}

// decide says what happens to the due task t: it is paused when its group is
// no longer registered or its stored schedule no longer parses; its slot is
// skipped when its earlier run is still queued or running, or when it is
// failing and the slot comes sooner than its back-off allows (its next run
// is then the first slot after the back-off); otherwise it runs, and its
// next run is the one after the run now due (t.NextRun).
func (s *Scheduler) decide(t store.Task, now time.Time, registered bool) store.Claim {
	if !registered {
		return store.Claim{Pause: fmt.Sprintf("group %s was removed; task paused", t.Folder)}
	}
	sc, err := schedule.Parse(schedule.Kind(t.Kind), t.Value, s.loc)
	if err != nil {
		return store.Claim{Pause: fmt.Sprintf("%v; task paused", err)}
	}
	due := now
	if t.NextRun != nil {
		due = *t.NextRun
	}
	next := sc.Next(due, now, s.loc)
	if next.IsZero() {
		return store.Claim{}
	}
	if t.RunInFlight {
		return store.Claim{Next: &next, Skip: "its earlier run is still queued or running"}
	}
	if t.Failures > 0 && t.LastRun != nil {
		if notBefore := t.LastRun.Add(failureDelay(t.Failures) - backoffSlack); now.Before(notBefore) {
			// Stored times are whole milliseconds: the first slot after
			// notBefore - 1 ms is the first one at or after notBefore.
			later := sc.Next(due, notBefore.Add(-time.Millisecond), s.loc)
			if !later.IsZero() {
				return store.Claim{Next: &later, Skip: fmt.Sprintf("backing off after %d failed runs in a row, until %s",
					t.Failures, notBefore.In(s.loc).Format(time.RFC3339))}
			}
		}
	}
	return store.Claim{Next: &next}
}
