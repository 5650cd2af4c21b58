package groupqueue

import (
	"slices"
	"time"
)

// Status is a snapshot of the queue for `bridged status` and metrics.
type Status struct {
	MaxConcurrent int  `json:"max_concurrent"`
	Running       int  `json:"running"`
	ShuttingDown  bool `json:"shutting_down,omitempty"`
	// Waiting lists the groups waiting for a slot, in the order they wait:
	// the first starts next.
	Waiting []string `json:"waiting"`
	// Groups holds every group with a run, pending work or a retry state,
	// sorted by name.
	Groups []GroupStatus `json:"groups"`
}

// GroupStatus is one group's part of Status.
type GroupStatus struct {
	Group           string    `json:"group"`
	Run             RunKind   `json:"run,omitempty"` // "" when no run is active
	TaskID          string    `json:"task_id,omitempty"`
	Since           time.Time `json:"since,omitzero"`    // start of the active run
	Idle            bool      `json:"idle,omitempty"`    // its agent waits for input (the run's word)
	Closing         bool      `json:"closing,omitempty"` // its container is going away, or was asked to
	PendingMessages bool      `json:"pending_messages,omitempty"`
	PendingTasks    []string  `json:"pending_tasks,omitempty"`
	// Retries counts the consecutive failed message runs.
	Retries   int       `json:"retries,omitempty"`
	NextRetry time.Time `json:"next_retry,omitzero"` // zero unless backing off
	// GaveUp is set when the retries ran out; the next message starts over.
	GaveUp bool `json:"gave_up,omitempty"`
}

// Status returns a snapshot of the queue. Non-blocking.
func (q *Queue[T]) Status() Status {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := Status{
		MaxConcurrent: q.cfg.MaxConcurrent,
		Running:       q.active,
		ShuttingDown:  q.shutting,
		Waiting:       make([]string, 0, len(q.waiting)),
		Groups:        []GroupStatus{},
	}
	for _, g := range q.waiting {
		s.Waiting = append(s.Waiting, g.name)
	}
	for _, g := range q.sortedGroupsLocked() {
		if !g.active() && !g.pendingMsgs && len(g.tasks) == 0 && g.retries == 0 && g.retry != Exhausted {
			continue
		}
		gs := GroupStatus{
			Group:           g.name,
			Run:             g.kind,
			TaskID:          g.task.ID,
			PendingMessages: g.pendingMsgs,
			Retries:         g.retries,
			NextRetry:       g.retryAt,
			GaveUp:          g.retry == Exhausted,
		}
		if g.active() {
			gs.Since = g.started
			gs.Idle = !g.idleSince.IsZero()
			gs.Closing = g.closing || g.asked
		}
		for _, t := range g.tasks {
			gs.PendingTasks = append(gs.PendingTasks, t.ID)
		}
		s.Groups = append(s.Groups, gs)
	}
	return s
}

// Position reports how many groups wait for a slot before name's next run:
// its place in the waiting list or, when it does not wait yet, has no run
// and every slot is taken, the end of that list. ok is false when its next
// run need not wait for a slot. Non-blocking.
func (q *Queue[T]) Position(name string) (ahead int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.IndexFunc(q.waiting, func(g *group[T]) bool { return g.name == name }); i >= 0 {
		return i, true
	}
	if g := q.groups[name]; q.active >= q.cfg.MaxConcurrent && (g == nil || !g.active()) {
		return len(q.waiting), true
	}
	return 0, false
}
