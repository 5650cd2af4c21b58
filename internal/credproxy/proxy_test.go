package credproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

const realKey = "sk-ant-real-key-for-tests"

// seen is what the fake upstream got.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func (s *seen) last() (*http.Request, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		return nil, ""
	}
	return s.reqs[len(s.reqs)-1], s.body[len(s.body)-1]
}

// newProxy starts a proxy in front of h and returns a client that talks to
// one container's socket.
func newProxy(t *testing.T, h http.HandlerFunc, cfg Config) (*Proxy, *http.Client, *seen) {
	t.Helper()
	s := &seen{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.body = append(s.body, string(body))
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(up.Close)
	if cfg.Upstream == "" {
		cfg.Upstream = up.URL
	}
	cfg.Dir = filepath.Join(t.TempDir(), "data", "proxy")
	cfg.Log = zerolog.Nop()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.Open("family", "bridged-family-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	return p, unixClient(ep.Socket), s
}

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableCompression: true,
	}}
}

func post(t *testing.T, c *http.Client, path, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:4000"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAPIKeyReplacesWhatTheContainerSent(t *testing.T) {
	p, c, s := newProxy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,"output_tokens":5}}`)
	}, Config{APIKey: realKey, OAuthToken: "also-set"})
	if p.Mode() != ModeAPIKey {
		t.Fatalf("mode %q", p.Mode())
	}
	resp := post(t, c, "/v1/messages?beta=true", `{"x":1}`, map[string]string{
		"x-api-key": Placeholder, "Authorization": "Bearer " + Placeholder, "anthropic-version": "2023-06-01",
	})
	if got := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(got, `"hi"`) {
		t.Fatalf("status %d body %s", resp.StatusCode, got)
	}
	r, body := s.last()
	if r.Header.Get("X-Api-Key") != realKey || r.Header.Get("Authorization") != "" {
		t.Fatalf("upstream saw x-api-key %q authorization %q", r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
	}
	if r.URL.Path != "/v1/messages" || r.URL.RawQuery != "beta=true" || body != `{"x":1}` || r.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Fatalf("upstream saw %s ? %s body %q headers %v", r.URL.Path, r.URL.RawQuery, body, r.Header)
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, Placeholder) {
				t.Fatalf("placeholder reached the upstream in %s", k)
			}
		}
	}
	u := p.Usage()["family"]
	if u.Requests != 1 || u.InputTokens != 10 || u.OutputTokens != 5 || u.CostUSD <= 0 {
		t.Fatalf("usage %+v", u)
	}
}

func TestOAuthBearerAndBeta(t *testing.T) {
	_, c, s := newProxy(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "{}") },
		Config{OAuthToken: "oauth-real-token"})
	resp := post(t, c, "/v1/messages/count_tokens", `{}`, map[string]string{
		"Authorization": "Bearer " + Placeholder, "anthropic-beta": "a-beta,b-beta",
	})
	readAll(t, resp)
	r, _ := s.last()
	if r.Header.Get("Authorization") != "Bearer oauth-real-token" || r.Header.Get("X-Api-Key") != "" {
		t.Fatalf("upstream auth %q / %q", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
	}
	if got := r.Header.Get("Anthropic-Beta"); got != "a-beta,b-beta,"+OAuthBeta {
		t.Fatalf("anthropic-beta %q", got)
	}
}

func TestGatewayPathPrefix(t *testing.T) {
	s := &seen{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.body = append(s.body, "")
		s.mu.Unlock()
	}))
	defer up.Close()
	p, err := New(Config{Upstream: up.URL + "/anthropic/", APIKey: realKey, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	p.Handler("g", "c").ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader("{}")))
	r, _ := s.last()
	if rec.Code != 200 || r.URL.Path != "/anthropic/v1/messages" {
		t.Fatalf("code %d path %v", rec.Code, r)
	}
}

func TestOtherPathsAndHostsRefused(t *testing.T) {
	_, c, s := newProxy(t, func(w http.ResponseWriter, r *http.Request) {}, Config{APIKey: realKey})
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/models"},
		{"POST", "/v1/files"},
		{"GET", "/v1/messages"},
		{"POST", "/v1/messages/batches"},
		{"POST", "/api/oauth/profile"},
		{"POST", "/v1/messages/../files"},
	} {
		req, _ := http.NewRequest(tc.method, "http://127.0.0.1:4000"+tc.path, strings.NewReader("{}"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "only the Claude Messages API is forwarded") {
			t.Fatalf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, body)
		}
	}
	// A proxy-style request for another host.
	conn := dialRaw(t, c)
	fmt.Fprint(conn, "POST http://example.com/v1/messages HTTP/1.1\r\nHost: example.com\r\nContent-Length: 2\r\n\r\n{}")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "refused") {
		t.Fatalf("absolute-form request: %d %s", resp.StatusCode, body)
	}
	if r, _ := s.last(); r != nil {
		t.Fatalf("upstream got %s %s", r.Method, r.URL)
	}
}

// dialRaw opens a raw connection to the socket behind c.
func dialRaw(t *testing.T, c *http.Client) net.Conn {
	t.Helper()
	conn, err := c.Transport.(*http.Transport).DialContext(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestNoCredential401(t *testing.T) {
	p, c, s := newProxy(t, func(w http.ResponseWriter, r *http.Request) {}, Config{})
	if p.Mode() != ModeNone {
		t.Fatal(p.Mode())
	}
	resp := post(t, c, "/v1/messages", "{}", nil)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, EnvAPIKey) || !strings.Contains(body, EnvOAuthToken) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Type != "error" || e.Error.Type != "authentication_error" {
		t.Fatalf("body %s: %v", body, err)
	}
	if r, _ := s.last(); r != nil {
		t.Fatal("upstream reached without a credential")
	}
	if err := p.Check(context.Background(), nil); err == nil || !strings.Contains(err.Error(), EnvAPIKey) {
		t.Fatalf("check: %v", err)
	}
}

func TestUpstreamErrorsPassThrough(t *testing.T) {
	_, c, _ := newProxy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.Header().Set("X-Should-Retry", "true")
		w.WriteHeader(529)
		fmt.Fprint(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	}, Config{APIKey: realKey})
	resp := post(t, c, "/v1/messages", "{}", nil)
	body := readAll(t, resp)
	if resp.StatusCode != 529 || body != `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` ||
		resp.Header.Get("Retry-After") != "7" || resp.Header.Get("X-Should-Retry") != "true" {
		t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
	}
}

func TestUnreachableUpstream502(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, c, _ := newProxy(t, nil, Config{APIKey: realKey, Upstream: "http://" + addr})
	resp := post(t, c, "/v1/messages", "{}", nil)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "could not be reached") || strings.Contains(body, realKey) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// sseEvent writes one SSE event and flushes it.
func sseEvent(w http.ResponseWriter, typ, data string) {
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
	w.(http.Flusher).Flush()
}

func TestStreamingFlushedPerEvent(t *testing.T) {
	release := make(chan struct{})
	p, c, _ := newProxy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sseEvent(w, "message_start", `{"type":"message_start","message":{"model":"claude-opus-4-5","usage":{"input_tokens":100,"cache_read_input_tokens":50,"output_tokens":1}}}`)
		<-release // the first event must reach the client before this
		sseEvent(w, "content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"hello"}}`)
		sseEvent(w, "message_delta", `{"type":"message_delta","usage":{"output_tokens":42}}`)
		sseEvent(w, "message_stop", `{"type":"message_stop"}`)
	}, Config{APIKey: realKey})
	resp := post(t, c, "/v1/messages", `{"stream":true}`, nil)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "event: message_start\n" {
		t.Fatalf("first line %q: %v", line, err)
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "hello") || !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("rest %q: %v", rest, err)
	}
	u := p.Usage()["family"]
	// message_delta's output count is cumulative: it replaces
	// message_start's, it does not add to it.
	if u.InputTokens != 100 || u.CacheReadInputTokens != 50 || u.OutputTokens != 42 || u.Requests != 1 {
		t.Fatalf("usage %+v", u)
	}
}

func TestRequestBodyStreams(t *testing.T) {
	// A body written in two parts, the second only after the first reached
	// the upstream, proves the proxy does not buffer it.
	pr, pw := io.Pipe()
	firstSeen := make(chan struct{})
	s := &seen{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return
		}
		close(firstSeen)
		rest, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.body = append(s.body, string(buf)+string(rest))
		s.mu.Unlock()
		w.WriteHeader(200)
	}))
	defer up.Close()
	p, err := New(Config{Upstream: up.URL, APIKey: realKey, Dir: filepath.Join(t.TempDir(), "p"), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.Open("g", "c")
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	c := unixClient(ep.Socket)
	go func() {
		_, _ = pw.Write([]byte("first"))
		<-firstSeen
		_, _ = pw.Write([]byte("-second"))
		_ = pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://x/v1/messages", pr)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if s.body[0] != "first-second" {
		t.Fatalf("body %q", s.body[0])
	}
}

func TestCancellationReachesUpstream(t *testing.T) {
	upstreamGone := make(chan struct{})
	started := make(chan struct{})
	_, c, _ := newProxy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sseEvent(w, "ping", `{"type":"ping"}`)
		close(started)
		<-r.Context().Done()
		close(upstreamGone)
	}, Config{APIKey: realKey})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/v1/messages", strings.NewReader("{}"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	cancel()
	resp.Body.Close()
	select {
	case <-upstreamGone:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request was not cancelled when the caller went away")
	}
}

func TestUpstreamCutReachesCaller(t *testing.T) {
	_, c, _ := newProxy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sseEvent(w, "ping", `{"type":"ping"}`)
		// Cut the connection mid-stream.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}, Config{APIKey: realKey})
	resp := post(t, c, "/v1/messages", "{}", nil)
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("a cut upstream stream ended cleanly for the caller")
	}
}

func TestEndpointCloseRemovesDirAndLongPaths(t *testing.T) {
	base := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 40))
	p, err := New(Config{APIKey: realKey, Dir: base, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.Open("g", "bridged-g-1732485000000-12")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(ep.Socket)
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o666 {
		t.Fatalf("socket %v: %v", st, err)
	}
	d, err := os.Open(ep.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	resp := post(t, unixClient(fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), SocketName)), "/v1/nothing", "{}", nil)
	if readAll(t, resp); resp.StatusCode != 403 {
		t.Fatal(resp.Status)
	}
	if err := ep.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ep.Dir); !os.IsNotExist(err) {
		t.Fatalf("dir left: %v", err)
	}
}

func TestCheck(t *testing.T) {
	var mu sync.Mutex
	var auth string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = r.Header.Get("X-Api-Key")
		mu.Unlock()
		if r.URL.Path != "/v1/messages/count_tokens" || auth != realKey {
			w.WriteHeader(401)
			fmt.Fprintf(w, `{"error":"bad key %s"}`, auth)
			return
		}
		fmt.Fprint(w, `{"input_tokens":3}`)
	}))
	defer up.Close()
	p, _ := New(Config{Upstream: up.URL, APIKey: realKey, Log: zerolog.Nop()})
	if err := p.Check(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	bad, _ := New(Config{Upstream: up.URL, APIKey: "sk-wrong", Log: zerolog.Nop()})
	err := bad.Check(context.Background(), nil)
	if err == nil || strings.Contains(err.Error(), "sk-wrong") || !strings.Contains(err.Error(), "refused the credential") {
		t.Fatalf("check: %v", err)
	}
}

func TestParseUpstream(t *testing.T) {
	for _, bad := range []string{"", "ftp://x", "http://", "https://u:p@x", "https://x?q=1", "x"} {
		if _, err := ParseUpstream(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if u, err := ParseUpstream("https://gw.example/anthropic/"); err != nil || u.String() != "https://gw.example/anthropic" {
		t.Fatal(u, err)
	}
}
