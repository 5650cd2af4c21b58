// Package turns tells waiters when an agent's turn for a chat ended. The
// router records each end (the turn answered, failed and is retried, or
// failed for good) with the newest message id the turn took; the control API
// waits for the end of the turn that took a given message, so `bridged chat
// -m` returns as soon as the agent is done instead of after a quiet period.
//
// A Hub keeps the last few ends of each chat in memory, so a waiter that
// asks after the turn ended still finds it. Nothing is persisted: after a
// restart, ends of turns of the previous daemon are not known.
//
// Callbacks without a context: New's now is a clock, and its onEnd a
// signal that must not block (a Recorder queues the end for the daemon's
// turn log and writes it on its own goroutine, under its own context); neither does work that
// a context would bound. Ended itself takes none for the same reason.
package turns

import (
	"context"
	"sync"
	"time"
)

// Result is how a turn ended.
type Result string

// Results of a turn.
const (
	// Done: the turn ended well; its replies are committed.
	Done Result = "done"
	// Failed: the turn failed and bridged runs its messages again
	// (attempt Attempt of Attempts failed).
	Failed Result = "failed"
	// GaveUp: the turn failed for good after Attempt attempts; its
	// messages are not run again until the chat's next message.
	GaveUp Result = "gave_up"
)

// End is the end of one turn of a chat.
type End struct {
	// Seq orders the ends recorded by one Hub (from 1). A waiter passes
	// the Seq of an end it has seen to wait for a later one.
	Seq    uint64
	Chat   string
	Result Result
	// Upto is the newest message id the turn took: messages of the chat
	// up to it are answered (Done) or failed with it.
	Upto int64
	// Reason says why a turn failed (empty for Done).
	Reason            string
	Attempt, Attempts int
	At                time.Time
}

// keep is how many ends of each chat a Hub remembers.
const keep = 16

// Hub records ends of turns and lets callers wait for them. The zero value
// is not usable; call New. A nil *Hub records nothing.
type Hub struct {
	mu      sync.Mutex
	seq     uint64
	ends    map[string][]End
	changed chan struct{}
	now     func() time.Time
	onEnd   func(End)
}

// New returns an empty Hub. now is nil for time.Now. onEnd, when not nil,
// is called with every end Ended records (with its Seq and At), outside
// the Hub's lock; it must not block.
func New(now func() time.Time, onEnd func(End)) *Hub {
	if now == nil {
		now = time.Now
	}
	return &Hub{ends: make(map[string][]End), changed: make(chan struct{}), now: now, onEnd: onEnd}
}

// Ended records the end of a turn of e.Chat (Seq and, when zero, At are set
// here) and wakes the waiters. It does not block. On a nil Hub it does
// nothing.
func (h *Hub) Ended(e End) {
	if h == nil || e.Chat == "" {
		return
	}
	if h.onEnd != nil {
		defer func() { h.onEnd(e) }() // after the lock is released
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	e.Seq = h.seq
	if e.At.IsZero() {
		e.At = h.now()
	}
	list := append(h.ends[e.Chat], e)
	if len(list) > keep {
		list = append(list[:0:0], list[len(list)-keep:]...)
	}
	h.ends[e.Chat] = list
	close(h.changed)
	h.changed = make(chan struct{})
}

// find returns the first end of chat after seq since that took message
// after (Upto >= after). Call it with h.mu held.
func (h *Hub) find(chat string, after int64, since uint64) (End, bool) {
	for _, e := range h.ends[chat] {
		if e.Seq > since && e.Upto >= after {
			return e, true
		}
	}
	return End{}, false
}

// Wait blocks until a turn of chat that took message after (its Upto is at
// least after) ends later than the end numbered since (0: any), and returns
// that end with true. It returns false when ctx ends first (the turn still
// runs, or never started), and at once on a nil Hub.
func (h *Hub) Wait(ctx context.Context, chat string, after int64, since uint64) (End, bool) {
	if h == nil {
		return End{}, false
	}
	for {
		h.mu.Lock()
		e, ok := h.find(chat, after, since)
		changed := h.changed
		h.mu.Unlock()
		if ok {
			return e, true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return End{}, false
		}
	}
}

// Hold kinds: why a message does not start a turn now.
const (
	// HoldNotTriggered: the group needs its trigger and no waiting message
	// has it; the message waits as context for the next one that does.
	HoldNotTriggered = "not_triggered"
	// HoldBudgetPaused: the group's agent is paused by its daily budget
	// until Until (or until the owner raises the budget).
	HoldBudgetPaused = "budget_paused"
	// HoldQueued: the group waits for a container slot behind Behind
	// other groups; its turn comes.
	HoldQueued = "queued"
)

// Hold says why a message of a chat does not start a turn now.
type Hold struct {
	Kind   string
	Reason string    // one line, e.g. "not triggered (needs @Andy)"
	Until  time.Time // HoldBudgetPaused: when the pause ends
	Behind int       // HoldQueued: groups ahead in the queue
}
