package e2e

import (
	"fmt"
	"regexp"
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

// Forty API requests at once from one group a little under its budget:
// those let through are the ones whose worst cases fit what is left (one
// more at most), the others are refused at once with a 429, and the group's
// cost overshoots its budget by at most one request's reserve.
func TestE2EBudgetCrossingOvershootsByOneReserve(t *testing.T) {
	parallel(t, light)
	up := newMeteredUpstream(t, 3*time.Second)
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.srv.URL}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "--no-trigger", "local:fam")
	const budget = 1.0
	e.mustCLI("groups", "set", "--budget-daily", fmt.Sprint(budget), "fam")
	d := e.start()

	body := `{"model":"claude-opus-4-1","max_tokens":4000,"messages":[]}`
	// Its reserve: a prompt token per body byte as a 1-hour cache write
	// ($30 per million) and all of max_tokens ($75 per million).
	reserve := (float64(len(body))*30 + 4000*75) / 1e6
	each := (float64(len(body)/4)*15 + 4000*75) / 1e6 // what the upstream charges
	calls := fmt.Sprintf(`for i in $(seq 40); do (busybox wget -q -O /dev/null --header 'Content-Type: application/json' --post-data '%s' "$ANTHROPIC_BASE_URL/v1/messages" 2>/tmp/err$i && echo ok || { grep -q 429 /tmp/err$i && echo refused-429 || cat /tmp/err$i; }) >/tmp/res$i & done; wait; cat /tmp/res* | sort | uniq -c | tr '\n' ' '`, body)
	// The pause notice is told as the proxy commits the crossing, before or
	// after the turn's reply.
	var got string
	for _, m := range e.waitOut("local:fam", e.post("local:fam", "fake:bash "+calls), 2, 180*time.Second) {
		if !strings.Contains(m.Text, "used up today's budget") {
			got = m.Text
		}
	}
	t.Logf("the agent's 40 calls: %s", got)
	cost, _, _ := groupCost(t, e, "fam")
	let := int(cost/each + 0.5)
	t.Logf("budget $%v, reserve $%v, each $%v: fam's cost $%v (%d let through)", budget, reserve, each, cost, let)
	if cost > budget+reserve+1e-6 {
		t.Errorf("fam's cost is $%v against its budget of $%v: over by more than one request's reserve ($%v)", cost, budget, reserve)
	}
	counts := regexp.MustCompile(fmt.Sprintf(`^\s*%d ok\s+%d refused-429\s*$`, let, 40-let))
	if cost < budget || !counts.MatchString(got) {
		t.Errorf("the agent's calls: %q; want %d answered and the other %d refused with a 429, crossing the budget", got, let, 40-let)
	}
	d.stop(t)
}
