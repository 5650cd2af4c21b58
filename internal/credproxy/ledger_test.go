package credproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/testlog"
)

// fakeLedger records commits and refuses what over says, or a group whose
// commits reached budget.
type fakeLedger struct {
	mu      sync.Mutex
	commits []Metered
	groups  []string
	over    string
	budget  float64
	spent   float64       // the commits' cost
	added   chan struct{} // one send per commit, if set
}

func (l *fakeLedger) Admit(_ context.Context, group string) (Allowance, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := Allowance{BudgetUSD: l.budget, SpentUSD: l.spent}
	if l.over == "" && l.budget > 0 && l.spent >= l.budget {
		return a, "used up"
	}
	return a, l.over
}

func (l *fakeLedger) Commit(_ context.Context, group string, m Metered) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commits = append(l.commits, m)
	l.groups = append(l.groups, group)
	l.spent += m.CostUSD
	if l.added != nil {
		l.added <- struct{}{}
	}
	return nil
}

func (l *fakeLedger) got() []Metered {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Metered(nil), l.commits...)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestPricingTable(t *testing.T) {
	for _, c := range []struct {
		model string
		tok   Tokens
		want  float64
		known bool
	}{
		{"claude-sonnet-4-5-20250929", Tokens{Input: 100_000, Output: 1e6}, 0.3 + 15, true},
		{"claude-opus-4-5", Tokens{Input: 1e6, CacheWrite: 1e6, CacheRead: 1e6}, 5 + 6.25 + 0.5, true},
		{"claude-opus-4-1-20250805", Tokens{Output: 1e6}, 75, true},
		{"claude-haiku-4-5-20251001", Tokens{CacheWrite: 2e6, CacheWrite1h: 1e6}, 1.25 + 2, true},
		{"claude-3-5-haiku-latest", Tokens{Input: 1e6}, 0.8, true},
		{"claude-opus-5-5", Tokens{Input: 1e6, CacheRead: 1e6, CacheWrite: 1e6, Output: 1e6}, 4 + 0.2 + 5 + 20, true},
		{"claude-sonnet-4-6[1m]", Tokens{Input: 500_000}, 1.5, true},
		{"claude-fable-5-1", Tokens{CacheRead: 1e6}, 0.25, true},
		// Haiku 5.5 costs more above 100k prompt tokens, on every token.
		{"claude-haiku-5-5", Tokens{Input: 100_000, Output: 1e6}, 0.01 + 0.5, true},
		{"claude-haiku-5-5", Tokens{Input: 100_001, Output: 1e6}, 100_001*0.5/1e6 + 2.5, true},
		// Fast mode: the highest published multiplier.
		{"claude-opus-5", Tokens{Output: 1e6, Fast: true}, 6 * 25, true},
		// Above 200k prompt tokens Sonnet 4.5 is billed at the long-context rate.
		{"claude-sonnet-4-5", Tokens{Input: 150_000, CacheRead: 100_000, Output: 1000}, (150_000*6 + 100_000*0.6 + 1000*22.5) / 1e6, true},
		{"claude-haiku-4-5", Tokens{WebSearches: 3}, 0.03, true},
		// Unknown: the priciest family.
		{"claude-mythical-9", Tokens{Input: 1e6, Output: 1e6}, 15 + 75, false},
		{"claude-fable-5-2", Tokens{Output: 1e6}, 75, false},
		{"", Tokens{Input: 1e6}, 15, false},
		{"claude-opus-4-5", Tokens{Input: -5, Output: -1}, 0, true},
	} {
		f, known := FamilyOf(c.model)
		if got := f.Cost(c.tok); !near(got, c.want) || known != c.known {
			t.Errorf("%s %+v: $%v known %v; want $%v known %v", c.model, c.tok, got, known, c.want, c.known)
		}
	}
	if priciest.Name != "claude-opus-4-1" && priciest.Price.Output != 75 {
		t.Errorf("priciest family %+v", priciest)
	}
}

// Each response is committed once, priced, as it ends: plain JSON, SSE (the
// delta's cumulative counts replacing the start's), and a stream cut short.
func TestMeterCommitsEachResponse(t *testing.T) {
	l := &fakeLedger{added: make(chan struct{}, 10)}
	cut := make(chan struct{})
	_, c, _ := newProxy(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.RawQuery {
		case "json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"model":"claude-opus-4-1-20250805","usage":{"input_tokens":1000,"output_tokens":2000,"cache_creation_input_tokens":3000,"cache_read_input_tokens":4000,"cache_creation":{"ephemeral_1h_input_tokens":1000}}}`)
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			sseEvent(w, "message_start", `{"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":1}}}`)
			sseEvent(w, "message_delta", `{"type":"message_delta","usage":{"output_tokens":500}}`)
			sseEvent(w, "message_stop", `{"type":"message_stop"}`)
		case "cut":
			w.Header().Set("Content-Type", "text/event-stream")
			sseEvent(w, "message_start", `{"type":"message_start","message":{"model":"claude-unheard-of","usage":{"input_tokens":100,"output_tokens":1}}}`)
			<-cut
			panic(http.ErrAbortHandler)
		}
	}, Config{APIKey: realKey, Ledger: l})
	for _, q := range []string{"json", "sse"} {
		readAll(t, post(t, c, "/v1/messages?"+q, "{}", nil))
	}
	resp := post(t, c, "/v1/messages?cut", "{}", nil)
	close(cut)
	_, _ = io.ReadAll(resp.Body) // cut short
	resp.Body.Close()
	for range 3 {
		select {
		case <-l.added:
		case <-time.After(30 * time.Second):
			t.Fatalf("commits %+v; want 3", l.got())
		}
	}
	got := l.got()
	if len(got) != 3 {
		t.Fatalf("commits %+v; want 3", got)
	}
	want := []struct {
		model string
		tok   Tokens
		cost  float64
	}{
		{"claude-opus-4-1-20250805", Tokens{Input: 1000, Output: 2000, CacheWrite: 3000, CacheWrite1h: 1000, CacheRead: 4000}, (1000*15 + 2000*75 + 2000*18.75 + 1000*30 + 4000*1.5) / 1e6},
		{"claude-sonnet-4-5", Tokens{Input: 10, Output: 500, CacheWrite: 20, CacheRead: 30}, (10*3 + 500*15 + 20*3.75 + 30*0.3) / 1e6},
		{"claude-unheard-of", Tokens{Input: 100, Output: 1}, (100*15 + 1*75) / 1e6},
	}
	for i, w := range want {
		if got[i].Model != w.model || got[i].Tokens != w.tok || !near(got[i].CostUSD, w.cost) || l.groups[i] != "family" {
			t.Errorf("commit %d: %+v for %s; want %s %+v $%v", i, got[i], l.groups[i], w.model, w.tok, w.cost)
		}
	}
}

// A group at its budget is refused before its request leaves, in the API's
// shape, with a 429 the SDK does not retry; a lifted budget lets the next
// one through at once.
func TestBudgetRefusal429(t *testing.T) {
	l := &fakeLedger{over: "bridged: the daily budget of group family is used up"}
	_, c, s := newProxy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"model":"claude-haiku-4-5","usage":{"input_tokens":1,"output_tokens":1}}`)
	}, Config{APIKey: realKey, Ledger: l})
	resp := post(t, c, "/v1/messages", "{}", nil)
	body := readAll(t, resp)
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != http.StatusTooManyRequests ||
		e.Type != "error" || e.Error.Type != "rate_limit_error" || e.Error.Message != l.over || resp.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("refusal: %d %v %q (%v)", resp.StatusCode, resp.Header, body, err)
	}
	s.mu.Lock()
	n := len(s.reqs)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("the upstream got %d requests over the budget", n)
	}
	// count_tokens costs nothing: not refused.
	if resp := post(t, c, "/v1/messages/count_tokens", "{}", nil); readAll(t, resp) == "" || resp.StatusCode != 200 {
		t.Errorf("count_tokens over the budget: %d", resp.StatusCode)
	}
	l.mu.Lock()
	l.over = ""
	l.mu.Unlock()
	if resp := post(t, c, "/v1/messages", "{}", nil); readAll(t, resp) == "" || resp.StatusCode != 200 {
		t.Errorf("after the budget was lifted: %d", resp.StatusCode)
	}
}

// BenchmarkMeterParse prints what reading the usage out of a streamed
// response and pricing it costs per response (no ledger: see
// BenchmarkMeterOverhead in cmd/bridged for the commit).
func BenchmarkMeterParse(b *testing.B) {
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-5-20250929\",\"usage\":{\"input_tokens\":2000,\"cache_creation_input_tokens\":500,\"cache_read_input_tokens\":30000,\"output_tokens\":1}}}\n\n" +
		strings.Repeat("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there, how can I help?\"}}\n\n", 50) +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":350}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	p, err := New(Config{APIKey: "sk-bench", Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	const inner = 5000
	buf := make([]byte, 4096)
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		for range inner {
			m := &meter{rc: io.NopCloser(strings.NewReader(body)), sse: true, p: p, group: "fam"}
			if _, err := io.CopyBuffer(io.Discard, m, buf); err != nil {
				b.Fatal(err)
			}
			m.Close()
		}
	}
	per := time.Since(t0) / time.Duration(b.N*inner)
	b.ReportMetric(float64(per)/float64(time.Millisecond), "ms/response")
	if u := p.Usage()["fam"]; u.OutputTokens != int64(350*b.N*inner) {
		b.Fatalf("metered %+v", u)
	}
	fmt.Printf("metering, reading the usage of a streamed response (%d bytes, 54 events) and pricing it: %.4f ms per response\n", len(body), float64(per)/float64(time.Millisecond))
}

// A model missing from the pricing table is priced as the priciest family
// and logged once, however often it is seen.
func TestUnknownModelLoggedOnce(t *testing.T) {
	var logs testlog.Buffer
	p, err := New(Config{APIKey: "sk-test", Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"claude-future-9","usage":{"input_tokens":1000000}}`
	for range 3 {
		m := &meter{rc: io.NopCloser(strings.NewReader(body)), p: p, group: "fam"}
		if _, err := io.Copy(io.Discard, m); err != nil {
			t.Fatal(err)
		}
		m.Close()
	}
	out := logs.String()
	if n := strings.Count(out, "claude-future-9"); n != 1 || !strings.Contains(out, `"priced_as":"`+priciest.Name+`"`) {
		t.Errorf("log %q: want one line naming the model priced as %s", out, priciest.Name)
	}
	if u := p.Usage()["fam"]; !near(u.CostUSD, 3*priciest.Price.Input) {
		t.Errorf("cost %v; want 3 × $%v", u.CostUSD, priciest.Price.Input)
	}
}
