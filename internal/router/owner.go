package router

import (
	"context"
	"errors"
	"fmt"

	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

// Budget pauses the agent of a group whose daily budget is used up
// (internal/alerts implements it).
type Budget interface {
	// Paused reports whether g's agent is paused by its daily budget: its
	// pending messages wait. It reads the store and does not block for
	// long; when the cost cannot be read it reports false.
	Paused(ctx context.Context, g store.Group) bool
	// Spent is told after a turn's cost was recorded for g. It may post
	// notices (through SendMessage); it does not block for long.
	Spent(ctx context.Context, g store.Group)
}

// Alerts tells the owner, in the main chat, of a condition once until it
// clears (internal/alerts implements it).
type Alerts interface {
	// Raise tells the owner text unless key is raised already. It does
	// not block for long and logs its own errors.
	Raise(ctx context.Context, key, text string)
	// Clear re-arms key: the condition is over. It does not block for
	// long and logs its own errors.
	Clear(ctx context.Context, key string)
}

// ErrBudgetPaused is the error of a task run skipped because its group's
// daily budget is used up.
var ErrBudgetPaused = errors.New("skipped: the group's daily budget is used up")

// Alert keys the router raises and clears.

// GaveUpKey is raised when a group's message run failed for good and
// cleared by its next good run.
func GaveUpKey(folder store.Folder) string { return "gave-up/" + string(folder) }

// OutboxFailedKey is raised when a message to chat finally failed and
// cleared when a message to chat is sent.
func OutboxFailedKey(chat store.ChatID) string { return "outbox-failed/" + string(chat) }

// Rescan looks at every group's pending messages again: after a paused
// group's budget was raised or lifted, or a new day began. It does not
// block.
func (r *Router) Rescan() { r.markAllDirty() }

// paused reports whether g's agent is paused by its budget.
func (r *Router) paused(ctx context.Context, g store.Group) bool {
	return r.budget != nil && r.budget.Paused(ctx, g)
}

func (r *Router) spent(ctx context.Context, g store.Group) {
	if r.budget != nil {
		r.budget.Spent(context.WithoutCancel(ctx), g)
	}
}

func (r *Router) raise(key, text string) {
	if r.alerts == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	r.alerts.Raise(ctx, key, text)
}

func (r *Router) clearAlert(key string) {
	if r.alerts == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	r.alerts.Clear(ctx, key)
}

// sendFailed is called by the outbox sender after a row is marked failed.
func (r *Router) sendFailed(it store.OutboxItem, err error) {
	where := string(it.Chat)
	if it.Group != "" {
		where = fmt.Sprintf("group %s (%s)", it.Group, it.Chat)
	}
	r.raise(OutboxFailedKey(it.Chat), fmt.Sprintf("A message to %s could not be sent and was given up: %s. See `bridged status`.", where, prompt.Clip(prompt.OneLine(err.Error()), 200)))
}
