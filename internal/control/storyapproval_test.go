package control

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// A message whose turn waited for approvals tells each: which tool call,
// who answered and after how long, or that it still waits.
func TestStoryTellsApprovalWaits(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	a := &Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC}
	if _, err := a.AddGroup(ctx, GroupAdd{Chat: "local:fam", Name: "fam", Folder: "fam"}); err != nil {
		t.Fatal(err)
	}
	id, _, err := db.Messages.Insert(ctx, store.Message{Chat: "local:fam", ExternalID: "1", Sender: "alice", Text: "@Andy clean up", SentAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Sessions.SetCursor(ctx, "fam", id); err != nil {
		t.Fatal(err)
	}
	for _, ap := range []store.Approval{
		{ID: "abcd", Folder: "fam", RequestID: "r1", Tool: "Bash", Subject: "rm -r build", Rule: "Bash(rm -r build)"},
		{ID: "efgh", Folder: "fam", RequestID: "r2", Tool: "Write", Subject: "/etc/x", Rule: "Write(/etc/x)"},
	} {
		if err := db.Tx(ctx, func(tx *store.Tx) error { _, err := tx.Approvals.Add(ctx, ap); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Tx(ctx, func(tx *store.Tx) error { _, err := tx.Approvals.Decide(ctx, "abcd", true, false, "cli"); return err }); err != nil {
		t.Fatal(err)
	}
	st, err := a.Story(ctx, strconv.FormatInt(int64(id), 10), "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range st.Steps {
		if s.Step == "approval" {
			got = append(got, s.State+": "+s.Detail)
		}
	}
	if len(got) != 2 ||
		!strings.HasPrefix(got[0], "allowed: approval abcd (Bash: rm -r build) allowed by the owner (command line) after ") ||
		!strings.HasPrefix(got[1], "waiting: approval efgh (Write: /etc/x) waiting for the owner for ") || !strings.Contains(got[1], "`bridged approve efgh`") {
		t.Errorf("approval steps:\n%s\nwant abcd allowed by the owner after a wait, efgh waiting", strings.Join(got, "\n"))
	}
}
