package main

import (
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/router"
)

func TestLiveFromRouter(t *testing.T) {
	since := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	st := router.Status{
		Queue: groupqueue.Status{
			Running: 2,
			Waiting: []string{"c"},
			Groups:  []groupqueue.GroupStatus{{Group: "a", Run: "messages", Closing: true}, {Group: "b", Run: "task"}},
		},
		Containers: []router.ContainerStatus{
			{Group: "a", Kind: "messages", Since: since},
			{Group: "b", Kind: "task", TaskID: "task-1", Since: since, Busy: true},
		},
		Failures: []router.Failure{
			{Time: since, Group: "d", Kind: "messages", Error: "gave up"},
			{Time: since, Group: "b", Kind: "task", TaskID: "task-9", Error: "crashed"},
			{Time: since, Group: "e", Kind: router.KindBoundary, Error: "groups/e was a symlink, not a directory: moved aside"},
		},
	}
	live := liveFromRouter(st)
	if live.Queue.Active != 2 || live.Queue.Waiting != 1 {
		t.Errorf("got queue %+v; want 2 active, 1 waiting", live.Queue)
	}
	if len(live.Containers) != 2 || !live.Containers[0].Idle || !live.Containers[0].Closing || live.Containers[1].Idle || live.Containers[1].TaskID != "task-1" {
		t.Errorf("got containers %+v; want a idle and closing, b busy with task-1", live.Containers)
	}
	if len(live.Failures) != 3 || live.Failures[0].Where != "d" || live.Failures[0].Kind != "run" || live.Failures[1].Where != "task-9" || live.Failures[1].Kind != "task" ||
		live.Failures[2].Where != "e" || live.Failures[2].Kind != "boundary" || live.Failures[2].Error != st.Failures[2].Error {
		t.Errorf("got failures %+v; want group d's run, task-9 and group e's boundary incident", live.Failures)
	}
}

func TestAPIUsageInStatus(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	u := apiUsage(map[string]credproxy.Usage{
		"zeta":   {Requests: 1, InputTokens: 5},
		"family": {Requests: 3, InputTokens: 1200, OutputTokens: 80, CacheReadInputTokens: 40, CostUSD: 0.0123, Last: at},
	})
	if len(u) != 2 || u[0].Group != "family" || u[0].Requests != 3 || u[0].CacheReadTokens != 40 || u[1].Group != "zeta" {
		t.Fatalf("usage %+v", u)
	}
	var out strings.Builder
	cfg := &config.Config{Timezone: time.UTC}
	printStatus(&out, control.Status{APIUsage: u, Timezone: "UTC"}, cfg)
	for _, want := range []string{"Claude API through the proxy", "family", "3 requests", "1200 in", "80 out", "~$0.0123"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}
