package dashboard

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/approvals"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// The dashboard's approvals are the approval service's open requests; a
// decision is recorded as the dashboard's, and deciding again is
// ErrDecided (409 on the page), an unknown id store.ErrNotFound.
func TestDashboardApprovalsAdapter(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
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
	a := ServiceApprovals(svc)
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
	if err := a.Decide(ctx, "ab12", false, false, "dashboard"); !errors.Is(err, ErrDecided) || !errors.Is(err, approvals.ErrSettled) ||
		!strings.Contains(err.Error(), "ab12") || !strings.Contains(err.Error(), "allowed by dashboard") {
		t.Errorf("deciding again: %v; want ErrDecided, saying ab12 was allowed by dashboard", err)
	}
	if err := a.Decide(ctx, "zz99", true, false, "dashboard"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown id: %v; want store.ErrNotFound", err)
	}
	if got, _ := db.Approvals.Get(ctx, "ab12"); got.State != store.ApprovalAllowed {
		t.Errorf("the refused deny changed the request: %+v", got)
	}
}
