package testlog

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
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

func TestWaitForWakesOnTheWrite(t *testing.T) {
	var b Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	checked := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- b.WaitFor(ctx, func(s string) bool {
			select {
			case checked <- struct{}{}:
			default:
			}
			return strings.Contains(s, "ready")
		})
	}()
	<-checked // the first check saw an empty buffer
	_, _ = b.Write([]byte("not yet\n"))
	_, _ = b.Write([]byte("ready\n"))
	if err := <-done; err != nil {
		t.Fatalf("WaitFor: %v", err)
	}
	if err := b.WaitFor(ctx, func(s string) bool { return strings.Contains(s, "ready") }); err != nil {
		t.Fatalf("WaitFor on what is already written: %v", err)
	}
}

func TestWaitForEndsWithTheContext(t *testing.T) {
	var b Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.WaitFor(ctx, func(string) bool { return false }); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitFor = %v; want the context's error", err)
	}
}
