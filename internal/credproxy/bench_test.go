package credproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// loopbackForwarder stands for the agent runner's forwarder: 127.0.0.1:<port>
// piped byte for byte to the proxy's unix socket.
func loopbackForwarder(tb testing.TB, sock string) string {
	return forwarderTo(tb, func() (net.Conn, error) { return net.Dial("unix", sock) })
}

// forwarderTo is a loopback forwarder to what dial reaches.
func forwarderTo(tb testing.TB, dial func() (net.Conn, error)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := dial()
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{}, 2)
				go func() {
					io.Copy(u, c)
					u.(interface{ CloseWrite() error }).CloseWrite()
					done <- struct{}{}
				}()
				go func() { io.Copy(c, u); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
				<-done
				<-done
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// BenchmarkProxyOverhead measures what the credential proxy (with a
// loopback forwarder in front, as inside a container) adds to a Messages
// API request against a local upstream: the median and p99 of the whole
// request (JSON answer) and of the time to the first streamed byte, each
// compared with the same request sent to the upstream directly.
func BenchmarkProxyOverhead(b *testing.B) { benchProxyOverhead(b, false) }

// BenchmarkProxyOverheadTCP is BenchmarkProxyOverhead across nodes (the
// kubernetes engine): the forwarder dials the proxy's TCP listener and
// sends the run's token line first on each connection.
func BenchmarkProxyOverheadTCP(b *testing.B) { benchProxyOverhead(b, true) }

func benchProxyOverhead(b *testing.B, overTCP bool) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.Contains(r.URL.RawQuery, "stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
			w.(http.Flusher).Flush()
			for i := 0; i < 5; i++ {
				fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"w%d \"}}\n\n", i)
				w.(http.Flusher).Flush()
			}
			fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":[{"type":"text","text":"hi"}],"model":"claude-sonnet-4-5","usage":{"input_tokens":10,"output_tokens":2}}`)
	}))
	defer up.Close()
	p, err := New(Config{Upstream: up.URL, APIKey: "sk-bench", Dir: filepath.Join(b.TempDir(), "proxy"), Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	ep, err := p.Open("bench", "c1")
	if err != nil {
		b.Fatal(err)
	}
	defer ep.Close()
	viaProxy := loopbackForwarder(b, ep.Socket)
	if overTCP {
		t, err := p.ListenTCP("127.0.0.1:0", "", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer t.Close()
		token, closeFn, err := t.OpenTCP("bench", "c1")
		if err != nil {
			b.Fatal(err)
		}
		defer closeFn()
		viaProxy = forwarderTo(b, func() (net.Conn, error) {
			c, err := net.Dial("tcp", t.Addr())
			if err == nil {
				_, err = io.WriteString(c, ipc.ProxyTokenLine+token+"\n")
			}
			return c, err
		})
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	body := strings.Repeat("x", 8<<10) // a small conversation

	// one returns the time to the first body byte and to the end.
	one := func(base, query string) (first, total time.Duration) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/messages"+query, strings.NewReader(body))
		req.Header.Set("X-Api-Key", Placeholder)
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			b.Fatal(err)
		}
		first = time.Since(t0)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return first, time.Since(t0)
	}
	n := max(b.N, 500)
	measure := func(base, query string, wantFirst bool) []time.Duration {
		for range 20 { // warm the connections
			one(base, query)
		}
		out := make([]time.Duration, 0, n)
		for range n {
			f, t := one(base, query)
			if wantFirst {
				out = append(out, f)
			} else {
				out = append(out, t)
			}
		}
		slices.Sort(out)
		return out
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pct := func(s []time.Duration, q int) time.Duration { return s[min(len(s)-1, len(s)*q/100)] }
	b.ResetTimer()
	for _, c := range []struct {
		name, query string
		first       bool
	}{{"request", "", false}, {"first streamed byte", "?stream=1", true}} {
		direct := measure(up.URL, c.query, c.first)
		proxied := measure(viaProxy, c.query, c.first)
		added := ms(pct(proxied, 50) - pct(direct, 50))
		b.ReportMetric(added, strings.ReplaceAll(c.name, " ", "-")+"-ms-added-median")
		over := ""
		if overTCP {
			over = " over TCP"
		}
		fmt.Printf("credential proxy%s, %s (%d samples): direct median %.3f ms p99 %.3f ms; through forwarder+proxy median %.3f ms p99 %.3f ms; added median %.3f ms\n",
			over, c.name, n, ms(pct(direct, 50)), ms(pct(direct, 99)), ms(pct(proxied, 50)), ms(pct(proxied, 99)), added)
	}
}
