package ipchost

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipc/ipctest"
	"github.com/bridged-app/bridged/internal/store"
)

// floodFiles is the size of the flood (issue 9: 40,000 request files from one
// group made another group's send_message time out).
const floodFiles = 40000

// minToolCalls is the least number of round trips measured per condition,
// whatever b.N is (make bench runs one iteration).
const minToolCalls = 200

// BenchmarkToolCallUnderFlood measures a group's tool call as its MCP tool
// sees it: from the request file written to its response file appearing
// (waited for with ipctest.WaitFor, as the tool does), first with no other
// traffic, then while another group's 40,000 request files are being worked
// through. Samples under flood are taken only while the flooding group's
// requests directory still holds files. Real store, real files, the host as
// the daemon runs it.
func BenchmarkToolCallUnderFlood(b *testing.B) {
	e := newEnv(b)
	h, err := New(Config{Home: e.home, Timezone: e.loc, AssistantName: "Andy"}, e.db, e.msg, e.waker, e.refresh, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	e.h = h
	floodDir := filepath.Join(e.home, "data", "ipc", "flood", ipc.RequestsDir)
	writeFlood(b, floodDir, floodFiles)
	var once sync.Once
	flooding := make(chan struct{})
	h.handled = func(f store.Folder, _ string) {
		if f == "flood" {
			once.Do(func() { close(flooding) })
		}
	}
	e.startHost(b)

	n := max(b.N, minToolCalls)
	roundTrip(b, e, "work") // warm up: the group is watched
	b.ResetTimer()
	idle := make([]time.Duration, 0, n)
	for range n {
		idle = append(idle, roundTrip(b, e, "work"))
	}

	// The flooding group is registered with its 40,000 files already there.
	ctx := context.Background()
	if _, err := e.db.Groups.Add(ctx, store.Group{Chat: "local:flood", Folder: "flood", Name: "Flood", Trigger: "@Andy", RequiresTrigger: true}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := h.SyncGroups(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-flooding:
	case <-time.After(30 * time.Second):
		b.Fatal("the flood was not being handled within 30s")
	}
	flood := make([]time.Duration, 0, n)
	for range n {
		if !holdsFiles(b, floodDir) {
			break
		}
		flood = append(flood, roundTrip(b, e, "work"))
	}
	left := countFiles(b, floodDir)
	b.StopTimer()
	if len(flood) < minToolCalls/4 {
		b.Fatalf("only %d tool calls measured before the flood was worked through; want %d", len(flood), minToolCalls/4)
	}

	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pct := func(lat []time.Duration, p int) float64 {
		slices.Sort(lat)
		return ms(lat[min(len(lat)-1, len(lat)*p/100)])
	}
	idleMed, idleP99 := pct(idle, 50), pct(idle, 99)
	floodMed, floodP99 := pct(flood, 50), pct(flood, 99)
	b.ReportMetric(idleMed, "ms-median-idle")
	b.ReportMetric(idleP99, "ms-p99-idle")
	b.ReportMetric(floodMed, "ms-median-flood")
	b.ReportMetric(floodP99, "ms-p99-flood")
	b.ReportMetric(floodMed-idleMed, "ms-added-median")
	fmt.Printf("tool call round trip (request file → response file), %d calls idle: median %.2f ms, p99 %.2f ms; "+
		"%d calls while another group's %d requests were worked through (%d left after %.1f s): median %.2f ms, p99 %.2f ms (+%.2f ms median)\n",
		len(idle), idleMed, idleP99, len(flood), floodFiles, left, time.Since(start).Seconds(), floodMed, floodP99, floodMed-idleMed)
}

// roundTrip writes one send_message request for folder and waits for its
// response file.
func roundTrip(b *testing.B, e *env, folder store.Folder) time.Duration {
	req := ipc.NewRequest(ipc.SendMessageArgs{Text: "ping"})
	respDir := filepath.Join(e.home, "data", "ipc", string(folder), ipc.ResponsesDir)
	resp := filepath.Join(respDir, req.FileName())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	if err := ipc.WriteJSON(filepath.Join(e.home, "data", "ipc", string(folder), ipc.RequestsDir), req.FileName(), req); err != nil {
		b.Fatal(err)
	}
	if err := ipctest.WaitFor(ctx, respDir, func() bool { return exists(resp) }); err != nil {
		b.Fatalf("%s's tool call: %v", folder, err)
	}
	return time.Since(t0)
}
