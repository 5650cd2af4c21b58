package approvals

import (
	"context"
	"sync"
	"time"
)

// AnnounceWait is how long an ask_approval request waits for the
// announcement of its tool call: the runner announces it on its stdout
// before it writes the request, but the two reach the daemon by different
// paths (the container's output stream, the requests directory).
const AnnounceWait = 5 * time.Second

// maxAnnounced bounds the announced calls kept per group that no request
// claimed yet.
const maxAnnounced = 64

// call is one announced tool call.
type call struct{ toolUseID, tool string }

// waits are the tool calls the groups' live containers announced they are
// about to ask the owner about (an approval_wait line on the runner's
// stdout), not yet claimed by an ask_approval request. A request is taken
// only for an announced call, once: a request file planted in a group's
// IPC directory names no call its runner waits on.
type waits struct {
	mu      sync.Mutex
	calls   map[string]map[call]struct{} // folder → announced calls
	changed map[string]chan struct{}     // folder → closed at its next announcement
}

func newWaits() *waits {
	return &waits{calls: map[string]map[call]struct{}{}, changed: map[string]chan struct{}{}}
}

// announce records that folder's runner waits on (toolUseID, tool). It
// reports false when the group has too many unclaimed announcements.
func (w *waits) announce(folder, toolUseID, tool string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.calls[folder]
	if m == nil {
		m = map[call]struct{}{}
		w.calls[folder] = m
	}
	if len(m) >= maxAnnounced {
		return false
	}
	m[call{toolUseID, tool}] = struct{}{}
	if ch := w.changed[folder]; ch != nil {
		close(ch)
		delete(w.changed, folder)
	}
	return true
}

// claim takes the announcement of (toolUseID, tool) for folder, waiting
// for it up to wait or until ctx ends; false when none came.
func (w *waits) claim(ctx context.Context, folder, toolUseID, tool string, wait time.Duration) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		w.mu.Lock()
		if _, ok := w.calls[folder][call{toolUseID, tool}]; ok {
			delete(w.calls[folder], call{toolUseID, tool})
			w.mu.Unlock()
			return true
		}
		ch := w.changed[folder]
		if ch == nil {
			ch = make(chan struct{})
			w.changed[folder] = ch
		}
		w.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// forget drops folder's announcements: its container is gone, no runner
// waits on them.
func (w *waits) forget(folder string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.calls, folder)
}
