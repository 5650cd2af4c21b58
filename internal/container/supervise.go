package container

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

const (
	// StopGrace is how long a stopped container gets before it is killed.
	StopGrace = 10 * time.Second
	// stopMargin is how much longer than the grace a stop or wait may take.
	stopMargin = 30 * time.Second
)

// Watch says how Supervise follows one container. Its functions are called
// on Supervise's goroutine, one at a time.
type Watch struct {
	Log zerolog.Logger
	// Instance is the daemon's instance: a container of the spec's group
	// it left behind is stopped before the new one starts.
	Instance string
	// Leftovers says when the group's containers need to be looked for
	// first (its first run, and the run after one that did not end
	// cleanly); nil: before every start.
	Leftovers *Leftovers
	// Timeout stops the container after this long without a stdout line.
	// StartTimeout (at most Timeout) stops it when it printed nothing at
	// all that long after its start.
	Timeout, StartTimeout time.Duration
	// Kick is signalled when a turn begins on an idle agent, or a held
	// turn is released: the timeout counts from then, not from the last
	// line.
	Kick <-chan struct{}
	// Held, when set, reports whether the turn in flight is held open on
	// purpose (it waits on the owner, not on the agent): when the timeout
	// fires while it is, the timeout starts over instead of stopping the
	// container. It must not block.
	Held func() bool
	// Started is told the container's id once it runs.
	Started func(id string)
	// Event is called for every stdout line, in order, with Supervise's
	// ctx (ended already for the lines a stopping container still prints).
	Event func(context.Context, ipc.Event)
	// Stopping is called once, when Supervise begins to stop the container
	// (a timeout, the end of ctx, a failed wait).
	Stopping func()
}

// Ended is how a supervised container ended.
type Ended struct {
	Exit     Exit
	TimedOut bool
	NoStart  bool          // stopped by the start timeout
	Timeout  time.Duration // the timeout that fired
	Stopped  bool          // stopped because ctx ended
	Err      error         // a failure to start, stop or wait for it
}

// Supervise makes sure no container of spec's group is left (one group, one
// container, always; looked for as w.Leftovers says), starts the container,
// and follows it until it is gone: each stdout line goes to w.Event and
// restarts the timeout, and the container is stopped when a timeout fires
// or ctx ends. A container that cannot be stopped ends the supervision with
// a NotStoppedError: its end will not be seen either, and the next run
// stops it first.
func Supervise(ctx context.Context, rt Runtime, spec Spec, w Watch) Ended {
	var e Ended
	log := w.Log
	if w.Leftovers.suspect(spec.Group) {
		if err := stopGroupLeftovers(ctx, rt, log, spec.Group, w.Instance); err != nil {
			log.Error().Err(err).Msg("container not started")
			e.Err = err
			return e
		}
	}
	// Until it ends cleanly, a container of the group may be left: a start
	// that failed half-way, a stop or a wait that failed.
	w.Leftovers.set(spec.Group, false)
	defer func() { w.Leftovers.set(spec.Group, e.Err == nil && e.Exit.Err == nil) }()
	c, err := rt.Start(ctx, spec)
	if err != nil {
		e.Err = fmt.Errorf("start container: %w", err)
		return e
	}
	if w.Started != nil {
		w.Started(c.ID())
	}
	log = log.With().Str("container", spec.Name).Logger()
	log.Debug().Msg("container started")

	hard := time.NewTimer(w.Timeout)
	defer hard.Stop()
	// Until its first line the container has the start timeout.
	startTimeout := min(w.StartTimeout, w.Timeout)
	first := time.NewTimer(startTimeout)
	defer first.Stop()
	firstC := first.C
	stopDone := make(chan struct{})
	var stopErr error // set before stopDone closes
	var stopDoneC <-chan struct{}
	stopping := false
	stop := func(why string) {
		if stopping {
			return
		}
		stopping = true
		stopDoneC = stopDone
		if w.Stopping != nil {
			w.Stopping()
		}
		log.Info().Str("reason", why).Msg("stopping container")
		go func() {
			defer close(stopDone)
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StopGrace+stopMargin)
			defer cancel()
			if err := rt.Stop(sctx, c.ID(), StopGrace); err != nil {
				log.Error().Err(err).Msg("cannot stop container")
				stopErr = err
			}
		}()
	}
	events := c.Events()
	done := ctx.Done()
loop:
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				break loop
			}
			if !stopping {
				hard.Reset(w.Timeout)
			}
			if firstC != nil {
				first.Stop()
				firstC = nil
			}
			if w.Event != nil {
				w.Event(ctx, ev)
			}
		case <-w.Kick:
			if !stopping {
				hard.Reset(w.Timeout)
			}
		case <-firstC:
			firstC = nil
			if !stopping {
				e.TimedOut, e.NoStart, e.Timeout = true, true, startTimeout
				stop("no output since start")
			}
		case <-hard.C:
			if !stopping && w.Held != nil && w.Held() {
				hard.Reset(w.Timeout)
				continue
			}
			if !e.NoStart {
				e.TimedOut = true
				e.Timeout = w.Timeout
			}
			stop("timeout")
		case <-done:
			done = nil
			e.Stopped = true
			stop("shutdown")
		case <-stopDoneC:
			stopDoneC = nil
			if stopErr != nil {
				e.Err = &NotStoppedError{ID: c.ID(), Err: stopErr}
				break loop
			}
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StopGrace+stopMargin)
	if e.Err != nil {
		cancel() // the container could not be stopped: its end will not come
	}
	exit, err := c.Wait(wctx)
	cancel()
	if err != nil && e.Err == nil {
		stop("wait failed")
		e.Err = fmt.Errorf("wait for container: %w", err)
	}
	e.Exit = exit
	if stopping {
		<-stopDone
	}
	return e
}

// Leftovers remembers the groups known to have no container of the
// daemon's left behind. Before the start-up sweep (Swept) a group's first
// run looks for one; after it, no group's does. The run after one that did
// not end cleanly (its start, stop or wait failed) always looks; the others
// start at once, without asking the engine for a list. The zero value is
// ready to use; a nil *Leftovers has every run look.
type Leftovers struct {
	mu    sync.Mutex
	swept bool
	// clean holds what the last run of a group said: true, it ended
	// cleanly; false, it did not. A group without a run yet is absent.
	clean map[string]bool
}

// Swept records that the start-up sweep stopped every container the home's
// earlier instances left (StopLeftovers returned true): from then on only a
// run that did not end cleanly makes its group's next run look.
func (l *Leftovers) Swept() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.swept = true
}

// suspect reports whether group's containers must be looked for.
func (l *Leftovers) suspect(group string) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if clean, ran := l.clean[group]; ran {
		return !clean
	}
	return !l.swept
}

// set records whether group is known to have no container left.
func (l *Leftovers) set(group string, clean bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clean == nil {
		l.clean = make(map[string]bool)
	}
	l.clean[group] = clean
}

// stopGroupLeftovers stops every container of group that instance left
// behind, before a new one starts. One can be left when the engine
// connection was lost and the container could not be stopped then, or when
// a start failed half-way. If one cannot be stopped now, the run fails and
// starts none.
func stopGroupLeftovers(ctx context.Context, rt Runtime, log zerolog.Logger, group, instance string) error {
	infos, err := rt.ListManaged(ctx)
	if err != nil {
		return fmt.Errorf("check for a previous container of the group: %w", err)
	}
	for _, c := range infos {
		if c.Group != group || c.Instance != instance {
			continue
		}
		log.Warn().Str("container", c.Name).Str("state", c.State).Msg("a previous container of the group is still there; stopping it before starting a new one")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StopGrace+stopMargin)
		err := rt.Stop(sctx, c.ID, StopGrace)
		cancel()
		if err != nil {
			return fmt.Errorf("the group's previous container %s could not be stopped, so no new one was started: %w", c.Name, err)
		}
	}
	return nil
}
