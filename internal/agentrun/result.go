package agentrun

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/snapshot"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

// Errors of a run that ended without a reply.
var (
	errTimedOut   = errors.New("the agent printed nothing before the container timeout")
	errNoStart    = errors.New("the agent did not start")
	errNoResult   = errors.New("the container ended without a result")
	errStopped    = errors.New("the run was stopped at shutdown")
	errAgentError = errors.New("agent error")
	errNoCommit   = errors.New("could not store the reply")
)

// Outcome is how a container run ended: the container's end, and what the
// run committed.
type Outcome struct {
	container.Ended
	Results int // results committed
	// AgentErr is the text of the error that failed a turn: for a message
	// run, a runner error while a turn was in flight or an is_error result,
	// cleared when a later result commits (the runner re-sent the turn and
	// it finished); for a task, such an error before any reply.
	AgentErr string
	// Refusal is set with AgentErr when the failing turn ended on an API
	// error that waiting cannot heal (Failure then wraps it).
	Refusal   *APIRefusal
	CommitErr error  // a result that could not be committed
	LastText  string // last reply text (a task's result)
	// LastResultAt is when the last result was committed: a task's run
	// ends there, not when its container closes later.
	LastResultAt time.Time
	Cost         float64
}

// Failure returns the error of a run that did not end well, nil if it did:
// it exited cleanly after at least one committed result, with no turn left
// failed. Whether that loses anything is decided by the caller: a run whose
// every hand-over is committed lost nothing.
func (o Outcome) Failure() error {
	switch {
	case o.Err != nil:
		return o.Err
	case o.CommitErr != nil:
		return fmt.Errorf("%w: %w", errNoCommit, o.CommitErr)
	case o.AgentErr != "" && o.Refusal != nil:
		return fmt.Errorf("%w: %w", errAgentError, o.Refusal)
	case o.AgentErr != "":
		return fmt.Errorf("%w: %s", errAgentError, prompt.Clip(prompt.OneLine(o.AgentErr), 300))
	case o.Stopped:
		return errStopped
	case o.NoStart:
		return fmt.Errorf("%w: no output within %s of the container's start", errNoStart, o.Timeout)
	case o.TimedOut && o.Timeout > 0:
		return fmt.Errorf("%w (%s)", errTimedOut, o.Timeout)
	case o.TimedOut:
		return errTimedOut
	case o.Exit.Err != nil:
		return fmt.Errorf("container exit: %w", o.Exit.Err)
	case o.Exit.Code != 0:
		return fmt.Errorf("container exited with code %d", o.Exit.Code)
	case o.Results == 0:
		return errNoResult
	}
	return nil
}

// TaskFailure is Failure for a task run: one that committed a result
// without a failed turn succeeded, however its container ended.
func (o Outcome) TaskFailure() error {
	if o.Results > 0 && o.AgentErr == "" && o.CommitErr == nil {
		return nil
	}
	return o.Failure()
}

// turn is the daemon's side of the turns of one container: what each of
// its events and results is committed against (the group, its run object,
// the session, the outbox origin) and the Outcome they add up to.
// Container makes one per container; Supervise calls event for each stdout
// line, one at a time, and end once the container is gone.
type turn struct {
	x      *Runner
	log    zerolog.Logger
	g      store.Group
	grp    *Group
	run    *Run
	sess   *store.Session // nil: an isolated task's session, not kept
	origin store.Origin
	o      Outcome
	// stopping: the container is being stopped (a timeout, shutdown);
	// closed: a failed turn already closed it.
	stopping, closed bool
	// approvalKey is the run's ipc.RunInput.ApprovalKey: an approval_wait
	// without it was not written by the runner.
	approvalKey string
	forgedWait  bool // a forged announcement was logged
}

// event acts on one line of the runner's stdout. A message turn that
// failed closes the container: it takes no more messages and closes once
// idle (a turn the runner re-sent may still finish and commit); what it did
// not commit runs again.
func (t *turn) event(ctx context.Context, ev ipc.Event) {
	t.handle(ctx, ev)
	if t.origin == store.OriginReply && (t.o.AgentErr != "" || t.o.CommitErr != nil) && !t.stopping && !t.closed {
		t.closed = true
		t.log.Info().Msg("a turn failed; closing the container")
		t.grp.Lock()
		t.x.closeRun(t.run, t.g.Folder)
		t.grp.Unlock()
	}
}

// end records how the container ended and returns the run's Outcome.
func (t *turn) end(e container.Ended) Outcome {
	t.o.Ended = e
	return t.o
}

// handle acts on one line of the runner's stdout.
func (t *turn) handle(ctx context.Context, ev ipc.Event) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shortTimeout)
	defer cancel()
	switch ev.Type {
	case ipc.EventSession:
		if t.sess == nil || ev.SessionID == "" {
			return
		}
		next := *t.sess
		if ev.Fresh || ev.SessionID != t.sess.SessionID {
			next.LastUUID = ""
		}
		next.SessionID = ev.SessionID
		if next == *t.sess {
			return
		}
		// Under the group's lock, so an ended session (Runner.EndSession)
		// is never stored again.
		t.grp.Lock()
		if t.run.sessionGen != t.grp.sessions {
			t.grp.Unlock()
			return
		}
		err := t.x.Store.Sessions.Set(wctx, next)
		t.grp.Unlock()
		if err != nil {
			t.log.Error().Err(err).Msg("cannot store session")
			return
		}
		*t.sess = next
		t.log.Debug().Str("session", ev.SessionID).Bool("fresh", ev.Fresh).Msg("session changed")
	case ipc.EventError:
		t.log.Warn().Str("error", prompt.Clip(ev.Message, 500)).Bool("retryable", ev.Retryable).Msg("agent runner reported an error")
		// claude died (or could not start). For a message run whose agent
		// was working on a turn, that turn failed: the container is closed
		// and, unless a later result commits (the runner re-sends the turn
		// in flight to the restarted claude), the run rolls back to the
		// last committed reply and is retried. Between turns nothing was
		// in flight. A task fails unless it already replied.
		t.grp.Lock()
		inTurn := !t.run.waiting
		if t.origin != store.OriginReply {
			inTurn = !t.run.replied
		}
		t.grp.Unlock()
		if inTurn && t.o.AgentErr == "" {
			t.o.AgentErr = prompt.Clip(prompt.OneLine(ev.Message), 300)
			if t.o.AgentErr == "" {
				t.o.AgentErr = "the agent runner reported an error without text"
			}
		}
	case ipc.EventResult:
		t.result(wctx, ev)
	case ipc.EventFetched:
		t.grp.Lock()
		t.run.noteFetched(ev.Tool, ev.What)
		t.grp.Unlock()
	case ipc.EventApprovalWait:
		if t.approvalKey == "" || subtle.ConstantTimeCompare([]byte(ev.Key), []byte(t.approvalKey)) != 1 {
			if !t.forgedWait {
				t.forgedWait = true
				t.log.Warn().Msg("approval announcement without the run's key dropped: not the runner's")
			}
			return
		}
		if t.x.ApprovalWait != nil {
			t.x.ApprovalWait(t.g.Folder, ev.ToolUseID, ev.Tool)
		}
	}
}

// result commits one result: usage, session, and the reply with the
// cursor it settles, in one transaction. A result is counted only once it
// is committed. One that cannot be committed, and in a message run one with
// is_error, fails its turn: nothing later of the container is committed (a
// later reply would store a cursor past the failed turn), the container is
// closed, and the run rolls back to the last committed reply and is retried.
func (t *turn) result(ctx context.Context, ev ipc.Event) {
	text := prompt.StripInternal(ev.Text)
	send := text != "" && !ev.IsError
	var next store.Session
	if t.sess != nil {
		next = *t.sess
		if ev.SessionID != "" && ev.SessionID != next.SessionID {
			next.SessionID, next.LastUUID = ev.SessionID, ""
		}
		if ev.LastUUID != "" {
			next.LastUUID = ev.LastUUID
		}
	}
	// The CLI's cost is the agent's own word, a cross-check of the proxy's
	// meter only: a value no turn can cost is refused, not stored.
	cost := ev.CostUSD
	if !rules.PlausibleReportedCost(cost) {
		t.log.Warn().Float64("cost_usd", cost).Msg("the result reports an impossible cost; stored as 0 (the proxy's meter is what counts)")
		cost = 0
	}
	// The turn is over: what it changed is recorded before the agent may
	// take another (a pipe starts one only once turnDone below has run).
	// Messages piped while it worked and not part of it start the next
	// turn at once: that one begins now.
	t.grp.Lock()
	more, upto := t.origin == store.OriginReply && t.grp.handed != t.run.settled, t.grp.handed
	source := snapshot.Sources(t.run.others)
	t.run.others = nil
	t.grp.Unlock()
	t.x.snapEnd(ctx, t.log, t.grp, t.g, t.run)
	if more {
		t.x.snapBegin(ctx, t.log, t.g, t.run, upto, source)
	}
	usage := store.Usage{Folder: t.g.Folder, SessionID: ev.SessionID, CostUSD: cost, DurationMS: ev.DurationMS, NumTurns: ev.NumTurns, At: t.x.Now()}
	if ev.Usage != nil {
		usage.InputTokens, usage.OutputTokens = ev.Usage.InputTokens, ev.Usage.OutputTokens
	}

	t.grp.Lock()
	if t.run.broken != nil {
		t.x.turnDone(t.grp, t.run, t.g.Folder)
		t.grp.Unlock()
		t.log.Warn().Bool("had_text", send).Msg("result after a failed turn of this container; dropped, its messages run again")
		return
	}
	cursor := t.run.settled
	err := t.x.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.Usage.Add(ctx, usage); err != nil {
			return err
		}
		if t.sess != nil && next != *t.sess && t.run.sessionGen == t.grp.sessions {
			if err := tx.Sessions.Set(ctx, next); err != nil {
				return err
			}
		}
		if !send {
			return nil
		}
		if _, err := tx.Outbox.Enqueue(ctx, store.OutboxItem{Chat: t.g.Chat, Group: t.g.Folder, Text: text, Origin: t.origin}); err != nil {
			return err
		}
		if t.origin == store.OriginReply {
			return tx.Sessions.SetCursor(ctx, t.g.Folder, cursor)
		}
		return nil
	})
	if err == nil {
		if t.sess != nil {
			*t.sess = next
		}
		if send {
			t.run.replied = true
			if t.origin == store.OriginReply {
				t.grp.persisted = cursor
			}
		}
	} else {
		t.run.broken = err
	}
	if err == nil && ev.IsError && t.origin == store.OriginReply {
		// The turn failed: later results must not store a cursor past it.
		t.run.broken = errAgentError
	}
	if err == nil && !ev.IsError {
		t.run.acted = false // the turn that acted finished
	}
	// Whatever was handed over so far has been seen by the time of the next
	// result: folded into this turn, or in a turn of its own.
	t.run.settled = t.grp.handed
	replied := t.run.replied
	t.x.publish(t.g.Folder, t.run)
	// The agent waits for input now, under the group's lock, so a pipe
	// sees the agent busy or waiting exactly as the cursor does. A
	// container whose group's settings changed during the turn goes away
	// now instead (Runner.Apply): its next message starts one with the new
	// settings.
	t.x.turnDone(t.grp, t.run, t.g.Folder)
	t.grp.Unlock()

	if err != nil {
		t.log.Error().Err(err).Bool("had_text", send).Msg("cannot commit the agent's result; the turn failed")
		t.o.CommitErr = describeCommitErr(err)
		return
	}
	t.o.Results++
	t.o.LastResultAt = t.x.Now()
	t.o.Cost += cost
	t.x.Owner.Spent(ctx, t.g)
	switch {
	case send:
		t.o.LastText = text
		t.x.Owner.Wake()
		t.log.Debug().Int("bytes", len(text)).Msg("reply committed")
	case t.origin == store.OriginReply:
		t.x.Owner.SetTyping(t.g.Chat, false)
	}
	switch {
	case ev.IsError:
		t.log.Warn().Int("bytes", len(ev.Text)).Bool("replied", replied).Msg("agent turn ended with an error")
		t.log.Debug().Str("error", prompt.Clip(ev.Text, 300)).Msg("agent error text")
		// A message turn that ends in an error failed (it is retried like
		// a first turn); a task fails on it unless it already replied.
		if t.origin == store.OriginReply || !replied {
			t.o.AgentErr = ev.Text
			if t.o.AgentErr == "" {
				t.o.AgentErr = "error result without text"
			}
			t.o.Refusal = classifyAPIError(ev.APIErrorStatus, ev.APIErrorType, ev.Text)
		}
	case t.origin == store.OriginReply:
		// The turn finished: an earlier runner error (claude died, and the
		// runner re-sent the turn in flight) is recovered.
		t.o.AgentErr, t.o.Refusal = "", nil
		t.x.Turns.Ended(turns.End{Chat: string(t.g.Chat), Result: turns.Done, Upto: int64(cursor)})
	}
}

// describeCommitErr puts "disk full" in front of a commit error the store
// classed as a full disk (store.ErrDiskFull), so status and the notice show
// it first.
func describeCommitErr(err error) error {
	if errors.Is(err, store.ErrDiskFull) {
		return fmt.Errorf("disk full: %w", err)
	}
	return err
}
