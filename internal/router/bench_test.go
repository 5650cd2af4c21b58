package router

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// BenchmarkReplyLatency measures the time from an agent's result event to
// its outbox row being marked sent (fake runtime, fake channel, real store).
func BenchmarkReplyLatency(b *testing.B) {
	h := newHarness(b, nil)
	sent := make(chan struct{}, 1)
	h.r.onSent = func(store.OutboxItem) { sent <- struct{}{} }
	h.start()
	h.post(mainChat, "hello")
	run := h.nextRun()

	// At least 200 replies, whatever b.N is, so the percentiles mean something.
	var lat []time.Duration
	for i := range max(b.N, 200) {
		t0 := time.Now()
		run.result(fmt.Sprintf("reply %d", i))
		select {
		case <-sent:
		case <-time.After(testWait):
			b.Fatalf("reply %d not sent within %s", i, testWait)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	med, p99 := ms(lat[len(lat)/2]), ms(lat[min(len(lat)-1, len(lat)*99/100)])
	b.ReportMetric(med, "median-ms")
	b.ReportMetric(p99, "p99-ms")
	fmt.Printf("reply latency (result event → outbox row sent), %d replies: median %.2f ms, p99 %.2f ms\n", len(lat), med, p99)
}
