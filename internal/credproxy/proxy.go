// Package credproxy is the daemon's credential proxy: the Claude credential
// never enters a container (DESIGN §14). Each container gets its own unix
// socket in a daemon-owned directory (data/proxy/<container>/api.sock),
// mounted read-only into it; inside, the agent runner forwards
// 127.0.0.1:<port> to that socket and claude talks to it with a worthless
// placeholder credential. The proxy forwards only the Messages API to the
// configured upstream and puts the real credential on each request,
// replacing whatever the container sent:
//
//   - ANTHROPIC_API_KEY: x-api-key;
//   - CLAUDE_CODE_OAUTH_TOKEN: Authorization: Bearer, plus the OAuth beta in
//     anthropic-beta.
//
// Everything else is refused with a 403 whose body says why. With no
// credential configured every forwarded path answers 401 with a body naming
// the variables to set. Request and response bodies stream; server-sent
// events are flushed one by one; a caller that goes away cancels the
// upstream request, and the upstream's own errors (status and body) pass
// through unchanged, so the CLI's retry logic sees what it would see
// directly.
//
// The group a request belongs to is known from the socket it arrived on:
// each request is logged with it. The proxy is also the meter (ledger.go):
// each response's usage is priced from the pricing table (pricing.go) and
// committed to the Ledger, which budgets read; a group at its daily budget
// is refused with a 429 before its request leaves, and every request
// reserves its worst case against what is left (reserve.go). The token usage is
// also added to the group's live tally (Usage), which `bridged status` shows
// while a turn is still running.
package credproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Credential variable names, read by the daemon only.
const (
	EnvAPIKey     = "ANTHROPIC_API_KEY"
	EnvOAuthToken = "CLAUDE_CODE_OAUTH_TOKEN"
)

// DefaultUpstream is the Anthropic API.
const DefaultUpstream = "https://api.anthropic.com"

// SocketName is the socket's file name in its directory.
const SocketName = "api.sock"

// OAuthBeta is the anthropic-beta value the API wants with an OAuth token.
const OAuthBeta = "oauth-2025-04-20"

// Modes: which credential the proxy adds. The runner gives claude a
// placeholder of the same kind, so the CLI behaves as it would with the
// real one.
const (
	ModeAPIKey = "api-key"
	ModeOAuth  = "oauth"
	ModeNone   = "none"
)

// Placeholder is the credential claude gets inside a container: it is
// worthless anywhere but on the way to this proxy, which drops it.
const Placeholder = "bridged-proxy-placeholder-not-a-credential"

// Paths the Claude CLI uses (the recordings show only POST
// /v1/messages?beta=true; count_tokens is its other Messages API call).
var allowedPaths = map[string]bool{
	"/v1/messages":              true,
	"/v1/messages/count_tokens": true,
}

// Config configures a Proxy.
type Config struct {
	// Upstream is the API base URL (DefaultUpstream if empty); a gateway
	// with a path prefix works too.
	Upstream string
	// APIKey wins over OAuthToken when both are set, as in the CLI.
	APIKey, OAuthToken string
	// Dir holds one directory per container (data/proxy). Daemon-owned.
	Dir string
	// Limits bound what one container can make the proxy hold (limits.go).
	Limits Limits
	// Transport reaches the upstream (a clone of http.DefaultTransport if
	// nil).
	Transport http.RoundTripper
	// Ledger records the metered usage and admits requests (nil: nowhere,
	// everyone).
	Ledger Ledger
	Log    zerolog.Logger
}

// Proxy is the credential proxy. Create it with New.
type Proxy struct {
	upstream *url.URL
	mode     string
	cred     string
	tally    credTally // the upstream's 401s and 2xx, for status and config
	dir      string
	rp       *httputil.ReverseProxy
	log      zerolog.Logger
	lim      *limiter

	ledger Ledger // nil: no meter, every request admitted

	mu       sync.Mutex
	usage    map[string]*Usage
	refusing map[string]bool   // groups whose last request was refused by their budget
	purses   map[string]*purse // each group's reservations (reserve.go)
	unknown  map[string]bool   // models priced as the priciest family, logged once
}

// Usage is a group's API usage seen by the proxy since the daemon started.
type Usage struct {
	Requests                 int64     `json:"requests"`
	InputTokens              int64     `json:"input_tokens"`
	OutputTokens             int64     `json:"output_tokens"`
	CacheCreationInputTokens int64     `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64     `json:"cache_read_input_tokens"`
	CostUSD                  float64   `json:"cost_usd"` // priced from the pricing table
	Last                     time.Time `json:"last"`
}

// New checks cfg and returns a proxy; it listens on nothing until Open.
func New(cfg Config) (*Proxy, error) {
	raw := cfg.Upstream
	if raw == "" {
		raw = DefaultUpstream
	}
	u, err := ParseUpstream(raw)
	if err != nil {
		return nil, err
	}
	p := &Proxy{upstream: u, dir: cfg.Dir, log: cfg.Log.With().Str("component", "credproxy").Logger(), usage: map[string]*Usage{},
		refusing: map[string]bool{}, unknown: map[string]bool{}, purses: map[string]*purse{}}
	switch {
	case cfg.APIKey != "":
		p.mode, p.cred = ModeAPIKey, cfg.APIKey
	case cfg.OAuthToken != "":
		p.mode, p.cred = ModeOAuth, cfg.OAuthToken
	default:
		p.mode = ModeNone
	}
	p.ledger = cfg.Ledger
	tr := cfg.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = 0
		t.MaxIdleConnsPerHost = 16
		tr = t
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      tr,
		FlushInterval:  -1, // every write reaches the client at once
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		ErrorLog:       stdlog.New(debugWriter{p.log}, "", 0),
	}
	p.lim = newLimiter(cfg.Limits)
	return p, nil
}

// debugWriter sends the reverse proxy's own messages (a stream cut in the
// middle) to the debug log.
type debugWriter struct{ log zerolog.Logger }

func (d debugWriter) Write(b []byte) (int, error) {
	d.log.Debug().Msg(strings.TrimSpace(string(b)))
	return len(b), nil
}

// ParseUpstream checks an upstream base URL (http or https, a host, no
// query, no credentials in it).
func ParseUpstream(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("upstream URL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("upstream URL %q: want http(s)://host[:port][/path] without query or user info", raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Mode is the kind of credential added: ModeAPIKey, ModeOAuth or ModeNone.
func (p *Proxy) Mode() string { return p.mode }

// Upstream is the upstream base URL.
func (p *Proxy) Upstream() string { return p.upstream.String() }

// NoCredentialMessage names the variables to set; it is the body of the
// proxy's 401 and what status and doctor say.
const NoCredentialMessage = "bridged has no Claude credential: set " + EnvAPIKey + " (an API key) or " +
	EnvOAuthToken + " (from `claude setup-token`) in the daemon's environment or env file, then restart it"

// Endpoint is one container's socket.
type Endpoint struct {
	Dir    string // the directory to mount read-only into the container
	Socket string // Dir/api.sock
	srv    *http.Server
	ln     net.Listener
	p      *Proxy
	once   sync.Once
	served chan struct{} // closed when the serving goroutine has returned
}

// Close stops serving the socket (in-flight requests are cut) and removes
// its directory.
func (e *Endpoint) Close() error {
	var err error
	e.once.Do(func() {
		err = e.srv.Close()
		<-e.served
		if rerr := os.RemoveAll(e.Dir); rerr != nil && err == nil {
			err = rerr
		}
	})
	return err
}

// Open creates <Dir>/<name>/api.sock for the container name of group and
// serves it until the Endpoint is closed. A leftover directory of the same
// name is replaced.
func (p *Proxy) Open(group, name string) (*Endpoint, error) {
	if p.dir == "" {
		return nil, errors.New("credential proxy: no socket directory configured")
	}
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("credential proxy: bad container name %q", name)
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, fmt.Errorf("credential proxy: %w", err)
	}
	dir := filepath.Join(p.dir, name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("credential proxy: remove leftover %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("credential proxy: %w", err)
	}
	// Bind through the directory's descriptor: the socket path may be
	// longer than a sockaddr_un holds.
	d, err := os.Open(dir)
	if err == nil {
		// The umask narrowed the mode (the unit's is 0027): the
		// container's user, another uid, must reach the socket.
		if err = d.Chmod(0o755); err != nil {
			d.Close()
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("credential proxy: %w", err)
	}
	defer d.Close()
	sock := filepath.Join(dir, SocketName)
	bindPath := sock
	if len(bindPath) > 100 {
		bindPath = fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), SocketName)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bindPath, Net: "unix"})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("credential proxy: listen on %s: %w", sock, err)
	}
	ln.SetUnlinkOnClose(false)
	// The container's user connects; the directory is what guards it.
	if err := os.Chmod(sock, 0o666); err != nil {
		_ = ln.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("credential proxy: %w", err)
	}
	e := &Endpoint{Dir: dir, Socket: sock, ln: ln, p: p, served: make(chan struct{})}
	e.srv = p.server(p.guard(group, name, p.Handler(group, name)))
	e.srv.ErrorLog = stdlog.New(debugWriter{p.log}, "", 0)
	go func() {
		defer close(e.served)
		_ = e.srv.Serve(p.listen(ln, group, name))
	}()
	p.log.Debug().Str("group", group).Str("container", name).Msg("proxy socket open")
	return e, nil
}

// Handler serves the requests of group's container name (Open uses it; tests
// and benchmarks call it directly).
func (p *Proxy) Handler(group, name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		log := p.log.With().Str("group", group).Str("container", name).Str("method", r.Method).Str("path", r.URL.Path).Logger()
		if reason := refused(r); reason != "" {
			log.Warn().Str("reason", reason).Msg("API request refused")
			writeError(w, http.StatusForbidden, "permission_error", "bridged credential proxy: "+reason)
			return
		}
		if p.mode == ModeNone {
			log.Warn().Msg("API request answered 401: no credential configured")
			writeError(w, http.StatusUnauthorized, "authentication_error", NoCredentialMessage)
			return
		}
		h, ok := p.admit(w, r, group)
		if !ok {
			return
		}
		// However the request ends, its reservation ends with it: charged
		// by the meter, or freed here.
		defer h.settle(0)
		rec := &statusRecorder{ResponseWriter: w}
		ctx := context.WithValue(r.Context(), requestKey{}, requestMeta{group: group, hold: h})
		p.rp.ServeHTTP(rec, r.WithContext(ctx))
		p.tally.note(rec.status, time.Now())
		log.Info().Int("status", rec.status).Dur("took", time.Since(start)).Msg("API request")
	})
}

// refused says why r is not forwarded ("" if it is).
func refused(r *http.Request) string {
	if r.Method == http.MethodConnect || r.URL.IsAbs() || r.URL.Host != "" {
		return fmt.Sprintf("only the Claude Messages API is forwarded, to the configured upstream; %s %s refused", r.Method, r.RequestURI)
	}
	if r.Method != http.MethodPost || !allowedPaths[r.URL.Path] {
		return fmt.Sprintf("only the Claude Messages API is forwarded (POST %s); %s %s refused",
			strings.Join(sortedPaths(), ", POST "), r.Method, r.URL.Path)
	}
	return ""
}

func sortedPaths() []string {
	out := make([]string, 0, len(allowedPaths))
	for p := range allowedPaths {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// requestKey keys an API request's requestMeta in its context, for its
// response's meter.
type requestKey struct{}

// requestMeta is what the meter of a response needs of its request: the
// group that sent it and its budget reservation (nil: none), which the
// meter settles with what the response carried.
type requestMeta struct {
	group string
	hold  *hold
}

// rewrite points the request at the upstream with the real credential.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.upstream)
	pr.Out.URL.RawQuery = pr.In.URL.RawQuery
	h := pr.Out.Header
	for _, k := range []string{"X-Api-Key", "Authorization", "Proxy-Authorization", "Cookie", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Accept-Encoding"} {
		h.Del(k)
	}
	switch p.mode {
	case ModeAPIKey:
		h.Set("X-Api-Key", p.cred)
	case ModeOAuth:
		h.Set("Authorization", "Bearer "+p.cred)
		if !hasBeta(h.Values("Anthropic-Beta"), OAuthBeta) {
			if cur := h.Get("Anthropic-Beta"); cur != "" {
				h.Set("Anthropic-Beta", cur+","+OAuthBeta)
			} else {
				h.Set("Anthropic-Beta", OAuthBeta)
			}
		}
	}
}

func hasBeta(values []string, beta string) bool {
	for _, v := range values {
		for _, b := range strings.Split(v, ",") {
			if strings.TrimSpace(b) == beta {
				return true
			}
		}
	}
	return false
}

// AuthHeaders sets the credential on a request the daemon itself makes
// (doctor's check).
func (p *Proxy) AuthHeaders(h http.Header) {
	switch p.mode {
	case ModeAPIKey:
		h.Set("X-Api-Key", p.cred)
	case ModeOAuth:
		h.Set("Authorization", "Bearer "+p.cred)
		h.Set("Anthropic-Beta", OAuthBeta)
	}
}

func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		// The caller went away; nobody to answer.
		return
	}
	p.log.Warn().Err(err).Str("path", r.URL.Path).Msg("upstream request failed")
	writeError(w, http.StatusBadGateway, "api_error", "bridged credential proxy: the upstream API could not be reached: "+err.Error())
}

// writeError answers in the API's own error shape.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	body, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{typ, msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// modifyResponse meters a successful response as it streams by. The proxy
// asks for no encoding; a body the upstream encodes anyway is refused by the
// guard (502), which checks every response for the credential.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	rm, _ := resp.Request.Context().Value(requestKey{}).(requestMeta)
	group := rm.group
	p.add(group, Usage{Requests: 1})
	if resp.StatusCode/100 != 2 {
		return nil
	}
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	resp.Body = &meter{rc: resp.Body, sse: sse, p: p, group: group, hold: rm.hold}
	return nil
}

// Usage returns each group's tally since the daemon started.
func (p *Proxy) Usage() map[string]Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]Usage, len(p.usage))
	for g, u := range p.usage {
		out[g] = *u
	}
	return out
}

// Check makes a cheap authenticated request to the upstream (a
// count_tokens call) and reports whether the credential is accepted. The
// error never contains the credential.
func (p *Proxy) Check(ctx context.Context, client *http.Client) error {
	if p.mode == ModeNone {
		return errors.New(NoCredentialMessage)
	}
	body := `{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"ping"}]}`
	u := *p.upstream
	u.Path += "/v1/messages/count_tokens"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	p.AuthHeaders(req.Header)
	if client == nil {
		client = &http.Client{Transport: p.rp.Transport}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s does not answer: %w", p.upstream.Redacted(), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return refusedError(fmt.Sprintf("%s refused the credential (%s): %s", p.upstream.Redacted(), resp.Status, strings.TrimSpace(p.scrub(string(msg)))))
	default:
		return fmt.Errorf("%s answered %s: %s", p.upstream.Redacted(), resp.Status, strings.TrimSpace(p.scrub(string(msg))))
	}
}

// scrub removes the credential from s, should an upstream echo it.
func (p *Proxy) scrub(s string) string {
	if p.cred == "" {
		return s
	}
	return strings.ReplaceAll(s, p.cred, "<credential>")
}
