package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A complete stream is no abort: claude reads a streamed answer to its
// message_stop and closes it while the upstream has not ended its body
// yet (as the real API and CLI do); the proxy logs no "stream aborted" for
// it, and a stream the upstream cuts before its end is still logged.
func TestE2ECompleteStreamIsNoAbort(t *testing.T) {
	parallel(t, light)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cut := strings.Contains(string(body), "cut here")
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(typ, data string) {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
			w.(http.Flusher).Flush()
		}
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","model":"claude-sonnet-4-5","usage":{"input_tokens":12,"output_tokens":1}}}`)
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"streamed to the end"}}`)
		if cut {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`)
		ev("message_stop", `{"type":"message_stop"}`)
		// The body's own end comes later; claude does not wait for it.
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}))
	t.Cleanup(up.Close)
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.URL}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()

	if got := e.ask("local:main", "fake:api stream", 90*time.Second); got != "streamed to the end" {
		t.Fatalf("streamed reply %q; want the text", got)
	}
	// Either line is written once claude closed the stream.
	if !d.waitLog(`"message":"API response stream `, 60*time.Second) {
		t.Fatal("the proxy logged nothing of the stream's end")
	}
	if logs := d.logs(); strings.Contains(logs, "API response stream aborted") || !strings.Contains(logs, "API response stream closed after its end") {
		t.Fatalf("a complete stream was logged as aborted, or not as closed after its end:\n%s", tail(logs, 30))
	}

	e.post("local:main", "fake:api stream cut here")
	if !d.waitLog("API response stream aborted", 90*time.Second) {
		t.Fatal("the proxy did not log the stream cut before its end")
	}
	d.stop(t)
}
