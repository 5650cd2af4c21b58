package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// placeholder is the worthless credential claude gets inside a container
// (credproxy.Placeholder).
const placeholder = "bridged-proxy-placeholder-not-a-credential"

// fakeUpstream is a Messages API on the host's loopback: it records what it
// was sent. A streaming answer sends its first text delta, then holds the
// rest until release is called (or a minute passes).
type fakeUpstream struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []upstreamReq
	release chan struct{}
	once    sync.Once
	// firstOnce guards firstSent: a retried request streams again.
	firstOnce sync.Once
	// firstSent is closed when the first streamed event went out.
	firstSent chan struct{}
}

type upstreamReq struct {
	path   string
	header http.Header
	body   string
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	u := &fakeUpstream{release: make(chan struct{}), firstSent: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() { u.releaseStream(); u.srv.Close() })
	return u
}

func (u *fakeUpstream) releaseStream() { u.once.Do(func() { close(u.release) }) }

func (u *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.reqs = append(u.reqs, upstreamReq{path: r.URL.Path, header: r.Header.Clone(), body: string(body)})
	u.mu.Unlock()
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	prompt := ""
	if len(req.Messages) > 0 && len(req.Messages[0].Content) > 0 {
		prompt = req.Messages[0].Content[0].Text
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"upstream says: %s"}],"usage":{"input_tokens":11,"output_tokens":4}}`, prompt)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(typ, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
		w.(http.Flusher).Flush()
	}
	ev("message_start", `{"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":11,"output_tokens":1}}}`)
	ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"first "}}`)
	u.firstOnce.Do(func() { close(u.firstSent) })
	select {
	case <-u.release:
	case <-time.After(time.Minute):
	case <-r.Context().Done():
		return
	}
	ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"then the rest"}}`)
	ev("message_delta", `{"type":"message_delta","usage":{"output_tokens":5}}`)
	ev("message_stop", `{"type":"message_stop"}`)
}

func (u *fakeUpstream) requests() []upstreamReq {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upstreamReq(nil), u.reqs...)
}

// inspectAll returns the raw docker inspect output of the home's live
// containers.
func (e *env) inspectAll(t *testing.T, ctx context.Context) []byte {
	t.Helper()
	var all []byte
	for _, c := range e.containers(ctx) {
		ins, err := docker.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatalf("inspect %s: %v", c.ID[:12], err)
		}
		all = append(all, ins.Raw...)
	}
	return all
}

// The agent uses the API through the daemon's proxy; the upstream sees the
// real key and never the placeholder; the key is nowhere in the container
// (no process environment, no file, no mount, not in docker inspect); a
// stream reaches claude event by event; other paths and hosts are refused.
func TestE2ECredentialProxy(t *testing.T) {
	parallel(t, light)
	up := newFakeUpstream(t)
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.srv.URL}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctx := context.Background()

	if got := e.ask("local:main", "fake:api hello proxy", 90*time.Second); got != "upstream says: hello proxy" {
		t.Fatalf("fake:api reply %q; want the upstream's answer", got)
	}
	reqs := up.requests()
	if len(reqs) != 1 || reqs[0].path != "/v1/messages" {
		t.Fatalf("upstream requests %+v; want one POST /v1/messages", reqs)
	}
	if got := reqs[0].header.Get("X-Api-Key"); got != secret {
		t.Errorf("upstream x-api-key %q; want the daemon's key", got)
	}
	for k, vs := range reqs[0].header {
		if strings.Contains(strings.Join(vs, " "), placeholder) {
			t.Errorf("the upstream saw the placeholder in %s", k)
		}
	}

	// Streaming: the first event reaches claude while the upstream still
	// holds the rest (claude logs each event on its stderr, which lands in
	// the daemon's debug log).
	id := e.post("local:main", "fake:api stream")
	select {
	case <-up.firstSent:
	case <-time.After(90 * time.Second):
		t.Fatal("the streaming request did not reach the upstream")
	}
	if !d.waitLog("fakeclaude: api event 2 content_block_delta", 60*time.Second) {
		t.Fatal("the first streamed text event did not reach claude before the upstream finished")
	}
	if len(e.outSince("local:main", id)) != 0 {
		t.Fatal("the reply went out before the upstream finished its stream")
	}
	// Live spend while the turn still runs: both requests, and the
	// streaming one's input tokens from its message_start.
	status := e.mustCLI("status")
	if !strings.Contains(status, "Claude API through the proxy") || !strings.Contains(status, "2 requests") || !strings.Contains(status, "22 in") {
		t.Errorf("status mid-turn does not show the live API use of main:\n%s", status)
	}
	up.releaseStream()
	if got := e.waitOut("local:main", id, 1, 60*time.Second)[0].Text; got != "first then the rest" {
		t.Errorf("streamed reply %q; want the text deltas joined", got)
	}

	// The key is nowhere in the container: no process environment, no file
	// (mounts included), no mount option. The needle is built in the shell
	// so the prompt itself never holds the key.
	half := len(secret) / 2
	scan := fmt.Sprintf(`n=%s; n="${n}%s"; for f in /proc/[0-9]*/environ; do grep -l "$n" "$f" 2>/dev/null; done; `+
		`find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -print 2>/dev/null | xargs grep -l "$n" 2>/dev/null; `+
		`grep -c "$n" /proc/self/mountinfo; echo placeholders=$(grep -l %s /proc/[0-9]*/environ 2>/dev/null | wc -l); echo scan-done`,
		secret[:half], secret[half:], placeholder)
	out := e.bash("local:main", scan, 90*time.Second)
	t.Logf("scan in the container: %q", out)
	lines := strings.Fields(out)
	if len(lines) != 3 || lines[0] != "0" || lines[2] != "scan-done" || lines[1] == "placeholders=0" {
		t.Errorf("scan for the key in the container printed %q; want only a 0 count, placeholders seen (the scan read the environments), and scan-done", out)
	}

	// Only the Messages API, only to the configured upstream.
	before := len(up.requests())
	refused := e.bash("local:main", `busybox wget -q -O - "$ANTHROPIC_BASE_URL/v1/models" 2>&1; echo; http_proxy="$ANTHROPIC_BASE_URL" busybox wget -q -O - http://example.com/v1/messages 2>&1; echo end`, 90*time.Second)
	t.Logf("refused requests: %q", refused)
	if strings.Count(refused, "403") != 2 {
		t.Errorf("requests for another path and another host got %q; want two 403s", refused)
	}
	if n := len(up.requests()); n != before {
		t.Errorf("the upstream got %d refused requests", n-before)
	}

	// docker inspect shows the socket mount and no key.
	raw := e.inspectAll(t, ctx)
	if len(raw) == 0 {
		t.Fatal("no live container to inspect")
	}
	if bytes.Contains(raw, []byte(secret)) {
		t.Error("docker inspect of the container holds the key")
	}
	if !bytes.Contains(raw, []byte("/run/bridged-proxy")) {
		t.Error("docker inspect shows no proxy socket mount")
	}

	d.stop(t)
	if hits := grepFiles(t, e.home, secret); len(hits) > 0 {
		t.Errorf("the key was written to %v", hits)
	}
	if strings.Contains(d.logs(), secret) {
		t.Error("the key appears in the daemon's log")
	}
}

// With no credential, the daemon warns once, the agents still answer (local
// try-outs), an API call gets a 401 naming the variables, and status and
// doctor say what to set.
func TestE2ECredentialProxyNoCredential(t *testing.T) {
	parallel(t, light)
	up := newFakeUpstream(t)
	e := newEnv(t, "--idle-timeout", "2m", "--retry-base", "10ms")
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.srv.URL, "ANTHROPIC_API_KEY="}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()

	if got := e.ask("local:main", "hello", 90*time.Second); got != "echo: hello" {
		t.Fatalf("reply %q; want the fake's echo without a credential", got)
	}
	// The answer's body too (wget hides error bodies): a raw request.
	out := e.bash("local:main", `hp=${ANTHROPIC_BASE_URL#http://}; printf 'POST /v1/messages HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}' | busybox nc ${hp%:*} ${hp#*:}; echo end`, 90*time.Second)
	t.Logf("request without a credential: %q", out)
	if !strings.Contains(out, "401 Unauthorized") || !strings.Contains(out, "authentication_error") ||
		!strings.Contains(out, "ANTHROPIC_API_KEY") || !strings.Contains(out, "CLAUDE_CODE_OAUTH_TOKEN") {
		t.Errorf("an API request without a credential got %q; want a 401 whose body names the variables", out)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the upstream got %d requests without a credential", n)
	}
	if n := strings.Count(d.logs(), "bridged has no Claude credential"); n != 1 {
		t.Errorf("the no-credential warning appears %d times in the log; want once", n)
	}
	status := e.mustCLI("status")
	if !strings.Contains(status, "NO CREDENTIAL") || !strings.Contains(status, "ANTHROPIC_API_KEY") || !strings.Contains(status, "CLAUDE_CODE_OAUTH_TOKEN") {
		t.Errorf("status does not say which variable to set:\n%s", status)
	}
	doctor, _ := e.cli("doctor")
	if !strings.Contains(doctor, "credentials  FAIL") || !strings.Contains(doctor, "ANTHROPIC_API_KEY") {
		t.Errorf("doctor does not say which variable to set:\n%s", doctor)
	}
	d.stop(t)
}

// BRIDGED_CONTAINER_NETWORK=none: the container has no network, and the
// agent still reaches Claude through the proxy socket.
func TestE2ECredentialProxyNoNetwork(t *testing.T) {
	parallel(t, light)
	up := newFakeUpstream(t)
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.srv.URL, "BRIDGED_CONTAINER_NETWORK=none"}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	if got := e.ask("local:main", "fake:api offline", 90*time.Second); got != "upstream says: offline" {
		t.Fatalf("fake:api reply %q; want the upstream's answer through the socket", got)
	}
	ifaces := e.bash("local:main", "ls /sys/class/net", 90*time.Second)
	if strings.TrimSpace(ifaces) != "lo" {
		t.Errorf("network interfaces %q; want only lo", ifaces)
	}
	raw := e.inspectAll(t, context.Background())
	if !bytes.Contains(raw, []byte(`"NetworkMode":"none"`)) {
		t.Error(`docker inspect does not show NetworkMode "none"`)
	}
	d.stop(t)
}

// With an OAuth token, the upstream gets it as a bearer token with the OAuth
// beta, and claude holds only a placeholder token.
func TestE2ECredentialProxyOAuth(t *testing.T) {
	parallel(t, light)
	up := newFakeUpstream(t)
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.srv.URL, "ANTHROPIC_API_KEY=", "CLAUDE_CODE_OAUTH_TOKEN=" + secret}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	if got := e.ask("local:main", "fake:api bearer", 90*time.Second); got != "upstream says: bearer" {
		t.Fatalf("fake:api reply %q; want the upstream's answer", got)
	}
	reqs := up.requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests; want 1", len(reqs))
	}
	h := reqs[0].header
	if h.Get("Authorization") != "Bearer "+secret || h.Get("X-Api-Key") != "" || !strings.Contains(h.Get("Anthropic-Beta"), "oauth-2025-04-20") {
		t.Errorf("upstream auth: authorization set %v, x-api-key %q, anthropic-beta %q; want the bearer token with the OAuth beta",
			h.Get("Authorization") != "", h.Get("X-Api-Key"), h.Get("Anthropic-Beta"))
	}
	if raw := e.inspectAll(t, context.Background()); bytes.Contains(raw, []byte(secret)) {
		t.Error("docker inspect of the container holds the token")
	}
	d.stop(t)
	if hits := grepFiles(t, e.home, secret); len(hits) > 0 {
		t.Errorf("the token was written to %v", hits)
	}
}
