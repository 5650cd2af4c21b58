package router

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotAnswering is returned by Ping when the message loop did not answer
// in time: the router is not running, is stopping, or is wedged.
var ErrNotAnswering = errors.New("router's message loop does not answer")

// Ping makes one round trip through the message loop, the goroutine that
// hands every inbound message to an agent. It blocks until the loop answers
// or ctx ends; then it returns an error wrapping ErrNotAnswering. The loop
// answers after handling what it was woken for before the ping, so a nil
// Ping also says that every change the ingest marked before it was
// looked at. A wedged
// loop (stuck on a group's lock or a call that never returns) stops
// answering, which is what the daemon's watchdog looks for.
func (r *Router) Ping(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case r.pings <- done:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotAnswering, context.Cause(ctx))
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotAnswering, context.Cause(ctx))
	}
}
