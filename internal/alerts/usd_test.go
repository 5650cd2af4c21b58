package alerts

import (
	"strings"
	"testing"
)

// A budget below a cent is told in amounts that make sense: "<$0.01",
// never "$0.00 of $0.00".
func TestBudgetNoticeBelowACent(t *testing.T) {
	e := newEnv(t, 0.0001)
	a, p := e.open(Config{})
	e.spend(a, 0.000188)
	posts := p.take()
	if len(posts) == 0 {
		t.Fatal("no notice at 188 % of the budget")
	}
	for _, m := range posts {
		if strings.Contains(m.text, "$0.00") || !strings.Contains(m.text, "<$0.01 of <$0.01") {
			t.Errorf("notice %q; want the amounts said as <$0.01", m.text)
		}
	}
}
