package main

import (
	"sort"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/router"
	"github.com/bridged-app/bridged/internal/rules"
)

// liveFromRouter turns the router's status into the control API's live part.
func liveFromRouter(st router.Status) control.Live {
	live := control.Live{Queue: control.QueueStatus{Active: st.Queue.Running, Waiting: len(st.Queue.Waiting)}}
	closing := make(map[string]bool)
	for _, g := range st.Queue.Groups {
		closing[g.Group] = g.Closing
	}
	for _, c := range st.Containers {
		live.Containers = append(live.Containers, control.ContainerStatus{
			Group: c.Group, Kind: c.Kind, TaskID: c.TaskID, Since: c.Since, Idle: !c.Busy, Closing: closing[c.Group],
		})
	}
	for _, f := range st.Failures {
		where, kind := f.Group, "run"
		switch {
		case f.Kind == router.KindBoundary:
			kind = f.Kind
		case f.TaskID != "":
			where, kind = f.TaskID, "task"
		}
		live.Failures = append(live.Failures, control.Failure{Time: f.Time, Kind: kind, Where: where, Error: f.Error})
	}
	return live
}

// apiUsage lists the proxy's per-group tally, by group.
func apiUsage(m map[string]credproxy.Usage) []control.APIUsage {
	out := make([]control.APIUsage, 0, len(m))
	for g, u := range m {
		out = append(out, control.APIUsage{Group: g, Requests: u.Requests, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadInputTokens, CacheCreationTokens: u.CacheCreationInputTokens, CostUSD: rules.RoundUSD(u.CostUSD), Last: u.Last})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}
