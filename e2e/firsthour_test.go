package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// refusingUpstream is a Messages API that refuses every request with one
// HTTP status and error type, and records the prompt of each.
type refusingUpstream struct {
	srv     *httptest.Server
	mu      sync.Mutex
	prompts []string
}

func newRefusingUpstream(t *testing.T, status int, typ, msg string) *refusingUpstream {
	u := &refusingUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(body, &req)
		p := ""
		if len(req.Messages) > 0 && len(req.Messages[0].Content) > 0 {
			p = req.Messages[0].Content[0].Text
		}
		u.mu.Lock()
		u.prompts = append(u.prompts, p)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *refusingUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.prompts...)
}

// An API key the API refuses (401) fails the turn at once: no back-off
// retries, one notice in the chat naming the fix, one alert to the owner;
// a later message, and a restart, do not run the failed message again.
func TestE2EAPIKeyRefusedFailsAtOnce(t *testing.T) {
	up := newRefusingUpstream(t, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.srv.URL}
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "team", "--no-trigger", "local:team")
	d := e.start()
	mainFrom := lastID(e, "local:main")

	// The default retry base is 5 s: the six attempts of a retried failure
	// take over 2.5 minutes, and the first retry comes 5 s after the first
	// failure. The notice must come well before that.
	began := time.Now()
	id := e.post("local:team", "fake:api first question")
	notice := e.waitOut("local:team", id, 1, 75*time.Second)[0].Text
	took := time.Since(began)
	if !strings.Contains(notice, "ANTHROPIC_API_KEY") || !strings.Contains(notice, "401") || !strings.Contains(notice, "restart") {
		t.Errorf("team got %q; want a notice naming the refused key (401) and the fix", notice)
	}
	t.Logf("the refused turn was told after %s", took.Round(time.Millisecond))
	alert := e.waitOut("local:main", mainFrom, 1, 30*time.Second)[0].Text
	if !strings.Contains(alert, "team") || !strings.Contains(alert, "401") || !strings.Contains(alert, "ANTHROPIC_API_KEY") {
		t.Errorf("main chat got %q; want the owner alerted of the refused key", alert)
	}
	if p := up.seen(); len(p) != 1 {
		t.Errorf("the API was asked %d times (%q); want once, no retry", len(p), p)
	}

	// A later message runs once, on its own: the failed one is not run again.
	id = e.post("local:team", "fake:api second question")
	if got := e.waitOut("local:team", id, 1, 60*time.Second)[0].Text; !strings.Contains(got, "ANTHROPIC_API_KEY") {
		t.Errorf("team got %q for the second message; want the notice again", got)
	}
	if p := up.seen(); len(p) != 2 || p[1] != "second question" {
		t.Errorf("the API was asked %q; want the first question once, then the second once", p)
	}

	// A restart runs nothing again either.
	d.stop(t)
	d = e.start()
	id = e.post("local:team", "fake:api third question")
	e.waitOut("local:team", id, 1, 60*time.Second)
	if p := up.seen(); len(p) != 3 || p[2] != "third question" {
		t.Errorf("after a restart the API was asked %q; want each question once", p)
	}
	// One alert: the owner was told once.
	if told := e.outSince("local:main", mainFrom); len(told) != 1 {
		t.Errorf("main chat got %d messages %+v; want the one alert", len(told), told)
	}
	if took > 45*time.Second {
		t.Errorf("the refused turn was told after %s; want it at once, not after back-off", took.Round(time.Second))
	}
	d.stop(t)
}
