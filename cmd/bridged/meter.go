package main

import (
	"context"
	"sync"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/alerts"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/store"
)

// meterLedger is the credential proxy's ledger: each metered response is
// committed to the store's usage ledger, then the group's budget is
// checked (the 80 % and 100 % notices); a request of a group at its budget
// is refused, and the proxy reserves each request's worst case against
// what is left. The group and its budget are read from the store before each
// request, so `groups set --budget-daily` applies to the next request; the
// check after it uses the group as read before it.
type meterLedger struct {
	db  *store.DB
	al  *alerts.Alerts
	log zerolog.Logger
	// admitted holds each group as read by its last Admit (store.Group).
	admitted sync.Map
}

var _ credproxy.Ledger = (*meterLedger)(nil)

func (m *meterLedger) Admit(ctx context.Context, group string) (credproxy.Allowance, string) {
	g, err := m.db.Groups.ByFolder(ctx, store.Folder(group))
	if err != nil {
		m.admitted.Delete(group)
		// A removed group's container is on its way out; a broken read
		// never stops an agent (logged).
		m.log.Warn().Err(err).Str("group", group).Msg("cannot read the group; its API request is not checked against a budget")
		return credproxy.Allowance{}, ""
	}
	m.admitted.Store(group, g)
	budget := g.ContainerConfig.BudgetDailyUSD
	if budget <= 0 {
		return credproxy.Allowance{}, ""
	}
	cost, err := m.al.CostToday(ctx, g.Folder)
	if err != nil {
		m.log.Error().Err(err).Str("group", group).Msg("cannot read today's cost; budget not applied")
		return credproxy.Allowance{}, ""
	}
	if rules.OverBudget(budget, cost) {
		// The refusal is recorded as it is made, for the story of the
		// message whose turn it ends (`bridged why`).
		if err := m.db.Budget.Record(ctx, store.BudgetDecision{Folder: g.Folder, Chat: g.Chat, Verdict: store.BudgetRefused,
			BudgetUSD: budget, SpentUSD: cost}); err != nil {
			m.log.Warn().Err(err).Str("group", group).Msg("cannot record the budget's refusal; the message's story will lack it")
		}
		return credproxy.Allowance{BudgetUSD: budget, SpentUSD: cost}, m.al.RefusalAt(ctx, g, cost)
	}
	return credproxy.Allowance{BudgetUSD: budget, SpentUSD: cost}, ""
}

func (m *meterLedger) Commit(ctx context.Context, group string, u credproxy.Metered) error {
	if err := m.db.Usage.AddAPI(ctx, store.APIUsage{
		Folder: store.Folder(group), At: u.At, Model: u.Model,
		InputTokens: u.Tokens.Input, OutputTokens: u.Tokens.Output,
		CacheWriteTokens: u.Tokens.CacheWrite, CacheReadTokens: u.Tokens.CacheRead,
		CostUSD: u.CostUSD,
	}); err != nil {
		return err
	}
	g, ok := m.admitted.Load(group)
	if !ok {
		got, err := m.db.Groups.ByFolder(ctx, store.Folder(group))
		if err != nil {
			return nil // committed; a group removed meanwhile has no budget to tell of
		}
		g = got
	}
	m.al.Spent(ctx, g.(store.Group))
	return nil
}
