package turns

import (
	"context"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// A Recorder writes the ends it is given in order, Stop writes what is
// queued, and an end added after Stop is dropped.
func TestRecorderWritesInOrder(t *testing.T) {
	var mu sync.Mutex
	var got []string
	r := NewRecorder(func(_ context.Context, e End) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e.Chat)
		return nil
	}, zerolog.Nop())
	h := New(nil, r.Add)
	for _, c := range []string{"a", "b", "c"} {
		h.Ended(End{Chat: c, Result: Done})
	}
	r.Stop()
	r.Add(End{Chat: "late"})
	r.Stop()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Errorf("written %q; want a, b, c", got)
	}
}
