package e2e

import (
	"strings"
	"testing"
	"time"
)

// A group whose daily budget is used up is paused with one notice in the
// group and one in the main chat; its next message waits, and is answered
// as soon as the owner lifts the budget with `groups set`.
func TestE2EBudgetPauseLiftedByGroupsSet(t *testing.T) {
	parallel(t, light)
	// One metered API call of the turn costs more than this.
	_, e := budgetEnv(t, "2m", "0.0001")
	d := e.start()

	mainFrom := lastID(e, "local:main")
	// The notice is told as the proxy commits the call, which may be
	// before or after the turn's reply.
	id := e.post("local:fam", "fake:api first")
	out := e.waitOut("local:fam", id, 2, 90*time.Second)
	if texts := out[0].Text + " | " + out[1].Text; !strings.Contains(texts, "pausing until midnight") || (out[0].Text != "ok" && out[1].Text != "ok") {
		t.Fatalf("fam got %q; want the reply and the pause notice", texts)
	}
	if told := e.waitOut("local:main", mainFrom, 1, 30*time.Second); !strings.Contains(told[0].Text, "fam has used up its daily budget") {
		t.Errorf("main chat got %q; want the owner told of the pause", told[0].Text)
	}
	if list := e.mustCLI("groups", "list"); !strings.Contains(list, "(paused)") {
		t.Errorf("groups list:\n%s\nwant fam shown paused", list)
	}

	waiting := e.post("local:fam", "fake:reply second")
	noOutbound(t, e, "local:fam", waiting, 4*time.Second, "paused by its budget")

	e.mustCLI("groups", "set", "--budget-daily", "0", "fam")
	if got := e.waitOut("local:fam", waiting, 1, 60*time.Second)[0].Text; got != "second" {
		t.Errorf("after lifting the budget fam got %q; want the kept message answered", got)
	}
	if told := e.outSince("local:main", mainFrom); len(told) != 1 {
		t.Errorf("main chat got %d alerts; want 1", len(told))
	}
	d.stop(t)
}
