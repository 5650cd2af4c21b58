package main

import (
	"context"
	"sync"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/alerts"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/store"
)

// meterLedger is the credential proxy's ledger: each metered response is
// committed to the store's usage ledger, then the group's budget is
// checked (the 80 % and 100 % notices); a request of a group at its budget
// is refused. The group and its budget are read from the store before each
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

func (m *meterLedger) Admit(ctx context.Context, group string) string {
	g, err := m.db.GetGroupByFolder(ctx, store.Folder(group))
	if err != nil {
		m.admitted.Delete(group)
		// A removed group's container is on its way out; a broken read
		// never stops an agent (logged).
		m.log.Warn().Err(err).Str("group", group).Msg("cannot read the group; its API request is not checked against a budget")
		return ""
	}
	m.admitted.Store(group, g)
	return m.al.Refusal(ctx, g)
}

func (m *meterLedger) Commit(ctx context.Context, group string, u credproxy.Metered) error {
	if err := m.db.AddAPIUsage(ctx, store.APIUsage{
		Folder: store.Folder(group), At: u.At, Model: u.Model,
		InputTokens: u.Tokens.Input, OutputTokens: u.Tokens.Output,
		CacheWriteTokens: u.Tokens.CacheWrite, CacheReadTokens: u.Tokens.CacheRead,
		CostUSD: u.CostUSD,
	}); err != nil {
		return err
	}
	g, ok := m.admitted.Load(group)
	if !ok {
		got, err := m.db.GetGroupByFolder(ctx, store.Folder(group))
		if err != nil {
			return nil // committed; a group removed meanwhile has no budget to tell of
		}
		g = got
	}
	m.al.Spent(ctx, g.(store.Group))
	return nil
}
