package whatsapp

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Goroutines started while Close runs are either waited for by Close or
// not started at all: none runs after Close returned.
func TestBackgroundRacingCloseRunsNothingAfterIt(t *testing.T) {
	for range 100 {
		tc := newTestClient(t, nil)
		var closed atomic.Bool
		var late atomic.Int32
		start := make(chan struct{})
		var callers sync.WaitGroup
		for range 4 {
			callers.Go(func() {
				<-start
				for range 20 {
					tc.background(func() {
						if closed.Load() {
							late.Add(1)
						}
					})
				}
			})
		}
		close(start)
		if err := tc.Close(); err != nil {
			t.Fatal(err)
		}
		closed.Store(true)
		callers.Wait()
		if n := late.Load(); n > 0 {
			t.Fatalf("%d background goroutines ran after Close returned", n)
		}
	}
}
