package credproxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestRequestFields(t *testing.T) {
	for _, c := range []struct {
		body  string
		model string
		max   int64
		ok    bool
	}{
		{`{"model":"claude-opus-4-1","max_tokens":1024,"messages":[]}`, "claude-opus-4-1", 1024, true},
		// The CLI's order: the conversation first.
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"say \"model\":\"x\", max_tokens: 1"}]}],"system":[{"text":"{\"max_tokens\":1}"}],"max_tokens":128000,"model":"claude-opus-5-5","stream":true}`, "claude-opus-5-5", 128000, true},
		{` { "model" : "claude-haiku-4-5" , "max_tokens" : 7 } `, "claude-haiku-4-5", 7, true},
		// Nested keys are not the request's.
		{`{"metadata":{"model":"claude-3-haiku","max_tokens":1},"tools":[{"max_tokens":2}]}`, "", -1, true},
		// Twice: the larger max_tokens, no model (the priciest).
		{`{"model":"claude-3-haiku","max_tokens":5,"model":"claude-opus-4-1","max_tokens":3}`, "", 5, true},
		// Escaped key or value: not found.
		{`{"m\u006fdel":"claude-3-haiku","model":"claude-\u0033","max_tokens":9}`, "", 9, true},
		// Not a plain integer, or absurdly long: the default.
		{`{"max_tokens":1e3}`, "", DefaultReserveOutput, true},
		{`{"max_tokens":12345678901234567}`, "", DefaultReserveOutput, true},
		{`{"max_tokens":"9"}`, "", -1, true},
		// Cut short: what was found before the cut.
		{`{"model":"claude-opus-4-1","messages":[{"content":"abc`, "claude-opus-4-1", -1, true},
		{`[{"model":"x"}]`, "", -1, false},
		{``, "", -1, false},
	} {
		m, mt, ok := requestFields([]byte(c.body))
		if m != c.model || mt != c.max || ok != c.ok {
			t.Errorf("%s: %q %d %v; want %q %d %v", c.body, m, mt, ok, c.model, c.max, c.ok)
		}
	}
}

// reserveOf is what a request with body reserves.
func reserveOf(body string) float64 {
	model, mt, _ := requestFields([]byte(body))
	if mt < 0 {
		mt = DefaultReserveOutput
	}
	f, _ := FamilyOf(model)
	return f.Worst(int64(len(body)), mt)
}

// waitCommits waits for n commits.
func waitCommits(t *testing.T, l *fakeLedger, n int) []Metered {
	t.Helper()
	for range n {
		select {
		case <-l.added:
		case <-time.After(30 * time.Second):
			t.Fatalf("commits %+v; want %d", l.got(), n)
		}
	}
	return l.got()
}

// A stream the caller cuts after its content and before message_delta is
// charged for the output it carried, not for message_start's alone; one
// that ends whole is charged what the API says.
func TestCutStreamChargedForItsOutput(t *testing.T) {
	l := &fakeLedger{added: make(chan struct{}, 10)}
	text := strings.Repeat("All work and no play. ", 300) // 6,600 bytes
	hold := make(chan struct{})
	defer close(hold)
	_, c, _ := newProxy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sseEvent(w, "message_start", `{"type":"message_start","message":{"model":"claude-opus-4-1","usage":{"input_tokens":100,"output_tokens":1}}}`)
		for i := 0; i < len(text); i += 600 {
			sseEvent(w, "content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, text[i:i+600]))
		}
		sseEvent(w, "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"ls\"}"}}`)
		if r.URL.RawQuery == "whole" {
			sseEvent(w, "message_delta", `{"type":"message_delta","usage":{"output_tokens":1400}}`)
			sseEvent(w, "message_stop", `{"type":"message_stop"}`)
			return
		}
		sseEvent(w, "ping", `{"type":"ping"}`)
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}, Config{APIKey: realKey, Ledger: l})

	resp := post(t, c, "/v1/messages?cut", `{"model":"claude-opus-4-1","max_tokens":64000,"stream":true}`, nil)
	buf := make([]byte, 0, 16<<10)
	for !strings.Contains(string(buf), `"ping"`) {
		chunk := make([]byte, 4096)
		n, err := resp.Body.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil {
			t.Fatalf("the stream ended before its content: %v", err)
		}
	}
	resp.Body.Close() // cut: no message_delta
	got := waitCommits(t, l, 1)[0]
	carried := int64(len(text) + len(`{\"command\": \"ls\"}`))
	wantOut := (carried + 2) / 3
	if got.Tokens.Input != 100 || got.Tokens.Output != wantOut || !near(got.CostUSD, (100*15+float64(wantOut)*75)/1e6) {
		t.Errorf("cut stream committed %+v; want 100 input and %d output tokens (what it carried, at 3 bytes a token)", got, wantOut)
	}
	if start := (100*15 + 1*75) / 1e6; got.CostUSD <= start {
		t.Errorf("cut stream charged $%v, message_start's $%v alone", got.CostUSD, start)
	}

	readAll(t, post(t, c, "/v1/messages?whole", `{"model":"claude-opus-4-1","max_tokens":64000,"stream":true}`, nil))
	if got := waitCommits(t, l, 1)[1]; got.Tokens.Output != 1400 {
		t.Errorf("whole stream committed %+v; want the API's 1400 output tokens", got)
	}
}

// A JSON answer the caller cuts before its usage is charged for what it
// carried: its size as output, the request's as prompt.
func TestCutJSONChargedForWhatItCarried(t *testing.T) {
	l := &fakeLedger{added: make(chan struct{}, 10)}
	text := strings.Repeat("x", 30_000)
	hold := make(chan struct{})
	defer close(hold)
	_, c, _ := newProxy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","model":"claude-opus-4-1","content":[{"type":"text","text":%q}],`, text)
		w.(http.Flusher).Flush()
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}, Config{APIKey: realKey, Ledger: l})
	body := `{"model":"claude-opus-4-1","max_tokens":64000,"messages":[{"role":"user","content":"` + strings.Repeat("y", 4000) + `"}]}`
	resp := post(t, c, "/v1/messages", body, nil)
	n, _ := io.ReadAtLeast(resp.Body, make([]byte, 40_000), 30_000)
	resp.Body.Close()
	got := waitCommits(t, l, 1)[0]
	if got.Model != "claude-opus-4-1" || got.Tokens.Output < int64(n)/3 || got.Tokens.Input != int64(len(body)+3)/4 {
		t.Errorf("cut JSON answer committed %+v; want opus, at least %d output tokens and %d input", got, n/3, (len(body)+3)/4)
	}
}

// Forty requests at once of a group with money left for a few: those let
// through are the ones whose worst cases fit what is left, one more at
// most, and the rest are refused at once with a 429 that says to retry;
// what they cost overshoots the budget by at most one request's reserve.
// The reservations end with the requests: the next one is let through.
func TestBudgetCrossingOvershootsByOneReserve(t *testing.T) {
	body := `{"model":"claude-opus-4-1","max_tokens":2000,"messages":[]}`
	reserve := reserveOf(body)
	budget := 2.5 * reserve
	l := &fakeLedger{added: make(chan struct{}, 100), budget: budget}
	release := make(chan struct{})
	decided := make(chan struct{}, 40) // a request arrived upstream or was refused
	var arrived atomic.Int64
	_, c, _ := newProxy(t, func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		decided <- struct{}{}
		<-release
		// The most the request could cost: its whole max_tokens and a
		// prompt token per byte.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"model":"claude-opus-4-1","usage":{"input_tokens":%d,"output_tokens":2000}}`, len(body))
	}, Config{APIKey: realKey, Ledger: l})
	c.Transport.(*http.Transport).MaxConnsPerHost = 0

	var (
		mu      sync.Mutex
		refused []*http.Response
		wg      sync.WaitGroup
	)
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:4000/v1/messages", strings.NewReader(body))
			resp, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				mu.Lock()
				refused = append(refused, resp)
				mu.Unlock()
				decided <- struct{}{}
			}
		}()
	}
	deadline := time.After(30 * time.Second)
	for range 40 {
		select {
		case <-decided:
		case <-deadline:
			t.Fatalf("%d requests arrived upstream; want all 40 let through or refused", arrived.Load())
		}
	}
	close(release)
	wg.Wait()
	got := waitCommits(t, l, int(arrived.Load()))
	spent := 0.0
	for _, m := range got {
		spent += m.CostUSD
	}
	t.Logf("budget $%.4f, reserve $%.4f: %d let through, $%.4f spent", budget, reserve, len(got), spent)
	if spent > budget+reserve+1e-9 || len(got) != 3 {
		t.Errorf("%d requests let through, $%.4f spent; want 3, at most the budget $%.4f plus one reserve $%.4f", len(got), spent, budget, reserve)
	}
	for _, resp := range refused {
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != BudgetRetryAfter || resp.Header.Get("X-Should-Retry") == "false" {
			t.Errorf("refused: %d %v; want a 429 to retry after %s s", resp.StatusCode, resp.Header, BudgetRetryAfter)
			break
		}
	}
	// All ended: nothing is held, and the group, over its budget now, is
	// refused as used up.
	resp := post(t, c, "/v1/messages", body, nil)
	if readAll(t, resp); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("after the crossing: %d %v; want the used-up refusal", resp.StatusCode, resp.Header)
	}
}

// A reservation ends however its request ends: an upstream error, a caller
// gone before the answer. A request whose worst case is over the whole
// budget is let through when nothing else is in flight.
func TestReservationEndsWithTheRequest(t *testing.T) {
	l := &fakeLedger{added: make(chan struct{}, 10), budget: 0.01}
	arrived := make(chan struct{}, 10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.RawQuery {
		case "error":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"type":"error","error":{"type":"api_error","message":"boom"}}`)
		case "hang":
			arrived <- struct{}{}
			<-r.Context().Done()
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"model":"claude-3-haiku","usage":{"input_tokens":1,"output_tokens":1}}`)
		}
	}))
	defer up.Close()
	p, err := New(Config{Upstream: up.URL, APIKey: realKey, Ledger: l, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{}, 10) // the proxy's handler returned
	h := p.Handler("family", "bridged-family-1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { ended <- struct{}{} }()
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	send := func(ctx context.Context, query string) (int, http.Header) {
		body := `{"model":"claude-opus-4-1","max_tokens":128000}` // $9.60 at worst, over the budget
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages"+query, strings.NewReader(body))
		resp, err := srv.Client().Do(req)
		if err != nil {
			return 0, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		<-ended
		return resp.StatusCode, resp.Header
	}
	held := func() float64 {
		pu := p.purse("family")
		pu.mu.Lock()
		defer pu.mu.Unlock()
		return pu.held()
	}
	if code, _ := send(context.Background(), "?error"); code != 500 || held() != 0 {
		t.Fatalf("upstream error %d: $%v held after it", code, held())
	}
	ctx, cancel := context.WithCancel(context.Background())
	go send(ctx, "?hang")
	<-arrived
	if code, hdr := send(context.Background(), ""); code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Errorf("with the budget held: %d; want a 429 to retry", code)
	}
	cancel()
	<-ended
	if h := held(); h != 0 {
		t.Fatalf("after the caller went away $%v is held", h)
	}
	if code, _ := send(context.Background(), ""); code != 200 {
		t.Errorf("after the reservations ended: %d; want the request through", code)
	}
}

// BenchmarkRequestFields prints what finding a request's model and
// max_tokens costs in a body the size of the most the proxy reads before
// admitting it (about 1 MiB, a long conversation, its keys after it as the CLI
// writes them).
func BenchmarkRequestFields(b *testing.B) {
	msg := `{"role":"user","content":[{"type":"text","text":"` + strings.Repeat(`some text, \"quoted\" and {braced} `, 30) + `"}]},`
	body := `{"messages":[` + strings.Repeat(msg, peekLimit/len(msg)-1) + `{"role":"user","content":"hi"}],"max_tokens":128000,"model":"claude-opus-5-5"}`
	n := max(b.N, 200)
	b.ResetTimer()
	t0 := time.Now()
	for range n {
		if m, mt, _ := requestFields([]byte(body)); m != "claude-opus-5-5" || mt != 128000 {
			b.Fatalf("found %q %d", m, mt)
		}
	}
	per := float64(time.Since(t0)) / float64(n) / float64(time.Millisecond)
	b.ReportMetric(per, "ms/MiB")
	fmt.Printf("reserving: finding model and max_tokens in a %d-byte request body: %.3f ms per body\n", len(body), per)
}

// The start of a body read before admission is sent on in front of the
// rest, whole: with a declared length or without, shorter or longer than
// what is read first.
func TestPeekedBodyForwardedWhole(t *testing.T) {
	l := &fakeLedger{added: make(chan struct{}, 10), budget: 1e9}
	_, c, s := newProxy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"model":"claude-3-haiku","usage":{"input_tokens":1,"output_tokens":1}}`)
	}, Config{APIKey: realKey, Ledger: l})
	long := `{"model":"claude-3-haiku","messages":[{"content":"` + strings.Repeat("0123456789", 300_000) + `"}],"max_tokens":5}`
	for _, c2 := range []struct {
		name, body string
		chunked    bool
	}{{"short", `{"model":"claude-3-haiku","max_tokens":5}`, false}, {"short chunked", `{"max_tokens":5}`, true},
		{"long", long, false}, {"long chunked", long, true}} {
		var rd io.Reader = strings.NewReader(c2.body)
		if c2.chunked {
			rd = io.MultiReader(rd) // hides the length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:4000/v1/messages", rd)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("%s: %d", c2.name, resp.StatusCode)
		}
		s.mu.Lock()
		got := s.body[len(s.body)-1]
		s.mu.Unlock()
		if got != c2.body {
			t.Errorf("%s: the upstream got %d bytes; want the %d sent", c2.name, len(got), len(c2.body))
		}
	}
	if got := waitCommits(t, l, 4); len(got) != 4 {
		t.Errorf("commits %+v; want 4", got)
	}
}
