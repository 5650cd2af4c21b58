package store

import (
	"context"
	"errors"
	"testing"
)

func TestApprovalDecidedOnce(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	err := db.Tx(ctx, func(tx *Tx) error {
		_, err := tx.AddApproval(ctx, Approval{ID: "abcd", Folder: "fam", RequestID: "r1", Tool: "Bash", Subject: "rm x", Rule: "Bash(rm x)"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Tx(ctx, func(tx *Tx) error {
		_, err := tx.AddApproval(ctx, Approval{ID: "efgh", Folder: "fam", RequestID: "r1", Tool: "Bash"})
		return err
	})
	if !errors.Is(err, ErrExists) {
		t.Errorf("a second approval for the same request = %v; want ErrExists", err)
	}
	decide := func(allow bool) bool {
		var changed bool
		if err := db.Tx(ctx, func(tx *Tx) error {
			var err error
			changed, err = tx.DecideApproval(ctx, "abcd", allow, false, "cli")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return changed
	}
	if !decide(true) {
		t.Fatal("the first decision changed nothing")
	}
	if decide(false) {
		t.Fatal("a second decision changed the request")
	}
	a, err := db.GetApproval(ctx, "abcd")
	if err != nil || a.State != ApprovalAllowed || a.DecidedBy != "cli" || a.DecidedAt.IsZero() {
		t.Errorf("got %+v, %v; want allowed by cli", a, err)
	}
}

// The tool-profile notice is owed only when groups other than the main
// one existed before profiles, and is taken once.
func TestTakeNoticeOnce(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	if told, err := db.TakeNotice(ctx, "tool_profiles"); err != nil || told {
		t.Fatalf("fresh store: TakeNotice = %v, %v; want nothing owed", told, err)
	}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO pending_notices (name) VALUES ('tool_profiles')`); err != nil {
		t.Fatal(err)
	}
	if told, _ := db.TakeNotice(ctx, "tool_profiles"); !told {
		t.Fatal("the pending notice was not taken")
	}
	if told, _ := db.TakeNotice(ctx, "tool_profiles"); told {
		t.Fatal("the notice was taken twice")
	}
}
