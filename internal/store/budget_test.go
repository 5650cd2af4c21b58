package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The budget's decisions are kept as they were made: one row per change of
// verdict for the same messages, read back by message and by time, and
// pruned with the retention.
func TestBudgetDecisions(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	rec := func(d BudgetDecision) {
		t.Helper()
		if err := db.Budget.Record(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	rec(BudgetDecision{Folder: "fam", Chat: "local:fam", After: 0, Upto: 3, Verdict: BudgetAdmitted, BudgetUSD: 1.5, SpentUSD: 0, At: at(0)})
	rec(BudgetDecision{Folder: "fam", Chat: "local:fam", Verdict: BudgetRefused, BudgetUSD: 1.5, SpentUSD: 1.8, At: at(1)})
	rec(BudgetDecision{Folder: "fam", Chat: "local:fam", After: 3, Upto: 5, Verdict: BudgetPaused, BudgetUSD: 1.5, SpentUSD: 1.8, At: at(2)})
	rec(BudgetDecision{Folder: "fam", Chat: "local:fam", After: 3, Upto: 5, Verdict: BudgetPaused, BudgetUSD: 1.5, SpentUSD: 1.8, At: at(3)}) // looked at again: no change
	rec(BudgetDecision{Folder: "fam", Chat: "local:fam", After: 3, Upto: 6, Verdict: BudgetPaused, BudgetUSD: 1.5, SpentUSD: 1.8, At: at(4)})
	rec(BudgetDecision{Folder: "fam", Chat: "local:fam", After: 3, Upto: 6, Verdict: BudgetAdmitted, BudgetUSD: 5, SpentUSD: 1.8, At: at(5)}) // raised
	if err := db.Budget.Record(ctx, BudgetDecision{Folder: "fam", Verdict: "maybe"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an unknown verdict: %v; want ErrInvalid", err)
	}

	ds, err := db.Budget.DecisionsOn(ctx, "local:fam", 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, string(d.Verdict)+"@"+d.At.UTC().Format("15:04"))
	}
	if want := []string{"paused@09:32", "paused@09:34", "admitted@09:35"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("decisions covering message 5: %v; want %v", got, want)
	}
	if ds[2].BudgetUSD != 5 || ds[0].SpentUSD != 1.8 || ds[0].BudgetUSD != 1.5 {
		t.Errorf("figures %+v; want those recorded", ds)
	}
	// Message 2 was handed at the first decision: the later ones, on the
	// messages after 3, are not its.
	if ds, err := db.Budget.DecisionsOn(ctx, "local:fam", 2, 10); err != nil || len(ds) != 1 || ds[0].Verdict != BudgetAdmitted || ds[0].Upto != 3 {
		t.Errorf("decisions covering message 2: %+v, %v; want the one admission up to 3", ds, err)
	}
	refused, err := db.Budget.Refusals(ctx, "fam", at(0), at(2), 10)
	if err != nil || len(refused) != 1 || refused[0].SpentUSD != 1.8 {
		t.Errorf("refusals: %+v, %v; want the one at 09:31", refused, err)
	}
	if refused, _ := db.Budget.Refusals(ctx, "fam", at(2), time.Time{}, 10); len(refused) != 0 {
		t.Errorf("refusals after 09:32: %+v; want none", refused)
	}

	if _, err := db.Prune(ctx, at(3), 100); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "budget_decisions", ""); n != 2 {
		t.Errorf("%d decisions after pruning those before 09:33; want 2", n)
	}
}
