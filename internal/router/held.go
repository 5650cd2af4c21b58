package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

// Held reports why message after of chat does not start a turn now, and
// false when nothing holds it (its turn runs, will start, or is over).
func (r *Router) Held(ctx context.Context, chat string, after int64) (turns.Hold, bool, error) {
	g, err := r.db.Groups.ByChat(ctx, store.ChatID(chat))
	if errors.Is(err, store.ErrNotFound) {
		return turns.Hold{}, false, nil
	}
	if err != nil {
		return turns.Hold{}, false, err
	}
	grp := r.runs.Group(g.Folder)
	grp.Lock()
	err = grp.Load(ctx, r.db, g.Folder)
	handed := grp.Handed()
	grp.Unlock()
	if err != nil {
		return turns.Hold{}, false, err
	}
	if store.MessageID(after) <= handed {
		return turns.Hold{}, false, nil // handed to the agent already
	}
	msgs, _, err := r.db.Messages.Pending(ctx, g.Chat, handed, r.cfg.PromptCap)
	if err != nil {
		return turns.Hold{}, false, err
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].ID < store.MessageID(after) {
		// The message is a bot's, or waits for its media: not judged yet.
		return turns.Hold{}, false, nil
	}
	if i := slices.IndexFunc(msgs, func(m store.Message) bool { return m.ID == store.MessageID(after) }); i >= 0 && isNewSession(msgs[i]) {
		return turns.Hold{}, false, nil // the owner's /new: its notice ends its turn
	}
	if !r.triggered(g, msgs) {
		trig := g.Trigger
		if strings.TrimSpace(trig) == "" {
			trig = "@" + r.cfg.AssistantName
		}
		reason := fmt.Sprintf("not triggered (needs %s)", trig)
		if i := slices.IndexFunc(msgs, func(m store.Message) bool { return m.ID == store.MessageID(after) }); i >= 0 && msgs[i].NotAllowed {
			reason = "not triggered: sender not allowed to wake the agent of this group"
		}
		return turns.Hold{Kind: turns.HoldNotTriggered, Reason: reason}, true, nil
	}
	if r.paused(ctx, g) {
		_, end := rules.BudgetDay(r.now(), r.cfg.Timezone)
		return turns.Hold{Kind: turns.HoldBudgetPaused, Until: end,
			Reason: fmt.Sprintf("paused by its budget until %s (or until the owner raises it)", end.Format("2006-01-02 15:04 MST"))}, true, nil
	}
	// Queued: waiting for a slot, or about to (the message loop has not
	// enqueued it yet, and every slot is taken by other groups).
	if i, ok := r.queue.Position(string(g.Folder)); ok {
		st := r.queue.Status()
		return turns.Hold{Kind: turns.HoldQueued, Behind: i,
			Reason: fmt.Sprintf("queued behind %d: all %d container slots are busy, %d other groups wait before it", st.Running+i, st.MaxConcurrent, i)}, true, nil
	}
	return turns.Hold{}, false, nil
}
