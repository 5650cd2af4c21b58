package testlog

import (
	"strings"
	"sync"
	"testing"
)

func TestBufferConcurrentWriters(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if _, err := b.Write([]byte("x\n")); err != nil {
					t.Error(err)
				}
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "x\n"); n != 800 {
		t.Fatalf("%d lines; want 800", n)
	}
}
