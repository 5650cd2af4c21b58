package main

import (
	"context"

	"github.com/bridged-app/bridged/internal/alerts"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/store"
)

// meterLedger is the credential proxy's ledger: the budgets' meter
// (alerts.Meter) in the proxy's types.
type meterLedger struct{ m *alerts.Meter }

var _ credproxy.Ledger = meterLedger{}

func (l meterLedger) Admit(ctx context.Context, group string) (credproxy.Allowance, string) {
	budget, spent, refusal := l.m.Admit(ctx, store.Folder(group))
	return credproxy.Allowance{BudgetUSD: budget, SpentUSD: spent}, refusal
}

func (l meterLedger) Commit(ctx context.Context, group string, u credproxy.Metered) error {
	return l.m.Commit(ctx, store.APIUsage{
		Folder: store.Folder(group), At: u.At, Model: u.Model,
		InputTokens: u.Tokens.Input, OutputTokens: u.Tokens.Output,
		CacheWriteTokens: u.Tokens.CacheWrite, CacheReadTokens: u.Tokens.CacheRead,
		CostUSD: u.CostUSD,
	})
}
