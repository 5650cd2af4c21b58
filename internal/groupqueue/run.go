package groupqueue

import "time"

// Run is one slot as the queue granted it: the queue makes one for every
// run and hands it to the handler that does the run (Handlers.RunMessages,
// Handlers.RunTask), which keeps it for the run's life. Through it the
// holder tells the queue what the queue needs to share the cap: that a
// message run took the group's messages (Begin), and whether its agent
// waits for input (MarkIdle, MarkBusy) or its container is going away
// (MarkClosing). The run's state itself is the holder's; the queue only
// uses these reports to choose which idle container to close when another
// group needs a slot.
//
// A Run is bound to its run. Once the run has ended (its handler
// returned), its methods do nothing: a Run kept too long never changes the
// group's next run. Every method is safe for concurrent use, never blocks,
// and may be called with the holder's own lock held (the queue calls
// nothing of the holder's under it).
type Run struct {
	group string
	kind  RunKind
	id    uint64
	q     runHost
}

// runHost is the queue as its Runs see it (Queue[T] implements it for
// every T).
type runHost interface {
	runBegin(r *Run)
	runIdle(r *Run) bool
	runBusy(r *Run)
	runClosing(r *Run)
}

// Group is the name of the run's group.
func (r *Run) Group() string { return r.group }

// Kind is what the run does.
func (r *Run) Kind() RunKind { return r.kind }

// Begin records that a message run took the group's pending messages:
// messages enqueued from now on wait for a follow-up run. Before it, an
// EnqueueMessages for the group adds nothing (the run reads them).
func (r *Run) Begin() { r.q.runBegin(r) }

// MarkIdle records that the run's agent finished a turn and waits for
// input; call it for every result. It reports whether the queue wants the
// slot back now (a task or messages wait for the group, another group
// waits and this container is the one to close, or the queue shuts down):
// the holder then closes its container. For a run that is closing it only
// records that the turn ended, and reports false.
func (r *Run) MarkIdle() bool { return r.q.runIdle(r) }

// MarkBusy records that the run's agent works on a turn again (new input
// was piped into it while it waited).
func (r *Run) MarkBusy() { r.q.runBusy(r) }

// MarkClosing records that the run's container is going away (closed by
// its holder, exited, crashed, or stopped by a timeout). It does not call
// Handlers.CloseIdle.
func (r *Run) MarkClosing() { r.q.runClosing(r) }

// liveLocked returns r's group if r is its current run, nil once r has
// ended.
func (q *Queue[T]) liveLocked(r *Run) *group[T] {
	g := q.groups[r.group]
	if g == nil || !g.active() || g.runID != r.id {
		return nil
	}
	return g
}

func (q *Queue[T]) runBegin(r *Run) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if g := q.liveLocked(r); g != nil {
		g.begun = true
	}
}

func (q *Queue[T]) runIdle(r *Run) bool {
	q.mu.Lock()
	g := q.liveLocked(r)
	if g == nil {
		q.mu.Unlock()
		q.log.Debug().Str("group", r.group).Msg("idle notice from a run that has ended")
		return false
	}
	g.idleSince = time.Now()
	if g.closing {
		q.mu.Unlock()
		return false
	}
	g.asked = false
	closes := q.settleLocked()
	back := false
	for i, name := range closes {
		if name == g.name {
			back = true
			g.closing, g.asked = true, false
			closes = append(closes[:i:i], closes[i+1:]...)
			break
		}
	}
	q.mu.Unlock()
	q.closeIdle(closes)
	return back
}

func (q *Queue[T]) runBusy(r *Run) {
	q.mu.Lock()
	g := q.liveLocked(r)
	if g == nil {
		q.mu.Unlock()
		return
	}
	g.idleSince, g.asked = time.Time{}, false
	closes := q.settleLocked() // another idle container may be the one to close now
	q.mu.Unlock()
	q.closeIdle(closes)
}

func (q *Queue[T]) runClosing(r *Run) {
	q.mu.Lock()
	g := q.liveLocked(r)
	if g == nil || g.closing {
		q.mu.Unlock()
		return
	}
	g.closing, g.asked = true, false
	closes := q.settleLocked()
	q.mu.Unlock()
	q.closeIdle(closes)
}
