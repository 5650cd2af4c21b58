package main

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/approvals"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/dashboard"
	"github.com/bridged-app/bridged/internal/store"
)

// `bridged dashboard` prints a one-time login link from the running daemon
// (with the socket only, how to reach it); without a daemon it says so.
func TestDashboardCommand(t *testing.T) {
	home := newHome(t)
	if _, _, err := cli(t, context.Background(), nil, "", "dashboard", "--home", home); err == nil || !strings.Contains(err.Error(), "bridged is not running") {
		t.Errorf("without a daemon: %v; want 'bridged is not running'", err)
	}
	admin := &control.Admin{DB: openDB(t, home), AssistantName: "Andy", Timezone: time.UTC}
	srv, err := control.Listen(control.Options{Socket: filepath.Join(home, "bridged.sock"), Admin: admin, Log: zerolog.Nop(),
		Dashboard: func(srv *control.Server) (control.Dashboard, error) {
			return dashboard.New(dashboard.Options{Source: srv, Admin: admin})
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	out, _, err := cli(t, context.Background(), nil, "", "dashboard", "--home", home)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BRIDGED_DASHBOARD=127.0.0.1:PORT", "ssh -L", "/login?code=", "works once"} {
		if !strings.Contains(out, want) {
			t.Errorf("bridged dashboard printed %q; want %q in it", out, want)
		}
	}
	if !regexp.MustCompile(`/dashboard/[A-Za-z0-9_-]{22,}/login\?code=`).MatchString(out) {
		t.Errorf("bridged dashboard printed %q; want the link under the dashboard's secret path", out)
	}
}

// The dashboard's approvals are the approval service's open requests; a
// decision is recorded as the dashboard's, and deciding again is
// dashboard.ErrDecided (409 on the page), an unknown id store.ErrNotFound.
func TestDashboardApprovalsAdapter(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, newHome(t))
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:fam", Folder: "fam", Tools: store.ToolsAsk}); err != nil {
		t.Fatal(err)
	}
	if err := db.Tx(ctx, func(tx *store.Tx) error {
		_, err := tx.Approvals.Add(ctx, store.Approval{ID: "ab12", Folder: "fam", RequestID: "r1", Tool: "Bash", Subject: "touch x", Rule: "Bash(touch x)"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	svc := approvals.New(db, nil, time.Minute, zerolog.Nop())
	a := dashApprovals{svc}
	open, err := a.List(ctx)
	if err != nil || len(open) != 1 || open[0].ID != "ab12" || open[0].Group != "fam" || open[0].Detail != "touch x" ||
		!open[0].Expires.Equal(open[0].AskedAt.Add(time.Minute)) {
		t.Fatalf("List: %+v, %v; want ab12 for fam expiring a minute after it was asked", open, err)
	}
	if err := a.Decide(ctx, "AB12", true, false, "dashboard"); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Approvals.Get(ctx, "ab12"); err != nil || got.State != store.ApprovalAllowed || got.DecidedBy != "dashboard" {
		t.Errorf("after Decide: %+v, %v; want allowed by dashboard", got, err)
	}
	if open, err := a.List(ctx); err != nil || len(open) != 0 {
		t.Errorf("List after the decision: %+v, %v; want none open", open, err)
	}
	if err := a.Decide(ctx, "ab12", false, false, "dashboard"); !errors.Is(err, dashboard.ErrDecided) || !errors.Is(err, approvals.ErrSettled) ||
		!strings.Contains(err.Error(), "ab12") || !strings.Contains(err.Error(), "allowed by dashboard") {
		t.Errorf("deciding again: %v; want dashboard.ErrDecided, saying ab12 was allowed by dashboard", err)
	}
	if err := a.Decide(ctx, "zz99", true, false, "dashboard"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown id: %v; want store.ErrNotFound", err)
	}
	if got, _ := db.Approvals.Get(ctx, "ab12"); got.State != store.ApprovalAllowed {
		t.Errorf("the refused deny changed the request: %+v", got)
	}
}
