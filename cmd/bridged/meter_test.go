package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/alerts"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// cannedUpstream answers every request in memory: a streamed answer (SSE,
// the CLI's usual) with a usage in message_start and message_delta.
type cannedUpstream struct{}

const cannedSSE = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-5-20250929\",\"usage\":{\"input_tokens\":2000,\"cache_creation_input_tokens\":500,\"cache_read_input_tokens\":30000,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there, how can I help?\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":350}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func (cannedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(strings.NewReader(cannedSSE)),
		Request: r,
	}, nil
}

// meterFixture is a real store with one group under a budget (never
// reached) and the daemon's ledger over it.
func meterFixture(tb testing.TB) (*store.DB, meterLedger) {
	tb.Helper()
	dir := tb.TempDir()
	ctx := context.Background()
	db := storetest.OpenHome(tb, dir)
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:fam", Folder: "fam", Trigger: "@Andy",
		ContainerConfig: store.ContainerConfig{BudgetDailyUSD: 1e9}}); err != nil {
		tb.Fatal(err)
	}
	al, err := alerts.New(alerts.Config{DB: db, State: filepath.Join(dir, "alerts.json"), Home: dir, Log: zerolog.Nop()})
	if err != nil {
		tb.Fatal(err)
	}
	return db, meterLedger{alerts.NewMeter(al)}
}

// The daemon's ledger commits each response and refuses a group at its
// budget, reading the budget afresh: a raise lets the next request through.
func TestMeterLedgerCommitsAndRefuses(t *testing.T) {
	db, l := meterFixture(t)
	ctx := context.Background()
	g, _ := db.Groups.ByFolder(ctx, "fam")
	g.ContainerConfig.BudgetDailyUSD = 0.5
	if err := db.Groups.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	if _, msg := l.Admit(ctx, "fam"); msg != "" {
		t.Fatalf("admit under the budget: %q", msg)
	}
	if err := l.Commit(ctx, "fam", credproxy.Metered{Model: "claude-opus-4-1", CostUSD: 0.6}); err != nil {
		t.Fatal(err)
	}
	if cost, _ := db.Usage.GroupCostSince(ctx, "fam", time.Now().Add(-time.Hour)); cost != 0.6 {
		t.Fatalf("cost today %v; want 0.6", cost)
	}
	if _, msg := l.Admit(ctx, "fam"); !strings.Contains(msg, "daily budget") || !strings.Contains(msg, "$0.60 of $0.50") {
		t.Fatalf("admit over the budget: %q", msg)
	}
	g.ContainerConfig.BudgetDailyUSD = 1
	if err := db.Groups.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	if _, msg := l.Admit(ctx, "fam"); msg != "" {
		t.Fatalf("admit after the raise: %q", msg)
	}
	if err := l.Commit(ctx, "fam", credproxy.Metered{CostUSD: -1}); err == nil {
		t.Error("a negative cost was committed")
	}
}

// BenchmarkMeterOverhead prints what the meter adds to a Claude API
// request: the same streamed request through the credential proxy's
// handler (in-memory upstream, so only the proxy's own work is timed),
// without a ledger and with the daemon's (the budget check and the
// request's reservation before, the ledger commit to the real store, the
// reservation's settling and the budget notices check after). The
// SSE usage parsing and pricing run in both; BenchmarkMeterParse in
// internal/credproxy times them alone.
func BenchmarkMeterOverhead(b *testing.B) {
	db, l := meterFixture(b)
	newProxy := func(ledger credproxy.Ledger) http.Handler {
		p, err := credproxy.New(credproxy.Config{APIKey: "sk-bench", Dir: b.TempDir(), Transport: cannedUpstream{}, Ledger: ledger, Log: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		return p.Handler("fam", "bridged-fam-1")
	}
	bare, metered := newProxy(nil), newProxy(l)
	one := func(h http.Handler) time.Duration {
		req := httptest.NewRequest(http.MethodPost, "/v1/messages?beta=true", strings.NewReader(`{"model":"claude-sonnet-4-5","stream":true,"messages":[]}`))
		w := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(w, req)
		d := time.Since(t0)
		if w.Code != 200 || !strings.Contains(w.Body.String(), "message_stop") {
			b.Fatalf("status %d: %s", w.Code, w.Body.String())
		}
		return d
	}
	n := max(b.N, 2000)
	for range 100 { // warm up
		one(bare)
		one(metered)
	}
	var without, with []time.Duration
	b.ResetTimer()
	for range n { // interleaved, so both see the same machine
		without = append(without, one(bare))
		with = append(with, one(metered))
	}
	b.StopTimer()
	slices.Sort(without)
	slices.Sort(with)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pct := func(s []time.Duration, q int) time.Duration { return s[min(len(s)-1, len(s)*q/100)] }
	added := ms(pct(with, 50) - pct(without, 50))
	b.ReportMetric(added, "ms-added-median")
	var rows int
	cost, _ := db.Usage.GroupCostSince(context.Background(), "fam", time.Now().Add(-time.Hour))
	if cost <= 0 {
		b.Fatal("nothing reached the ledger")
	}
	rows = n + 100
	fmt.Printf("metering, streamed request through the credential proxy (%d requests, each committed to the usage ledger): without ledger median %.3f ms p99 %.3f ms; with the budget check and the ledger commit median %.3f ms p99 %.3f ms; added median %.3f ms (%d ledger rows)\n",
		n, ms(pct(without, 50)), ms(pct(without, 99)), ms(pct(with, 50)), ms(pct(with, 99)), added, rows)
}
