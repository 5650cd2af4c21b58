package credproxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
)

// The proxy counts the upstream's 401s and successes: a refused key shows
// as refused until a request is accepted again.
func TestCredentialStateCountsRefusals(t *testing.T) {
	var code atomic.Int32
	code.Store(http.StatusUnauthorized)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(code.Load()))
		_, _ = w.Write([]byte(`{}`))
	}))
	defer up.Close()
	p, err := New(Config{Upstream: up.URL, APIKey: realKey, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	send := func() {
		rec := httptest.NewRecorder()
		p.Handler("g", "c").ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader("{}")))
	}
	if s := p.CredentialState(); s.Refused != 0 || s.Accepted != 0 || s.RefusedNow() {
		t.Fatalf("fresh proxy: %+v", s)
	}
	send()
	send()
	if s := p.CredentialState(); s.Refused != 2 || !s.RefusedNow() {
		t.Errorf("after two 401s: %+v; want 2 refused, refused now", s)
	}
	code.Store(http.StatusOK)
	send()
	if s := p.CredentialState(); s.Accepted != 1 || s.RefusedNow() {
		t.Errorf("after a 200: %+v; want accepted, no longer refused", s)
	}
}
