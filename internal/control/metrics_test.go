package control

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// metricValue returns the value of the sample line that starts with
// series (name and labels) in text.
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: value %q: %v", series, v, err)
			}
			return f
		}
	}
	t.Fatalf("metrics lack %s; got:\n%s", series, text)
	return 0
}

// /metrics carries the Go runtime's own figures, the daemon's open file
// descriptors, and each group's cost, budget and messages of today.
func TestMetricsRuntimeAndGroups(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	if _, err := h.client.AddGroup(ctx, GroupAdd{Chat: "local:fam", Name: "fam", Folder: "fam"}); err != nil {
		t.Fatal(err)
	}
	budget := 2.5
	if _, err := h.client.UpdateGroup(ctx, "fam", GroupPatch{BudgetDailyUSD: &budget}); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"one", "two"} {
		if _, err := h.client.PostMessage(ctx, "local:fam", "alice", text); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := h.db.Messages.Insert(ctx, store.Message{Chat: "local:fam", ExternalID: "out-1", Text: "reply", IsBot: true, SentAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := h.db.Usage.AddAPI(ctx, store.APIUsage{Folder: "fam", CostUSD: 3}); err != nil {
		t.Fatal(err)
	}
	if err := h.db.Usage.AddAPI(ctx, store.APIUsage{Folder: "main", CostUSD: 0.5}); err != nil {
		t.Fatal(err)
	}
	// Descriptors the test holds open show in the daemon's (this
	// process's) count.
	before, err := h.client.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	for range 20 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	after, err := h.client.Metrics(ctx)
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if a, b := metricValue(t, after, "process_open_fds"), metricValue(t, before, "process_open_fds"); a < b+20 {
		t.Errorf("process_open_fds %v after opening 20 files, %v before; want it to grow by at least 20", a, b)
	}

	for series, want := range map[string]float64{
		`bridged_group_cost_usd_today{group="fam"}`:                 3,
		`bridged_group_cost_usd_today{group="main"}`:                0.5,
		`bridged_group_budget_usd_daily{group="fam"}`:               2.5,
		`bridged_group_budget_paused{group="fam"}`:                  1,
		`bridged_group_budget_paused{group="main"}`:                 0,
		`bridged_group_messages_today{group="fam",direction="in"}`:  2,
		`bridged_group_messages_today{group="fam",direction="out"}`: 1,
		`bridged_group_messages_today{group="main",direction="in"}`: 0,
	} {
		if got := metricValue(t, after, series); got != want {
			t.Errorf("%s = %v; want %v", series, got, want)
		}
	}
	if strings.Contains(after, `bridged_group_budget_usd_daily{group="main"}`) {
		t.Errorf("main has no budget, but the metrics give it one:\n%s", after)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes", "go_gc_heap_goal_bytes", "process_max_fds", "process_resident_memory_bytes"} {
		if v := metricValue(t, after, name); v <= 0 {
			t.Errorf("%s = %v; want a positive figure", name, v)
		}
	}
	metricValue(t, after, "go_gc_cycles_total")
	for _, typ := range []string{"# TYPE go_gc_cycles_total counter\n", "# TYPE go_goroutines gauge\n", "# TYPE bridged_group_messages_today gauge\n"} {
		if !strings.Contains(after, typ) {
			t.Errorf("metrics lack %q", typ)
		}
	}
	// Every sample line is a name, optional labels and a number.
	line := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eE]+$|^# (HELP|TYPE) |^$`)
	for _, l := range strings.Split(after, "\n") {
		if !line.MatchString(l) {
			t.Errorf("not a Prometheus text line: %q", l)
		}
	}
}
