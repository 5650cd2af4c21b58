package credproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/testlog"
)

// syncBuf is a log sink safe for the proxy's goroutines.
type syncBuf struct {
	testlog.Buffer
}

func newSyncBuf() *syncBuf { return &syncBuf{} }

// wait returns the lines whose message is msg once there is one, failing
// the test if none comes within 30 s.
func (s *syncBuf) wait(t *testing.T, msg string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, func(string) bool { return len(s.lines(msg)) > 0 }); err != nil {
		t.Fatalf("no %q line within 30s:\n%s", msg, s)
	}
	return s.lines(msg)
}

// lines returns the log lines whose message is msg.
func (s *syncBuf) lines(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(s.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// limited starts a proxy with lim in front of h and returns it, the
// container's socket, a client of it, what the upstream saw and the log.
func limited(t *testing.T, h http.HandlerFunc, lim Limits) (*Proxy, string, *http.Client, *seen, *syncBuf) {
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
	logs := newSyncBuf()
	p, err := New(Config{Upstream: up.URL, APIKey: realKey, Dir: filepath.Join(t.TempDir(), "proxy"),
		Log: zerolog.New(logs), Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.Open("family", "bridged-family-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	return p, ep.Socket, unixClient(ep.Socket), s, logs
}

func dialUnix(t *testing.T, sock string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawRequest writes req on a fresh connection and reads the answer.
func rawRequest(t *testing.T, sock, req string) (*http.Response, string) {
	t.Helper()
	c := dialUnix(t, sock)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	return resp, readAll(t, resp)
}

// apiError decodes an Anthropic-shaped error body.
func apiError(t *testing.T, body string) (typ, msg string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Type != "error" {
		t.Fatalf("body %q is not an API error: %v", body, err)
	}
	return e.Error.Type, e.Error.Message
}

func TestUpgradeAndConnectRefused(t *testing.T) {
	_, sock, _, s, _ := limited(t, func(w http.ResponseWriter, r *http.Request) {}, Limits{})
	for _, req := range []string{
		"GET /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		"POST /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\nUpgrade: h2c\r\nContent-Length: 2\r\n\r\n{}",
		"POST /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nContent-Length: 2\r\n\r\n{}",
		"CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: api.anthropic.com:443\r\n\r\n",
		"CONNECT example.com:80 HTTP/1.1\r\nHost: example.com:80\r\n\r\n",
	} {
		resp, body := rawRequest(t, sock, req)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%q: %d %s; want 403", req, resp.StatusCode, body)
			continue
		}
		if typ, _ := apiError(t, body); typ != "permission_error" {
			t.Errorf("%q: error type %q; want permission_error", req, typ)
		}
	}
	if r, _ := s.last(); r != nil {
		t.Fatalf("the upstream got %s %s", r.Method, r.URL)
	}
}

func TestRequestBodyCap(t *testing.T) {
	_, sock, c, s, logs := limited(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":[]}`)
	}, Limits{MaxBody: 1024})

	// A declared length over the cap: 413 in the API's shape, nothing sent.
	resp := post(t, c, "/v1/messages", strings.Repeat("x", 1025), nil)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("1025-byte body: %d %s; want 413", resp.StatusCode, body)
	}
	if typ, msg := apiError(t, body); typ != "request_too_large" || !strings.Contains(msg, "1024") {
		t.Fatalf("1025-byte body: %s %q", typ, msg)
	}
	if r, _ := s.last(); r != nil {
		t.Fatal("the upstream got a body over the cap")
	}
	if got := logs.lines("API request refused"); len(got) != 1 || got[0]["reason_kind"] != reasonBody {
		t.Fatalf("refusal log %v; want one line for the body", got)
	}

	// At the cap: forwarded whole.
	resp = post(t, c, "/v1/messages", strings.Repeat("y", 1024), nil)
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("1024-byte body: %d %s", resp.StatusCode, body)
	}
	if _, b := s.last(); len(b) != 1024 {
		t.Fatalf("upstream got %d bytes; want 1024", len(b))
	}

	// No declared length (chunked): cut at the cap, never forwarded whole.
	conn := dialUnix(t, sock)
	fmt.Fprint(conn, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	for range 8 {
		fmt.Fprintf(conn, "%x\r\n%s\r\n", 512, strings.Repeat("z", 512))
	}
	fmt.Fprint(conn, "0\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	cresp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("a 4 KiB chunked body under a 1 KiB cap: %v", err)
	}
	cbody, _ := io.ReadAll(cresp.Body)
	if cresp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 4 KiB chunked body under a 1 KiB cap: %d %s; want 413", cresp.StatusCode, cbody)
	}
	if typ, _ := apiError(t, string(cbody)); typ != "request_too_large" {
		t.Fatalf("a 4 KiB chunked body under a 1 KiB cap: error type %q", typ)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.body {
		if len(b) > 1024 {
			t.Fatalf("the upstream got %d bytes of a chunked body over the 1024-byte cap", len(b))
		}
	}
}

func TestCredentialScrubbedFromResponses(t *testing.T) {
	half := len(realKey) / 2
	_, _, c, _, _ := limited(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", "key="+realKey)
		if strings.Contains(r.URL.RawQuery, "stream") {
			// The credential split across two flushed writes, then whole.
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: error\ndata: {\"message\":\"bad key %s", realKey[:half])
			w.(http.Flusher).Flush()
			fmt.Fprintf(w, "%s\"}\n\n", realKey[half:])
			w.(http.Flusher).Flush()
			fmt.Fprintf(w, "event: x\ndata: %s%s\n\n", realKey, realKey)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		body := fmt.Sprintf(`{"error":{"message":"invalid x-api-key: %s"}}`, realKey)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		fmt.Fprint(w, body)
	}, Limits{})
	for _, path := range []string{"/v1/messages", "/v1/messages?stream"} {
		resp := post(t, c, path, "{}", nil)
		body := readAll(t, resp)
		if strings.Contains(body, realKey) || strings.Contains(body, realKey[:half]+realKey[half:]) {
			t.Errorf("%s: the body holds the credential: %q", path, body)
		}
		if !strings.Contains(body, maskText[:8]) {
			t.Errorf("%s: body %q; want the mask where the credential was", path, body)
		}
		for k, vs := range resp.Header {
			if strings.Contains(strings.Join(vs, " "), realKey) {
				t.Errorf("%s: header %s holds the credential", path, k)
			}
		}
		if path == "/v1/messages" && resp.ContentLength != int64(len(body)) {
			t.Errorf("Content-Length %d for a %d-byte body", resp.ContentLength, len(body))
		}
	}
}

func TestEncodedResponseNotPassedOn(t *testing.T) {
	_, _, c, _, logs := limited(t, func(w http.ResponseWriter, r *http.Request) {
		// An upstream that compresses unasked: the proxy cannot look inside.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "br")
		fmt.Fprint(w, "\x8b\x02\x80opaque bytes that could hide "+realKey)
	}, Limits{})
	resp := post(t, c, "/v1/messages", "{}", nil)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, realKey) || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("an encoded answer came through as %d %v %q; want a 502 without it", resp.StatusCode, resp.Header, body)
	}
	if typ, _ := apiError(t, body); typ != "api_error" {
		t.Fatalf("error type %q", typ)
	}
	if len(logs.lines("API response not passed on: the upstream encoded its body, which cannot be checked for the credential")) != 1 {
		t.Fatalf("no line for the encoded answer:\n%s", logs)
	}
}

func TestScrubWriterHoldsOnlyAPossibleStart(t *testing.T) {
	cred := []byte("sk-secret")
	for _, tc := range []struct {
		in   string
		keep int
	}{
		{"abc", 0}, {"abcs", 1}, {"abcsk-sec", 6}, {"sk-secret", 0}, {"xs\n", 0}, {"sk-secres", 1},
	} {
		if got := partialTail([]byte(tc.in), cred); got != tc.keep {
			t.Errorf("partialTail(%q) = %d; want %d", tc.in, got, tc.keep)
		}
	}
	b := []byte("a sk-secret b sk-secretsk-secret")
	scrub(b, cred)
	if bytes.Contains(b, cred) || len(b) != 32 {
		t.Errorf("scrub left %q", b)
	}
}

func TestConnectionCapPerSocket(t *testing.T) {
	_, sock, c, _, logs := limited(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{}`)
	}, Limits{MaxConns: 4, LogEvery: time.Hour})
	held := make([]net.Conn, 4)
	for i := range held {
		held[i] = dialUnix(t, sock)
	}
	// One past the cap is closed at once, again and again.
	for range 200 {
		extra := dialUnix(t, sock)
		_ = extra.SetReadDeadline(time.Now().Add(30 * time.Second))
		if n, err := extra.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("a connection past the cap read %d bytes, %v; want it closed", n, err)
		}
		extra.Close()
	}
	if got := logs.lines("proxy connection refused: the container's socket is at its connection cap"); len(got) != 1 {
		t.Fatalf("%d refusal lines for 200 refused connections; want 1 per window", len(got))
	}
	// Held connections still work, and a freed slot is taken again.
	fmt.Fprint(held[0], "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	resp, err := http.ReadResponse(bufio.NewReader(held[0]), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a connection within the cap: %v %v", resp, err)
	}
	held[1].Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Post("http://x/v1/messages", "application/json", strings.NewReader("{}"))
		if err == nil {
			readAll(t, resp)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a freed slot was not taken again: %v", err)
		}
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "reset by peer") || strings.Contains(err.Error(), "broken pipe"))
}

func TestInFlightCapPerGroup(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 16)
	_, _, c, _, logs := limited(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sseEvent(w, "ping", `{"type":"ping"}`)
		started <- struct{}{}
		<-release
	}, Limits{MaxInFlight: 2})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // before the upstream closes
	var resps []*http.Response
	for range 2 {
		resps = append(resps, post(t, c, "/v1/messages", "{}", nil))
		<-started
	}
	third := *c
	third.Timeout = 30 * time.Second
	resp := post(t, &third, "/v1/messages", "{}", nil)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request in flight: %d %s; want 429", resp.StatusCode, body)
	}
	if typ, msg := apiError(t, body); typ != "rate_limit_error" || !strings.Contains(msg, "2 API requests in flight") {
		t.Fatalf("third request: %s %q", typ, msg)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	free()
	for _, r := range resps {
		readAll(t, r)
	}
	resp = post(t, c, "/v1/messages", "{}", nil)
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("after the streams ended: %d %s", resp.StatusCode, body)
	}
	if got := logs.lines("API request refused"); len(got) != 1 || got[0]["reason_kind"] != reasonInFlight {
		t.Fatalf("refusal log %v", got)
	}
}

func TestReadAndIdleTimeouts(t *testing.T) {
	const timeout = 300 * time.Millisecond
	_, sock, c, _, _ := limited(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sseEvent(w, "ping", `{"type":"ping"}`)
		// A stream longer than both timeouts is not cut by them.
		time.Sleep(3 * timeout)
		sseEvent(w, "message_stop", `{"type":"message_stop"}`)
	}, Limits{ReadTimeout: timeout, IdleTimeout: timeout})
	closed := func(name string, conn net.Conn) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		start := time.Now()
		_, err := io.ReadAll(conn)
		if err != nil && !isReset(err) {
			t.Fatalf("%s: %v; want the proxy to close it", name, err)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Fatalf("%s: closed after %s", name, took)
		}
	}
	closed("a connection that sends nothing", dialUnix(t, sock))
	half := dialUnix(t, sock)
	fmt.Fprint(half, "POST /v1/mess")
	closed("a connection whose headers never end", half)
	slow := dialUnix(t, sock)
	fmt.Fprint(slow, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	closed("a body that never arrives", slow)

	resp := post(t, c, "/v1/messages", "{}", nil)
	if body := readAll(t, resp); !strings.Contains(body, "message_stop") {
		t.Fatalf("a stream longer than the timeouts was cut: %q", body)
	}
	ka := dialUnix(t, sock)
	fmt.Fprint(ka, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	br := bufio.NewReader(ka)
	kresp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(kresp.Body); err != nil {
		t.Fatal(err)
	}
	closed("an idle keep-alive connection", ka)
}

func TestRefusalLogRateLimited(t *testing.T) {
	p, _, c, _, logs := limited(t, func(w http.ResponseWriter, r *http.Request) {}, Limits{LogEvery: time.Hour})
	now := time.Now()
	var mu sync.Mutex
	p.lim.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	for range 300 {
		resp, err := c.Get("http://x/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		if readAll(t, resp); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("GET /v1/models: %d", resp.StatusCode)
		}
	}
	if got := logs.lines("API request refused"); len(got) != 1 {
		t.Fatalf("%d refusal lines for 300 refusals in one window; want 1", len(got))
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	resp, _ := c.Get("http://x/v1/models")
	readAll(t, resp)
	got := logs.lines("API request refused")
	if len(got) != 2 || got[1]["suppressed"] != float64(299) {
		t.Fatalf("lines %v; want a second line saying 299 were suppressed", got)
	}
}

func TestAbortedStreamLogged(t *testing.T) {
	const msg = "API response stream aborted"
	t.Run("upstream cut", func(t *testing.T) {
		_, _, c, _, logs := limited(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sseEvent(w, "ping", `{"type":"ping"}`)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		}, Limits{})
		resp := post(t, c, "/v1/messages", "{}", nil)
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Fatal("a cut upstream stream ended cleanly for the caller")
		}
		resp.Body.Close()
		// The line is written before the proxy cuts the caller's connection.
		got := logs.lines(msg)
		if len(got) != 1 {
			t.Fatalf("%d lines for a stream cut by the upstream; want 1:\n%s", len(got), logs)
		}
		if l := got[0]; l["group"] != "family" || l["status"] != float64(200) || !strings.Contains(fmt.Sprint(l["cause"]), "upstream") {
			t.Fatalf("abort line %v", l)
		}
	})
	t.Run("caller gone", func(t *testing.T) {
		started := make(chan struct{})
		_, _, c, _, logs := limited(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sseEvent(w, "ping", `{"type":"ping"}`)
			close(started)
			<-r.Context().Done()
		}, Limits{})
		resp := post(t, c, "/v1/messages", "{}", nil)
		<-started
		resp.Body.Close()
		if l := logs.wait(t, msg)[0]; !strings.Contains(fmt.Sprint(l["cause"]), "went away") {
			t.Fatalf("abort line %v; want the container gone as its cause", l)
		}
	})
	t.Run("caller stops reading", func(t *testing.T) {
		_, sock, _, _, logs := limited(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			chunk := "data: " + strings.Repeat("x", 64<<10) + "\n\n"
			for range 256 { // 16 MiB, far more than the socket buffers hold
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}, Limits{IdleTimeout: 300 * time.Millisecond})
		conn := dialUnix(t, sock)
		fmt.Fprint(conn, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
		// Nothing is read: the proxy's writes stall, then it gives up.
		if l := logs.wait(t, msg)[0]; !strings.Contains(fmt.Sprint(l["cause"]), "stopped reading") {
			t.Fatalf("abort line %v; want the stalled reader as its cause", l)
		}
	})
}

// A stream that reached its message_stop is complete: a container that
// closes it then (the CLI does, before the upstream's own end) cut
// nothing, and no abort is logged; a stream cut before its end still is.
func TestStreamEndClosed(t *testing.T) {
	const aborted = "API response stream aborted"
	for _, c := range []struct {
		name string
		stop bool // the upstream sends message_stop before it lingers
	}{{"ended", true}, {"cut", false}} {
		t.Run(c.name, func(t *testing.T) {
			sent := make(chan struct{})
			_, _, cl, _, logs := limited(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				sseEvent(w, "message_start", `{"type":"message_start","message":{"model":"claude-opus-4-5","usage":{"input_tokens":10,"output_tokens":1}}}`)
				sseEvent(w, "content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"hi"}}`)
				sseEvent(w, "message_delta", `{"type":"message_delta","usage":{"output_tokens":3}}`)
				if c.stop {
					// Split across two writes, as a network may deliver it.
					fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"mess")
					w.(http.Flusher).Flush()
					fmt.Fprint(w, "age_stop\"}\n\n")
					w.(http.Flusher).Flush()
				}
				close(sent)
				<-r.Context().Done() // the upstream has not ended its body yet
			}, Limits{})
			resp := post(t, cl, "/v1/messages", `{"stream":true}`, nil)
			<-sent
			br := bufio.NewReader(resp.Body)
			for c.stop {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("stream ended before its message_stop: %v", err)
				}
				if strings.Contains(line, `"message_stop"`) {
					break
				}
			}
			resp.Body.Close() // the container is done with it
			if !c.stop {
				logs.wait(t, aborted) // cut before its end: told
				return
			}
			logs.wait(t, completeClosed)
			if got := logs.lines(aborted); len(got) != 0 {
				t.Fatalf("a complete stream was logged as aborted: %v", got)
			}
		})
	}
}

// BenchmarkGuard is what the limits and the scrubbing add to one streamed
// response of eight events (the handler behind them does nothing else).
func BenchmarkGuard(b *testing.B) {
	p, err := New(Config{APIKey: "sk-ant-api03-" + strings.Repeat("k", 95), Dir: b.TempDir(), Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	ev := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"some words of an answer\"}}\n\n")
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 8 {
			_, _ = w.Write(ev)
			w.(http.Flusher).Flush()
		}
	})
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare", stream}, {"guarded", p.guard("g", "c", stream)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader("{}"))
				c.h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}

// The end of a stream is seen however the writes split it, and never in a
// text that quotes it.
func TestSawEnd(t *testing.T) {
	const end = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, c := range []struct {
		name   string
		writes []string
		want   bool
	}{
		{"whole", []string{end}, true},
		{"split in two", []string{end[:30], end[30:]}, true},
		{"a byte at a time", strings.Split(end, ""), true},
		{"after other events", []string{"data: {\"type\":\"ping\"}\n\n", end}, true},
		{"quoted in a text", []string{`data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"{\"type\":\"message_stop\"}"}}` + "\n\n"}, false},
		{"cut short", []string{end[:40]}, false},
	} {
		g := &guardWriter{}
		for _, w := range c.writes {
			g.sawEnd([]byte(w))
		}
		if g.ended != c.want {
			t.Errorf("%s: ended %v; want %v", c.name, g.ended, c.want)
		}
	}
}
