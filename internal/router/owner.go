package router

import (
	"context"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/rules"
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
// clears (internal/alerts implements it): the runs' (agentrun.Alerts) and
// the outbox's. No method blocks for long; each logs its own errors.
type Alerts interface {
	agentrun.Alerts
	// SendFailed: a message to chat (from group folder, empty for
	// bridged's own) was given up; why is one short line.
	SendFailed(ctx context.Context, chat store.ChatID, folder store.Folder, why string)
	// Sent: a message to chat went out.
	Sent(ctx context.Context, chat store.ChatID)
}

// Rescan looks at every group's pending messages again: after a paused
// group's budget was raised or lifted, or a new day began. It does not
// block.
func (r *Router) Rescan() { r.in.Rescan() }

// paused reports whether g's agent is paused by its budget.
func (r *Router) paused(ctx context.Context, g store.Group) bool {
	return r.budget != nil && r.budget.Paused(ctx, g)
}

// budgetDecided records, when g has a daily budget, what it decided for
// g's waiting messages (those after the handed ones, up to upto): held
// them, or let them through, with the budget and the day's spending as
// they are now, so a message's story tells the decision as it was made;
// the same decision on the same messages is recorded once. grp's lock must
// be held. A failure is logged: it never holds the messages.
func (r *Router) budgetDecided(ctx context.Context, g store.Group, grp *agentrun.Group, upto store.MessageID, paused bool) {
	budget := g.ContainerConfig.BudgetDailyUSD
	if r.budget == nil || budget <= 0 || (grp.Notes.BudgetUpto == upto && grp.Notes.BudgetPaused == paused) {
		return
	}
	now := r.now()
	start, _ := rules.BudgetDay(now, r.cfg.Timezone)
	spent, err := r.db.Usage.GroupCostSince(ctx, g.Folder, start)
	if err == nil {
		verdict := store.BudgetAdmitted
		if paused {
			verdict = store.BudgetPaused
		}
		err = r.db.Budget.Record(ctx, store.BudgetDecision{Folder: g.Folder, Chat: g.Chat, After: grp.Handed(), Upto: upto, Verdict: verdict,
			BudgetUSD: budget, SpentUSD: spent, At: now})
	}
	if err != nil {
		r.log.Warn().Err(err).Str("group", string(g.Folder)).Msg("cannot record the budget's decision; the message's story will lack it")
		return
	}
	grp.Notes.BudgetUpto, grp.Notes.BudgetPaused = upto, paused
}

// spent tells the budget of a cost recorded for g's run, with the group's
// budget as it is now: the run's g is the group as its container started,
// and the owner may have changed the budget since.
func (r *Router) spent(ctx context.Context, g store.Group) {
	if r.budget == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if now, err := r.db.Groups.ByFolder(ctx, g.Folder); err == nil {
		g.ContainerConfig.BudgetDailyUSD = now.ContainerConfig.BudgetDailyUSD
	}
	r.budget.Spent(ctx, g)
}

// alert tells the owner's alerts, if any, through tell.
func (r *Router) alert(tell func(context.Context, Alerts)) {
	if r.alerts == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	tell(ctx, r.alerts)
}

// sendFailed is called by the outbox sender after a row is marked failed.
// The owner's alerts are told under a context of their own (see alert).
func (r *Router) sendFailed(_ context.Context, it store.OutboxItem, err error) {
	r.alert(func(ctx context.Context, a Alerts) {
		a.SendFailed(ctx, it.Chat, it.Group, prompt.Clip(prompt.OneLine(err.Error()), 200))
	})
}

// planted tells the owner, in the main chat, what was moved aside from g
// before its container started (container.SpecBuilder.Planted): what its
// agent had left where claude reads its configuration, which a group that
// is not full does not load.
func (r *Router) planted(g store.Group, rep home.QuarantineReport) {
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	main, err := r.db.Groups.Main(ctx)
	if err != nil {
		r.log.Warn().Err(err).Str("group", string(g.Folder)).Msg("planted configuration not told: no main chat")
		return
	}
	r.notice(main.Chat, main.Folder, prompt.PlantedNotice(g, rep))
}
