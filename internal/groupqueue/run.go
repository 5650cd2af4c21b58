package groupqueue

import "time"

// Run is one run as the queue started it: the queue makes one for every
// run and hands it to the handler that does the run (Handlers.RunMessages,
// Handlers.RunTask). It is the only way a run tells the queue what its
// container does (MarkIdle, MarkClosing) and asks whether its agent waits
// for input (Idle).
//
// A Run is bound to its run. Once the run has ended (its handler
// returned), its methods do nothing and Idle reports false: a Run kept too
// long never changes the group's next run. Every method is safe for
// concurrent use and never blocks.
type Run struct {
	group string
	kind  RunKind
	id    uint64
	q     runHost
}

// runHost is the queue as its Runs see it (Queue[T] implements it for
// every T).
type runHost interface {
	runIdle(r *Run)
	runClosing(r *Run)
	runWaits(r *Run) bool
}

// Group is the name of the run's group.
func (r *Run) Group() string { return r.group }

// MarkIdle records that the run's container finished a turn and waits for
// input; call it for every result the container reports. It starts the
// idle timer (message runs) or, on the first result, the task close timer
// (task runs), and closes the container at once if the rules in the package
// doc say so. For a run that is closing it only records that the turn
// ended.
func (r *Run) MarkIdle() { r.q.runIdle(r) }

// MarkClosing records that the run's container is going away on its own
// (it exited, crashed, or is being stopped by a timeout). From then on
// TryPipe returns false for this run and new messages wait for a follow-up
// run. It does not call Handlers.CloseIdle.
func (r *Run) MarkClosing() { r.q.runClosing(r) }

// Idle reports whether the run's agent waits for input: it finished a turn
// and no pipe since started another (a pipe in progress counts as the
// state it started from). It is false once the run has ended.
func (r *Run) Idle() bool { return r.q.runWaits(r) }

// liveLocked returns r's group if r is its current run, nil once r has
// ended.
func (q *Queue[T]) liveLocked(r *Run) *group[T] {
	g := q.groups[r.group]
	if g == nil || !g.active() || g.runID != r.id {
		return nil
	}
	return g
}

func (q *Queue[T]) runIdle(r *Run) {
	q.mu.Lock()
	g := q.liveLocked(r)
	if g == nil {
		q.mu.Unlock()
		q.log.Debug().Str("group", r.group).Msg("idle notice from a run that has ended")
		return
	}
	if g.state == Closing {
		g.from = Idle // the turn ended; the container goes away all the same
		q.mu.Unlock()
		return
	}
	if g.state == Piping {
		// The pipe decides: the agent is busy again once it is done.
		g.from = Idle
		g.idleSince = time.Now()
	} else {
		g.to(Idle)
	}
	g.results++
	switch {
	case g.kind == KindMessages:
		q.armTimerLocked(g, q.cfg.IdleTimeout)
	case g.results == 1:
		q.armTimerLocked(g, q.cfg.TaskCloseDelay)
	}
	closes := q.settleLocked()
	q.mu.Unlock()
	q.closeIdle(closes)
}

func (q *Queue[T]) runClosing(r *Run) {
	q.mu.Lock()
	g := q.liveLocked(r)
	if g == nil || g.state == Closing {
		q.mu.Unlock()
		return
	}
	g.to(Closing)
	closes := q.settleLocked()
	q.mu.Unlock()
	q.closeIdle(closes)
}

func (q *Queue[T]) runWaits(r *Run) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.liveLocked(r)
	return g != nil && g.turnDone()
}
