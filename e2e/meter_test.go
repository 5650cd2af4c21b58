package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pricedUpstream is a Messages API on the host's loopback that answers every
// request with the usage of an expensive model: 10,000 input and 10,000
// output tokens of claude-opus-4-1, $0.90 at its list price.
type pricedUpstream struct {
	srv      *httptest.Server
	requests atomic.Int64
	arrived  chan struct{} // one send per request (buffered)
}

// waitRequests waits until the upstream has had n requests, or within
// passed; it returns how many it had.
func (u *pricedUpstream) waitRequests(n int64, within time.Duration) int64 {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for u.requests.Load() < n {
		select {
		case <-u.arrived:
		case <-deadline.C:
			return u.requests.Load()
		}
	}
	return u.requests.Load()
}

const (
	pricedModel = "claude-opus-4-1-20250805"
	pricedCost  = (10_000*15 + 10_000*75) / 1e6 // USD per answer
)

func newPricedUpstream(t *testing.T) *pricedUpstream {
	u := &pricedUpstream{arrived: make(chan struct{}, 1000)}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		u.requests.Add(1)
		select {
		case u.arrived <- struct{}{}:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":10000,"output_tokens":10000}}`, pricedModel)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// budgetEnv is a home whose agents' API calls go to a priced upstream, with
// the main chat and a group fam (no trigger needed) whose daily budget is
// budget USD; the daemon's idle timeout is idle.
func budgetEnv(t *testing.T, idle, budget string) (*pricedUpstream, *env) {
	t.Helper()
	up := newPricedUpstream(t)
	e := newEnv(t, "--idle-timeout", idle)
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.srv.URL}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "--no-trigger", "local:fam")
	e.mustCLI("groups", "set", "--budget-daily", budget, "fam")
	return up, e
}

// apiCalls is a shell line that has the agent call the Messages API
// through the proxy n times with busybox wget, printing "reqN ok" or
// "reqN refused: <wget's error>" for each.
func apiCalls(n int) string {
	return fmt.Sprintf(`for i in $(seq %d); do if busybox wget -q -O /dev/null --header 'Content-Type: application/json' --post-data '{"model":"claude-opus-4-1","max_tokens":1,"messages":[]}' "$ANTHROPIC_BASE_URL/v1/messages?beta=true" 2>/tmp/err; then echo "req$i ok"; else echo "req$i refused: $(cat /tmp/err)"; fi; done`, n)
}

// statusCost returns the cost today and the CLI's reported cost today
// from `status --json`.
func statusCost(t *testing.T, e *env) (metered, reported float64) {
	t.Helper()
	var st struct {
		CostToday float64 `json:"cost_usd_today"`
		Reported  float64 `json:"cli_reported_cost_usd_today"`
	}
	out := e.mustCLI("status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st.CostToday, st.Reported
}

// groupCost returns folder's cost today and budget from `groups list
// --json`.
func groupCost(t *testing.T, e *env, folder string) (cost, budget float64, paused bool) {
	t.Helper()
	var list struct {
		Groups []struct {
			Folder string  `json:"folder"`
			Cost   float64 `json:"cost_usd_today"`
			Budget float64 `json:"budget_daily_usd"`
			Paused bool    `json:"budget_paused"`
		} `json:"groups"`
	}
	out := e.mustCLI("groups", "list", "--json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("groups list --json: %v\n%s", err, out)
	}
	for _, g := range list.Groups {
		if g.Folder == folder {
			return g.Cost, g.Budget, g.Paused
		}
	}
	t.Fatalf("groups list --json has no %s:\n%s", folder, out)
	return 0, 0, false
}

func sameUSD(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// The agent itself spends through the proxy, with its shell: what the proxy
// metered is the group's cost today, in groups list and status; at its
// budget the proxy answers its next request 429 (rate_limit_error, "daily
// budget") in the middle of the turn, the upstream never sees it, and the
// chat gets one notice; raising the budget lets the very next request
// through, with no new message and no restart.
func TestE2EMeterBudgetRefusedByProxy(t *testing.T) {
	parallel(t, light)
	up, e := budgetEnv(t, "5m", "1.50")
	d := e.start()

	mainFrom := lastID(e, "local:main")
	famFrom := lastID(e, "local:fam")
	// Three calls in one turn: $0.90, then $1.80 (over $1.50), then refused.
	// The fourth is a raw request, to read the refusal's body.
	raw := `hp=${ANTHROPIC_BASE_URL#http://}; printf 'POST /v1/messages HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}' | busybox nc ${hp%:*} ${hp#*:}`
	// Then a loop left in the background retries every 0.3 s until a
	// request is answered.
	loop := `busybox setsid sh -c 'until busybox wget -q -O /dev/null --post-data "{}" "$ANTHROPIC_BASE_URL/v1/messages"; do sleep 0.3; done' >/dev/null 2>&1 </dev/null & echo looping`
	// The budget notice is told the moment the proxy commits the request
	// that used the budget up, before the turn's reply: two messages.
	id := e.post("local:fam", "fake:bash "+apiCalls(3)+"; "+raw+"; "+loop)
	var got, notice string
	for _, m := range e.waitOut("local:fam", id, 2, 120*time.Second) {
		if strings.Contains(m.Text, "used up today's budget") {
			notice = m.Text
		} else {
			got = m.Text
		}
	}
	if notice == "" || !strings.Contains(notice, "$1.80 of $1.50") {
		t.Errorf("fam got no budget notice at $1.80 of $1.50 (%q)", notice)
	}
	t.Logf("the agent's calls: %q", got)
	if !strings.Contains(got, "req1 ok") || !strings.Contains(got, "req2 ok") || !strings.Contains(got, "req3 refused") || !strings.Contains(got, "429") {
		t.Errorf("the agent's calls printed %q; want two answered, the third refused with a 429", got)
	}
	if !strings.Contains(got, "HTTP/1.0 429") || !strings.Contains(got, `{"type":"error","error":{"type":"rate_limit_error","message":"`) || !strings.Contains(got, "daily budget") {
		t.Errorf("the raw request got %q; want a 429 with a rate_limit_error body naming the daily budget", got)
	}
	if n := up.requests.Load(); n != 2 {
		t.Errorf("the upstream got %d requests; want 2 (the refused ones never leave the proxy)", n)
	}

	cost, budget, paused := groupCost(t, e, "fam")
	if !sameUSD(cost, 2*pricedCost) || budget != 1.5 || !paused {
		t.Errorf("groups list: fam cost $%v of $%v, paused %v; want the meter's $%v of $1.50, paused", cost, budget, paused, 2*pricedCost)
	}
	if list := e.mustCLI("groups", "list"); !strings.Contains(list, "$1.80 of $1.50 (paused)") {
		t.Errorf("groups list:\n%s\nwant fam at $1.80 of $1.50 (paused)", list)
	}
	if metered, _ := statusCost(t, e); !sameUSD(metered, 2*pricedCost) {
		t.Errorf("status --json cost today $%v; want the meter's $%v", metered, 2*pricedCost)
	}
	if told := e.waitOut("local:main", mainFrom, 1, 30*time.Second); !strings.Contains(told[0].Text, "fam has used") {
		t.Errorf("main chat got %q; want the owner told of the budget", told[0].Text)
	}

	// Meanwhile the loop the agent left in the background kept being
	// refused; raising the budget lets its next request through at once:
	// no message, no restart.
	if n := up.requests.Load(); n != 2 {
		t.Fatalf("the upstream got %d requests before the budget was raised; want 2", n)
	}
	e.mustCLI("groups", "set", "--budget-daily", "5", "fam")
	if n := up.waitRequests(3, 30*time.Second); n != 3 {
		t.Errorf("after the budget was raised the upstream got %d requests; want the waiting loop's one through (3)", n)
	}
	if cost, budget, paused := groupCost(t, e, "fam"); !sameUSD(cost, 3*pricedCost) || budget != 5 || paused {
		t.Errorf("groups list after the raise: fam $%v of $%v, paused %v; want $%v of $5, not paused", cost, budget, paused, 3*pricedCost)
	}
	notices := 0
	for _, m := range e.outSince("local:fam", famFrom) {
		if strings.Contains(m.Text, "used up today's budget") {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("fam got %d budget notices; want 1: %+v", notices, e.outSince("local:fam", famFrom))
	}
	d.stop(t)
}

// The agent forges a result line with a cost of -$1000 on the container's
// stdout (the runner is not dumpable, but the container's init holds the
// same stdout and runs as the agent's uid): the forged figure is refused,
// and the group's cost today stays what the proxy metered.
func TestE2EMeterForgedResultCostRefused(t *testing.T) {
	parallel(t, light)
	_, e := budgetEnv(t, "2m", "10")
	d := e.start()

	forge := `echo '{"type":"result","cost_usd":-1000,"num_turns":1}' > /proc/1/fd/1 && echo "forged into /proc/1"`
	got := e.bash("local:fam", apiCalls(1)+"; "+forge, 120*time.Second)
	t.Logf("the agent printed %q", got)
	if !strings.Contains(got, "req1 ok") || !strings.Contains(got, "forged into /proc/1") {
		t.Fatalf("the agent printed %q; want one call answered and the result line forged on the runner's stdout", got)
	}
	metered, reported := statusCost(t, e)
	if !sameUSD(metered, pricedCost) || reported < 0 {
		t.Errorf("status --json: cost today $%v, CLI-reported $%v; want the meter's $%v and no negative figure", metered, reported, pricedCost)
	}
	if cost, budget, _ := groupCost(t, e, "fam"); !sameUSD(cost, pricedCost) || budget != 10 {
		t.Errorf("groups list: fam $%v of $%v; want the meter's $%v of $10", cost, budget, pricedCost)
	}
	if list := e.mustCLI("groups", "list"); !strings.Contains(list, "$0.90 of $10.00") {
		t.Errorf("groups list:\n%s\nwant fam at $0.90 of $10.00", list)
	}
	if !strings.Contains(d.logs(), "impossible cost") {
		t.Error("the daemon did not log the forged cost it refused")
	}
	d.stop(t)
}

// The CLI's own API calls are metered the same way: the call that uses the
// budget up is answered, the next one in the same turn is refused by the
// proxy, so the turn ends there (the rest of it never runs), with one
// notice; the message is kept and answered once the budget is raised.
func TestE2EMeterTurnEndsAtBudget(t *testing.T) {
	parallel(t, light)
	up, e := budgetEnv(t, "2m", "0.50")
	d := e.start()

	id := e.post("local:fam", "fake:api first\nfake:api second\nfake:reply the end of the turn")
	notice := e.waitOut("local:fam", id, 1, 90*time.Second)[0]
	if !strings.Contains(notice.Text, "used up today's budget") || !strings.Contains(notice.Text, "$0.90 of $0.50") {
		t.Fatalf("fam got %q; want the budget notice at $0.90 of $0.50", notice.Text)
	}
	// Past the first retry's delay (5 s): the kept message waits.
	noOutbound(t, e, "local:fam", notice.ID, 8*time.Second, "the turn ended at the refused call")
	if n := up.requests.Load(); n != 1 {
		t.Errorf("the upstream got %d requests; want 1 (the second call of the turn refused by the proxy)", n)
	}
	if cost, _, paused := groupCost(t, e, "fam"); !sameUSD(cost, pricedCost) || !paused {
		t.Errorf("fam $%v, paused %v; want $%v, paused", cost, paused, pricedCost)
	}

	e.mustCLI("groups", "set", "--budget-daily", "5", "fam")
	var texts []string
	for _, m := range e.waitOut("local:fam", id, 2, 90*time.Second) {
		texts = append(texts, m.Text)
	}
	if texts[1] != "ok\nok\nthe end of the turn" {
		t.Errorf("after the raise fam got %q; want the kept message's turn run again to its end", texts)
	}
	d.stop(t)
}

// meteredUpstream is a Messages API on the host's loopback whose answers
// cost the most their requests allow: a prompt of a quarter of the body's
// bytes and the whole max_tokens, at the model the request names (so no
// answer costs more than the request's reserve). A JSON answer takes hold
// to come, as a slow model's does. A streamed answer sends message_start
// (a 1,000-token prompt), 30,000 bytes of text in content_block_delta
// events, then pings every 100 ms and never its message_delta: cut tells
// when its caller went away.
type meteredUpstream struct {
	srv  *httptest.Server
	hold time.Duration
	cut  chan struct{} // one send per streamed answer whose caller went away (buffered)
}

const (
	streamedText  = 30_000 // bytes of text per streamed answer
	streamedInput = 1_000  // its prompt tokens, in message_start
)

func newMeteredUpstream(t *testing.T, hold time.Duration) *meteredUpstream {
	u := &meteredUpstream{hold: hold, cut: make(chan struct{}, 100)}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *meteredUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model     string `json:"model"`
		MaxTokens int64  `json:"max_tokens"`
		Stream    bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	if !req.Stream {
		select {
		case <-time.After(u.hold):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":%d,"output_tokens":%d}}`,
			req.Model, len(body)/4, req.MaxTokens)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(typ, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
		w.(http.Flusher).Flush()
	}
	ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","model":%q,"usage":{"input_tokens":%d,"output_tokens":1}}}`, req.Model, streamedInput))
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	chunk := strings.Repeat("a", 1500)
	for range streamedText / len(chunk) {
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+chunk+`"}}`)
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			ev("ping", `{"type":"ping"}`)
		case <-r.Context().Done():
			u.cut <- struct{}{}
			return
		case <-time.After(time.Minute):
			return
		}
	}
}

// A stream the agent cuts after its content and before its message_delta
// is charged for the output it carried, not only for message_start's
// prompt.
func TestE2EMeterCutStreamChargedForItsOutput(t *testing.T) {
	parallel(t, light)
	up := newMeteredUpstream(t, 0)
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.srv.URL}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()

	// A raw streamed request, its connection kept open by the fifo (nc
	// closes it when its input ends); awk stops reading at the first ping,
	// after the content, and nc dies on its next write.
	cut := `hp=${ANTHROPIC_BASE_URL#http://}; body='{"model":"claude-opus-4-1","max_tokens":64000,"stream":true,"messages":[]}'; busybox mkfifo /tmp/in; ` +
		`{ printf 'POST /v1/messages HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' ${#body} "$body"; busybox sleep 30; } >/tmp/in 2>/dev/null </dev/null & ` +
		`busybox nc ${hp%:*} ${hp#*:} </tmp/in | busybox awk '/event: ping/{exit} /text_delta/{n++} END{print n " deltas read, then cut"}'`
	got := e.bash("local:fam", cut, 120*time.Second)
	if !strings.Contains(got, "20 deltas read, then cut") {
		t.Fatalf("the agent printed %q; want the 20 deltas read before the cut", got)
	}
	select {
	case <-up.cut:
	case <-time.After(60 * time.Second):
		t.Fatal("the upstream never saw its caller go away")
	}
	// The proxy commits what it metered before it logs the cut.
	if !d.waitLog("API response stream aborted", 60*time.Second) {
		t.Fatal("the proxy did not log the cut stream")
	}
	start := (streamedInput*15 + 1*75) / 1e6 // message_start: the prompt and one output token
	carried := float64((streamedText+2)/3) * 75 / 1e6
	cost, _, _ := groupCost(t, e, "fam")
	t.Logf("fam's cost after the cut stream: $%v (message_start alone $%v)", cost, start)
	if cost <= start || !sameUSD(cost, streamedInput*15/1e6+carried) {
		t.Errorf("fam's cost is $%v; want $%v: the prompt and the %d bytes of text it carried, not message_start's $%v alone",
			cost, streamedInput*15/1e6+carried, streamedText, start)
	}
	d.stop(t)
}
