package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

// Turns tells when a chat's turn ended (turns.Hub).
type Turns interface {
	// Wait blocks until a turn of chat that took message after ends later
	// than the end numbered since (0: any) and returns it with true; it
	// returns false when ctx ends first.
	Wait(ctx context.Context, chat string, after int64, since uint64) (turns.End, bool)
}

// Holds tells why a message of a chat does not start a turn now (the
// router is one).
type Holds interface {
	// Held reports why message after of chat does not start a turn now,
	// false when nothing holds it.
	Held(ctx context.Context, chat string, after int64) (turns.Hold, bool, error)
}

// TurnState says where the turn that took a message is.
type TurnState string

// Turn states. Running means the wait ended first: the turn has not ended
// yet (or its message never woke the agent).
const (
	TurnRunning TurnState = "running"
	TurnDone    TurnState = TurnState(turns.Done)
	TurnFailed  TurnState = TurnState(turns.Failed) // retried: another end follows
	TurnGaveUp  TurnState = TurnState(turns.GaveUp)
	// TurnNotTriggered: the group needs its trigger and no waiting message
	// has it; the message is kept as context. Answered at once.
	TurnNotTriggered TurnState = turns.HoldNotTriggered
	// TurnBudgetPaused: the group's agent is paused by its daily budget
	// until Until; the message waits. Answered at once.
	TurnBudgetPaused TurnState = turns.HoldBudgetPaused
	// TurnQueued: the group waits for a container slot behind Behind
	// others; the turn will come. Answered at once unless the request
	// says queued=seen.
	TurnQueued TurnState = turns.HoldQueued
	// TurnAwaitingApproval: the turn waits for the owner's answer to the
	// approvals in Approvals (its container is held open meanwhile).
	// Answered at once when the group's open approvals differ from those
	// the request says it was told of (approvals=ID,...); only a request
	// with that parameter gets it.
	TurnAwaitingApproval TurnState = "awaiting_approval"
)

// ApprovalChanges is an optional ability of the Approvals: Changed returns
// a channel closed when a request next opens or is settled. It never
// blocks. Without it, a change of the approvals does not end a turn's wait.
type ApprovalChanges interface {
	Changed() <-chan struct{}
}

// Turn is the answer to GET /v1/chats/{chat}/turn: how the turn that took
// message After ended, and the assistant's messages in the chat after it
// (the turn's replies, and notices), every one the turn committed delivered.
type Turn struct {
	State    TurnState `json:"state"`
	Seq      uint64    `json:"seq,omitempty"`      // pass as since= to wait for the next end
	Upto     int64     `json:"upto,omitempty"`     // the newest message the turn took
	Error    string    `json:"error,omitempty"`    // why it failed
	Attempt  int       `json:"attempt,omitempty"`  // failed: this attempt
	Attempts int       `json:"attempts,omitempty"` // of this many
	// Reason says in one line, for a person, why a held turn does not
	// start, e.g. "not triggered (needs @Andy)"; its kind is the State
	// (not_triggered, budget_paused, queued).
	Reason string     `json:"reason,omitempty"`
	Until  *time.Time `json:"until,omitempty"`  // budget_paused: the pause's end
	Behind int        `json:"behind,omitempty"` // queued: groups ahead
	// Approvals are the open approval requests of the chat's group, which
	// its turn waits for; only told when the request asks (approvals=).
	Approvals []Approval    `json:"approvals,omitempty"`
	Replies   []ChatMessage `json:"replies"`
}

// Ended reports whether no further end of this turn will come: it was
// answered or bridged gave up on it.
func (t Turn) Ended() bool { return t.State == TurnDone || t.State == TurnGaveUp }

// WillNotStart reports whether the turn will not start unless something
// changes (a message with the trigger, a raised budget).
func (t Turn) WillNotStart() bool {
	return t.State == TurnNotTriggered || t.State == TurnBudgetPaused
}

// getTurn answers when the turn of the chat that took message ?after=ID
// ends later than the end ?since=SEQ, or ?wait=D (at most MaxWait) passes,
// or the server stops; then with the assistant's messages after the id.
func (s *Server) getTurn(w http.ResponseWriter, r *http.Request) {
	chat := r.PathValue("chat")
	q := r.URL.Query()
	after, err := strconv.ParseInt(q.Get("after"), 10, 64)
	if err != nil || after <= 0 {
		s.fail(w, r, fmt.Errorf("%w: after=%q: want the id of the message posted", ErrInvalid, q.Get("after")))
		return
	}
	var since uint64
	if v := q.Get("since"); v != "" {
		if since, err = strconv.ParseUint(v, 10, 64); err != nil {
			s.fail(w, r, fmt.Errorf("%w: since=%q: want the seq of an end", ErrInvalid, v))
			return
		}
	}
	wait := s.opts.MaxWait
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			s.fail(w, r, fmt.Errorf("%w: wait=%q: want a Go duration such as 30s", ErrInvalid, v))
			return
		}
		wait = min(d, s.opts.MaxWait)
	}
	ctx := r.Context()
	if err := s.localChat(ctx, chat); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.opts.Turns == nil {
		s.fail(w, r, fmt.Errorf("%w: turn ends are not available", ErrNotRunning))
		return
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-wctx.Done():
		}
	}()
	t := Turn{State: TurnRunning}
	held := false
	if s.opts.Holds != nil {
		// A turn that ended already is told; one that will not start now
		// is told at once instead of after the wait.
		done, stop := context.WithCancel(ctx)
		stop()
		if _, ended := s.opts.Turns.Wait(done, chat, after, since); !ended {
			h, ok, err := s.opts.Holds.Held(ctx, chat, after)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			if ok && (h.Kind != turns.HoldQueued || q.Get("queued") != "seen") {
				held = true
				t = Turn{State: TurnState(h.Kind), Reason: h.Reason, Behind: h.Behind}
				if !h.Until.IsZero() {
					t.Until = &h.Until
				}
			}
		}
	}
	// A caller that follows approvals is answered as soon as the group's
	// open approvals differ from those it was told of.
	watch, seen := q.Has("approvals"), map[string]bool{}
	for _, id := range strings.Split(q.Get("approvals"), ",") {
		if id != "" {
			seen[id] = true
		}
	}
	var open []Approval
	tctx := wctx // the turn's wait
	if watch && !held {
		var err error
		if tctx, open, err = s.watchApprovals(wctx, chat, seen); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if !held {
		if e, ok := s.opts.Turns.Wait(tctx, chat, after, since); ok {
			t = Turn{State: TurnState(e.Result), Seq: e.Seq, Upto: e.Upto, Error: e.Reason, Attempt: e.Attempt, Attempts: e.Attempts}
			if err := s.delivered(wctx, chat, after); err != nil && ctx.Err() == nil && wctx.Err() == nil {
				s.fail(w, r, err)
				return
			}
		}
	}
	if ctx.Err() != nil {
		return
	}
	if watch && !held && !t.Ended() {
		if t.State == TurnRunning {
			// The turn goes on: the approvals as they are now.
			var err error
			if open, err = s.openApprovals(ctx, chat); err != nil {
				s.fail(w, r, err)
				return
			}
			if len(open) > 0 {
				t.State = TurnAwaitingApproval
			}
		}
		t.Approvals = open
	}
	msgs, err := s.opts.Admin.Messages(ctx, chat, after)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t.Replies = []ChatMessage{}
	for _, m := range msgs {
		if m.Direction == Out {
			t.Replies = append(t.Replies, m)
		}
	}
	writeJSON(w, http.StatusOK, t)
}

// watchApprovals returns a context that ends with ctx or as soon as the
// open approvals of chat's group differ from seen (at once when they do
// already), and those approvals now.
func (s *Server) watchApprovals(ctx context.Context, chat string, seen map[string]bool) (context.Context, []Approval, error) {
	changes, _ := s.opts.Approvals.(ApprovalChanges)
	var changed <-chan struct{}
	if changes != nil {
		changed = changes.Changed()
	}
	open, err := s.openApprovals(ctx, chat)
	if err != nil {
		return ctx, nil, err
	}
	if !sameApprovals(open, seen) {
		wctx, cancel := context.WithCancel(ctx)
		cancel()
		return wctx, open, nil
	}
	if changed == nil {
		return ctx, open, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		for {
			select {
			case <-changed:
			case <-wctx.Done():
				return
			}
			changed = changes.Changed()
			now, err := s.openApprovals(wctx, chat)
			if err != nil || !sameApprovals(now, seen) {
				return
			}
		}
	}()
	return wctx, open, nil
}

// openApprovals lists the open approval requests of chat's group, oldest
// first; none when the approvals are not available.
func (s *Server) openApprovals(ctx context.Context, chat string) ([]Approval, error) {
	if s.opts.Approvals == nil {
		return nil, nil
	}
	g, err := s.opts.Admin.DB.Groups.ByChat(ctx, store.ChatID(chat))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	as, err := s.opts.Approvals.List(ctx, true, 0)
	if err != nil {
		return nil, err
	}
	var out []Approval
	for i := len(as) - 1; i >= 0; i-- {
		if as[i].Folder == g.Folder {
			out = append(out, approvalOut(as[i]))
		}
	}
	return out, nil
}

// sameApprovals reports whether open are exactly the ids in seen.
func sameApprovals(open []Approval, seen map[string]bool) bool {
	if len(open) != len(seen) {
		return false
	}
	for _, a := range open {
		if !seen[a.ID] {
			return false
		}
	}
	return true
}

// delivered waits until every message bridged committed for chat is stored
// in the chat (the outbox hands it to the local channel), or ctx ends.
func (s *Server) delivered(ctx context.Context, chat string, after int64) error {
	for {
		changed := s.opts.Local.Wait(ctx)
		done, err := s.outboxDelivered(ctx, chat, after)
		if err != nil || done {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// outboxDelivered reports whether no outbox row of chat is pending whose
// message is not stored in the chat after the id after yet (a row is
// marked sent just after the local channel stored it).
func (s *Server) outboxDelivered(ctx context.Context, chat string, after int64) (bool, error) {
	pending, err := s.opts.Admin.DB.Outbox.Pending(ctx, 0)
	if err != nil {
		return false, err
	}
	var stored map[string]bool
	for _, it := range pending {
		if string(it.Chat) != chat {
			continue
		}
		if stored == nil { // read the chat only when one of its rows is pending
			ms, err := s.opts.Admin.DB.Messages.After(ctx, store.ChatID(chat), store.MessageID(after), maxMessages)
			if err != nil {
				return false, err
			}
			stored = make(map[string]bool, len(ms))
			for _, m := range ms {
				stored[m.ExternalID] = true
			}
		}
		if !stored[it.ExternalID] {
			return false, nil
		}
	}
	return true, nil
}

// Turn waits (at most wait, at most 60 s on the server) for the end of the
// turn of a local chat that took message after, later than the end numbered
// since (0: the first), and returns it with the assistant's messages after
// the id. A Turn in state TurnRunning means the wait passed first.
func (c *Client) Turn(ctx context.Context, chat string, after int64, since uint64, wait time.Duration) (Turn, error) {
	return c.TurnSeen(ctx, chat, after, since, wait, false)
}

// TurnSeen is Turn for a caller that was told the turn is queued
// (queuedSeen): it waits for the turn's end instead of being told again.
// A turn that will not start (not triggered, paused by its budget) is
// answered at once either way.
func (c *Client) TurnSeen(ctx context.Context, chat string, after int64, since uint64, wait time.Duration, queuedSeen bool) (Turn, error) {
	return c.turn(ctx, chat, after, since, wait, queuedSeen, nil)
}

// TurnWatch is TurnSeen for a caller that follows the approvals the turn
// waits for: it is answered as soon as the open approvals of the chat's
// group differ from seen (the ids it was told of; nil or empty: none), in
// state TurnAwaitingApproval while some are open, and every answer lists
// them (Turn.Approvals).
func (c *Client) TurnWatch(ctx context.Context, chat string, after int64, since uint64, wait time.Duration, queuedSeen bool, seen []string) (Turn, error) {
	if seen == nil {
		seen = []string{}
	}
	return c.turn(ctx, chat, after, since, wait, queuedSeen, seen)
}

func (c *Client) turn(ctx context.Context, chat string, after int64, since uint64, wait time.Duration, queuedSeen bool, approvals []string) (Turn, error) {
	q := url.Values{}
	if approvals != nil {
		q.Set("approvals", strings.Join(approvals, ","))
	}
	if queuedSeen {
		q.Set("queued", "seen")
	}
	q.Set("after", strconv.FormatInt(after, 10))
	if since > 0 {
		q.Set("since", strconv.FormatUint(since, 10))
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var t Turn
	err := c.do(ctx, http.MethodGet, "/v1/chats/"+url.PathEscape(chat)+"/turn?"+q.Encode(), nil, &t)
	return t, err
}
