package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

// handleEvent acts on one line of the runner's stdout.
func (r *Router) handleEvent(ctx context.Context, log zerolog.Logger, g store.Group, run *liveRun, sess *store.Session, origin store.Origin, ev ipc.Event, o *outcome) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shortTimeout)
	defer cancel()
	switch ev.Type {
	case ipc.EventSession:
		if sess == nil || ev.SessionID == "" {
			return
		}
		next := *sess
		if ev.Fresh || ev.SessionID != sess.SessionID {
			next.LastUUID = ""
		}
		next.SessionID = ev.SessionID
		if next == *sess {
			return
		}
		if err := r.db.SetSession(wctx, next); err != nil {
			log.Error().Err(err).Msg("cannot store session")
			return
		}
		*sess = next
		log.Debug().Str("session", ev.SessionID).Bool("fresh", ev.Fresh).Msg("session changed")
	case ipc.EventError:
		log.Warn().Str("error", prompt.Clip(ev.Message, 500)).Bool("retryable", ev.Retryable).Msg("agent runner reported an error")
		// claude died (or could not start). For a message run whose agent
		// was working on a turn, that turn failed: the container is closed
		// and, unless a later result commits (the runner re-sends the turn
		// in flight to the restarted claude), the run rolls back to the
		// last committed reply and is retried. Between turns nothing was
		// in flight. A task fails unless it already replied.
		gs := r.state(g.Folder)
		gs.mu.Lock()
		inTurn := !r.queue.Idle(string(g.Folder))
		if origin != store.OriginReply {
			inTurn = !run.replied
		}
		gs.mu.Unlock()
		if inTurn && o.agentErr == "" {
			o.agentErr = prompt.Clip(prompt.OneLine(ev.Message), 300)
			if o.agentErr == "" {
				o.agentErr = "the agent runner reported an error without text"
			}
		}
	case ipc.EventResult:
		r.handleResult(wctx, log, g, run, sess, origin, ev, o)
	}
}

// handleResult commits one result: usage, session, and the reply with the
// cursor it settles, in one transaction. A result is counted only once it
// is committed. One that cannot be committed, and in a message run one with
// is_error, fails its turn: nothing later of the container is committed (a
// later reply would store a cursor past the failed turn), the container is
// closed, and the run rolls back to the last committed reply and is retried.
func (r *Router) handleResult(ctx context.Context, log zerolog.Logger, g store.Group, run *liveRun, sess *store.Session, origin store.Origin, ev ipc.Event, o *outcome) {
	text := prompt.StripInternal(ev.Text)
	send := text != "" && !ev.IsError
	var next store.Session
	if sess != nil {
		next = *sess
		if ev.SessionID != "" && ev.SessionID != next.SessionID {
			next.SessionID, next.LastUUID = ev.SessionID, ""
		}
		if ev.LastUUID != "" {
			next.LastUUID = ev.LastUUID
		}
	}
	usage := store.Usage{Folder: g.Folder, SessionID: ev.SessionID, CostUSD: ev.CostUSD, DurationMS: ev.DurationMS, NumTurns: ev.NumTurns, At: r.now()}
	if ev.Usage != nil {
		usage.InputTokens, usage.OutputTokens = ev.Usage.InputTokens, ev.Usage.OutputTokens
	}

	gs := r.state(g.Folder)
	gs.mu.Lock()
	if run.broken != nil {
		r.queue.NotifyIdle(string(g.Folder))
		gs.mu.Unlock()
		log.Warn().Bool("had_text", send).Msg("result after a failed turn of this container; dropped, its messages run again")
		return
	}
	cursor := run.settled
	err := r.db.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.AddUsage(ctx, usage); err != nil {
			return err
		}
		if sess != nil && next != *sess {
			if err := tx.SetSession(ctx, next); err != nil {
				return err
			}
		}
		if !send {
			return nil
		}
		if _, err := tx.EnqueueOutbox(ctx, store.OutboxItem{Chat: g.Chat, Group: g.Folder, Text: text, Origin: origin}); err != nil {
			return err
		}
		if origin == store.OriginReply {
			return tx.SetCursor(ctx, g.Folder, cursor)
		}
		return nil
	})
	if err == nil {
		if sess != nil {
			*sess = next
		}
		if send {
			run.replied = true
			if origin == store.OriginReply {
				gs.persisted = cursor
			}
		}
	} else {
		run.broken = err
	}
	if err == nil && ev.IsError && origin == store.OriginReply {
		// The turn failed: later results must not store a cursor past it.
		run.broken = errAgentError
	}
	if err == nil && !ev.IsError {
		run.acted = false // the turn that acted finished
	}
	// Whatever was handed over so far has been seen by the time of the next
	// result: folded into this turn, or in a turn of its own.
	run.settled = gs.handed
	replied := run.replied
	r.publish(g.Folder, run)
	// The agent waits for input now: the queue hears it under the group's
	// lock, so a pipe sees the agent busy or idle exactly as the cursor
	// does.
	r.queue.NotifyIdle(string(g.Folder))
	gs.mu.Unlock()

	if err != nil {
		log.Error().Err(err).Bool("had_text", send).Msg("cannot commit the agent's result; the turn failed")
		o.commitErr = describeCommitErr(err)
		return
	}
	o.results++
	o.cost += ev.CostUSD
	r.spent(ctx, g)
	switch {
	case send:
		o.lastText = text
		r.out.Wake()
		log.Debug().Int("bytes", len(text)).Msg("reply committed")
	case origin == store.OriginReply:
		r.out.SetTyping(string(g.Chat), false)
	}
	switch {
	case ev.IsError:
		log.Warn().Int("bytes", len(ev.Text)).Bool("replied", replied).Msg("agent turn ended with an error")
		log.Debug().Str("error", prompt.Clip(ev.Text, 300)).Msg("agent error text")
		// A message turn that ends in an error failed (it is retried like
		// a first turn); a task fails on it unless it already replied.
		if origin == store.OriginReply || !replied {
			o.agentErr = ev.Text
			if o.agentErr == "" {
				o.agentErr = "error result without text"
			}
		}
	case origin == store.OriginReply:
		// The turn finished: an earlier runner error (claude died, and the
		// runner re-sent the turn in flight) is recovered.
		o.agentErr = ""
		r.turns.Ended(turns.End{Chat: string(g.Chat), Result: turns.Done, Upto: int64(cursor)})
	}
}

// describeCommitErr puts "disk full" in front of a commit error that says so
// (SQLite's SQLITE_FULL, or ENOSPC), so status and the notice show it first.
func describeCommitErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) || strings.Contains(strings.ToLower(err.Error()), "disk is full") {
		return fmt.Errorf("disk full: %w", err)
	}
	return err
}

// notice commits a short message from bridged itself to chat. When it
// cannot be committed (the disk is full, say) it is sent once straight
// through the chat's channel, best effort, so the failure it reports is not
// silent too.
func (r *Router) notice(chat store.ChatID, folder store.Folder, text string) {
	if chat == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	_, err := r.db.EnqueueOutbox(ctx, store.OutboxItem{Chat: chat, Group: folder, Text: text, Origin: store.OriginNotice})
	if err == nil {
		r.out.Wake()
		return
	}
	log := r.log.With().Str("chat", string(chat)).Logger()
	log.Error().Err(err).Msg("cannot queue notice; sending it directly")
	ch := r.channelFor(string(chat))
	if ch == nil {
		return
	}
	if _, err := ch.Send(ctx, channel.Outgoing{Chat: string(chat), Text: text, ID: store.NewExternalID()}); err != nil {
		log.Error().Err(err).Msg("cannot send notice")
	}
}
