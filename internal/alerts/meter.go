package alerts

import (
	"context"
	"sync"

	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/store"
)

// Meter applies the daily budgets to the agents' Claude API requests (the
// credential proxy's ledger, through a one-line adapter in the daemon):
// Admit before a request, Commit after its response. A request of a group at
// its budget is refused; each metered response is committed to the store's
// usage ledger, then the group's budget is checked (the 80 % and 100 %
// notices, Spent). The group and its budget are read from the store before
// each request, so `groups set --budget-daily` applies to the next request;
// the check after it uses the group as read before it. Make it with
// NewMeter.
type Meter struct {
	a *Alerts
	// admitted holds each group as read by its last Admit (store.Group).
	admitted sync.Map
}

// NewMeter returns the meter of a's budgets.
func NewMeter(a *Alerts) *Meter { return &Meter{a: a} }

// Admit is asked before a request of folder's agent: the group's daily
// budget and what it spent today (both 0 for no budget), and the refusal's
// message when it is at its budget ("" lets the request through). A group
// that cannot be read is let through unchecked (logged): a removed group's
// container is on its way out, and a broken read never stops an agent.
func (m *Meter) Admit(ctx context.Context, folder store.Folder) (budget, spent float64, refusal string) {
	db, log := m.a.cfg.DB, m.a.log
	g, err := db.Groups.ByFolder(ctx, folder)
	if err != nil {
		m.admitted.Delete(folder)
		log.Warn().Err(err).Str("group", string(folder)).Msg("cannot read the group; its API request is not checked against a budget")
		return 0, 0, ""
	}
	m.admitted.Store(folder, g)
	budget = g.ContainerConfig.BudgetDailyUSD
	if budget <= 0 {
		return 0, 0, ""
	}
	cost, err := m.a.CostToday(ctx, g.Folder)
	if err != nil {
		log.Error().Err(err).Str("group", string(folder)).Msg("cannot read today's cost; budget not applied")
		return 0, 0, ""
	}
	if rules.OverBudget(budget, cost) {
		// The refusal is recorded as it is made, for the story of the
		// message whose turn it ends (`bridged why`).
		if err := db.Budget.Record(ctx, store.BudgetDecision{Folder: g.Folder, Chat: g.Chat, Verdict: store.BudgetRefused,
			BudgetUSD: budget, SpentUSD: cost}); err != nil {
			log.Warn().Err(err).Str("group", string(folder)).Msg("cannot record the budget's refusal; the message's story will lack it")
		}
		return budget, cost, m.a.RefusalAt(ctx, g, cost)
	}
	return budget, cost, ""
}

// Commit records u in the usage ledger, then checks the budget of its group
// (as its last Admit read it).
func (m *Meter) Commit(ctx context.Context, u store.APIUsage) error {
	db := m.a.cfg.DB
	if err := db.Usage.AddAPI(ctx, u); err != nil {
		return err
	}
	g, ok := m.admitted.Load(u.Folder)
	if !ok {
		got, err := db.Groups.ByFolder(ctx, u.Folder)
		if err != nil {
			return nil // committed; a group removed meanwhile has no budget to tell of
		}
		g = got
	}
	m.a.Spent(ctx, g.(store.Group))
	return nil
}
