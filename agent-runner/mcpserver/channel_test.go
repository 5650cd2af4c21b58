package mcpserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/bridged-app/bridged/internal/ipc"
)

// channelHost is the host's side of the IPC channel as the tools see it:
// it drops the connection of the first sending of each request, then
// answers with handle.
type channelHost struct {
	mu    sync.Mutex
	seen  map[string]int // sendings per request id
	paths []string
}

func (h *channelHost) serve(t *testing.T, handle func(req ipc.Request) (int, ipc.Response)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		req, err := ipc.DecodeRequest(data)
		h.mu.Lock()
		h.paths = append(h.paths, r.Method+" "+r.URL.Path)
		h.seen[req.ID]++
		n := h.seen[req.ID]
		h.mu.Unlock()
		if err != nil {
			t.Errorf("the host cannot decode the request %s: %v", data, err)
		}
		if n == 1 {
			// The connection drops before the answer.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		status, resp := handle(req)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Over the channel (the kubernetes engine) a tool's request goes to the
// host on the connection, nothing is written to the IPC directory, and a
// request whose connection dropped is sent again with the same id.
func TestToolOverTheChannelIsSentAgainAfterADrop(t *testing.T) {
	h := &channelHost{seen: map[string]int{}}
	srv := h.serve(t, func(req ipc.Request) (int, ipc.Response) {
		resp, _ := ipc.OKResponse(req.ID, ipc.SendResult{OutboxID: 7, Chat: "120363000000000001@g.us"})
		return http.StatusOK, resp
	})
	cfg := testConfig(t, false)
	cfg.Channel = srv.URL
	cs := startServer(t, cfg)
	text, isErr := resultText(t, await(t, callAsync(cs, "send_message", map[string]any{"text": "across nodes"})))
	if isErr || text != "Message queued for delivery to this chat." {
		t.Errorf("got %q (error %v); want the delivery confirmation", text, isErr)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) != 1 {
		t.Fatalf("request ids sent %v; want one id", h.seen)
	}
	for id, n := range h.seen {
		if n != 2 {
			t.Errorf("request %s sent %d times; want twice (once more after the drop)", id, n)
		}
	}
	for _, p := range h.paths {
		if p != "POST "+ipc.ChannelRequest {
			t.Errorf("the tool called %s; want POST %s", p, ipc.ChannelRequest)
		}
	}
	noRequests(t, ipc.Layout{Root: cfg.IPCDir})
}

// A request the host refuses unread (malformed, too large) is told to the
// agent with the host's reason, not sent again.
func TestChannelRefusalIsToldToTheAgent(t *testing.T) {
	h := &channelHost{seen: map[string]int{}}
	srv := h.serve(t, func(req ipc.Request) (int, ipc.Response) {
		return http.StatusRequestEntityTooLarge, ipc.Response{Error: "malformed request: over 1048576 bytes"}
	})
	cfg := testConfig(t, false)
	cfg.Channel = srv.URL
	cs := startServer(t, cfg)
	text, isErr := resultText(t, await(t, callAsync(cs, "send_message", map[string]any{"text": "big"})))
	if !isErr || !strings.Contains(text, "over 1048576 bytes") {
		t.Errorf("got %q (error %v); want the host's reason", text, isErr)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, n := range h.seen {
		if n != 2 {
			t.Errorf("request %s sent %d times; want twice (the drop, then the refusal, not retried)", id, n)
		}
	}
}
