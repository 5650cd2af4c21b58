package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/alerts"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/store"
)

// meterLedger is the credential proxy's ledger: each metered response is
// committed to the store's usage ledger, then the group's budget is
// checked (the 80 % and 100 % notices); a request of a group at its budget
// is refused. The group and its budget are read from the store at each
// call, so `groups set --budget-daily` applies to the next request.
type meterLedger struct {
	db  *store.DB
	al  *alerts.Alerts
	log zerolog.Logger
}

var _ credproxy.Ledger = meterLedger{}

func (m meterLedger) Admit(ctx context.Context, group string) string {
	g, err := m.db.GetGroupByFolder(ctx, store.Folder(group))
	if err != nil {
		// A removed group's container is on its way out; a broken read
		// never stops an agent (logged).
		m.log.Warn().Err(err).Str("group", group).Msg("cannot read the group; its API request is not checked against a budget")
		return ""
	}
	return m.al.Refusal(ctx, g)
}

func (m meterLedger) Commit(ctx context.Context, group string, u credproxy.Metered) error {
	if err := m.db.AddAPIUsage(ctx, store.APIUsage{
		Folder: store.Folder(group), At: u.At, Model: u.Model,
		InputTokens: u.Tokens.Input, OutputTokens: u.Tokens.Output,
		CacheWriteTokens: u.Tokens.CacheWrite, CacheReadTokens: u.Tokens.CacheRead,
		CostUSD: u.CostUSD,
	}); err != nil {
		return err
	}
	g, err := m.db.GetGroupByFolder(ctx, store.Folder(group))
	if err != nil {
		return nil // committed; a group removed meanwhile has no budget to tell of
	}
	m.al.Spent(ctx, g)
	return nil
}
