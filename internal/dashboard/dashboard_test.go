package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// markup is chat text a member wrote that must render as text.
const markup = `<script>alert("x")</script><img src=x onerror=alert(1)> & <b>bold</b>`

// fakeSource is the daemon's live part, empty but for a channel.
type fakeSource struct{ admin *control.Admin }

func (f fakeSource) Status(ctx context.Context) (control.Status, error) {
	st, err := f.admin.Status(ctx)
	st.Running = true
	st.Channels = []control.ChannelStatus{{Name: "local", State: "connected"},
		{Name: "telegram", State: "connected", Polled: time.Now(), Conditions: []control.ChannelCondition{{Key: "privacy", Text: "privacy mode on"}}}}
	return st, err
}

func (f fakeSource) Story(ctx context.Context, ref, chat string) (control.Story, error) {
	return f.admin.Story(ctx, ref, chat)
}

// fakeApprovals is an approval service that records its decisions.
type fakeApprovals struct {
	mu      sync.Mutex
	open    []Approval
	decided []string
}

func (f *fakeApprovals) List(ctx context.Context) ([]Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Approval(nil), f.open...), nil
}

func (f *fakeApprovals) Decide(ctx context.Context, id string, allow, always bool, by string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, a := range f.open {
		if a.ID == id {
			f.open = append(f.open[:i], f.open[i+1:]...)
			f.decided = append(f.decided, id+":"+map[bool]string{true: "allow", false: "deny"}[allow]+map[bool]string{true: "+always"}[always]+":"+by)
			return nil
		}
	}
	for _, d := range f.decided {
		if strings.HasPrefix(d, id+":") {
			return fmt.Errorf("%w: %s", ErrDecided, d)
		}
	}
	return store.ErrNotFound
}

func (f *fakeApprovals) decisions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.decided...)
}

type fixture struct {
	d     *Dashboard
	db    *store.DB
	appr  *fakeApprovals
	srv   *httptest.Server
	msgID store.MessageID
	now   time.Time
	clock *time.Time
}

func newFixture(t *testing.T, approvals bool) *fixture {
	t.Helper()
	db := storetest.Open(t)
	ctx := context.Background()
	admin := &control.Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC}
	if _, err := admin.AddGroup(ctx, control.GroupAdd{Chat: "local:fam", Name: "Family <3", Folder: "fam"}); err != nil {
		t.Fatal(err)
	}
	id, _, err := db.Messages.Insert(ctx, store.Message{Chat: "local:fam", ExternalID: "m1", Sender: "alice", SenderName: `Al<i>ce`, Text: markup, SentAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, msgID: id, now: time.Now()}
	f.clock = &f.now
	opts := Options{Source: fakeSource{admin}, Admin: admin, PollEvery: 20 * time.Millisecond, Now: func() time.Time { return *f.clock }}
	if approvals {
		f.appr = &fakeApprovals{open: []Approval{{ID: "a1", Group: "fam", Action: "Bash", Detail: "rm -rf <b>/tmp/x</b>", AskedAt: time.Now()}}}
		opts.Approvals = f.appr
	}
	if f.d, err = New(opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { _ = f.d.Run(ctx); close(runDone) }()
	f.srv = httptest.NewServer(f.d)
	t.Cleanup(func() { cancel(); <-runDone; f.srv.Close() })
	return f
}

// noRedirect is a client that shows redirects instead of following them.
func noRedirect() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login spends a fresh login link and returns the session cookie.
func (f *fixture) login(t *testing.T) *http.Cookie {
	t.Helper()
	l, err := f.d.Login()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := noRedirect().Get(f.srv.URL + l.Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", resp.Status)
	}
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			return c
		}
	}
	t.Fatal("login set no session cookie")
	return nil
}

// do sends a request for path; a path written under Prefix (as the routes
// are) is sent under the dashboard's secret prefix.
func (f *fixture) do(t *testing.T, method, path string, c *http.Cookie, form url.Values, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	if !strings.HasPrefix(path, f.d.prefix) {
		if rest, ok := strings.CutPrefix(path, Prefix); ok {
			path = f.d.prefix + rest
		}
	}
	return f.doRaw(t, method, path, c, form, hdr)
}

// doRaw sends a request for path as it is.
func (f *fixture) doRaw(t *testing.T, method, path string, c *http.Cookie, form url.Values, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c != nil {
		req.AddCookie(c)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := noRedirect().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (f *fixture) csrf(t *testing.T, c *http.Cookie) string {
	t.Helper()
	_, body := f.do(t, "GET", Prefix+"approvals", c, nil, nil)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the approvals page:\n%s", body)
	}
	return m[1]
}

// concrete turns a route pattern into a path that reaches it.
func concrete(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	r := strings.NewReplacer("{$}", "", "{folder}", "fam", "{id}", "1")
	path = r.Replace(path)
	if strings.HasSuffix(path, "static/") {
		path += "style.css"
	}
	return method, path
}

// No route answers without a session: neither without a cookie nor with
// a made-up one; with a session every GET route answers.
func TestEveryRouteNeedsALogin(t *testing.T) {
	f := newFixture(t, true)
	good := f.login(t)
	bad := []*http.Cookie{nil, {Name: cookieName, Value: "forged"}, {Name: cookieName, Value: ""}}
	for _, pattern := range append(Routes, "GET "+Prefix+"no-such-page") {
		method, path := concrete(pattern)
		for _, c := range bad {
			form := url.Values{"csrf": {"x"}, "decision": {"allow"}}
			if method == "GET" {
				form = nil
			}
			resp, body := f.do(t, method, path, c, form, nil)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with cookie %v: %s, want 401", method, path, c, resp.Status)
			}
			if strings.Contains(body, "alice") || strings.Contains(body, "Family") {
				t.Errorf("%s %s without a session shows the store's data:\n%s", method, path, body)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("%s %s sends a CORS header", method, path)
			}
		}
		if method == "GET" && !strings.HasSuffix(path, "/events") {
			resp, body := f.do(t, method, path, good, nil, nil)
			if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s %s with a session: %s\n%s", method, path, resp.Status, body)
			}
		}
	}
	if len(f.appr.decisions()) != 0 {
		t.Errorf("a refused POST decided: %v", f.appr.decisions())
	}
}

// A login link works once, for LoginTTL; it sets an HttpOnly,
// SameSite=Strict cookie.
func TestLoginLinkWorksOnce(t *testing.T) {
	f := newFixture(t, false)
	l, _ := f.d.Login()
	resp, _ := f.do(t, "GET", l.Path, nil, nil, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first use: %s", resp.Status)
	}
	c := resp.Cookies()[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != f.d.prefix || len(c.Path) < len(Prefix)+22 {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path %s (the dashboard's secret path)", c, f.d.prefix)
	}
	if resp, _ := f.do(t, "GET", l.Path, nil, nil, nil); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("second use: %s, cookies %v; want 403 and none", resp.Status, resp.Cookies())
	}
	for _, p := range []string{Prefix + "login", Prefix + "login?code=", Prefix + "login?code=guess"} {
		if resp, _ := f.do(t, "GET", p, nil, nil, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s: %s, want 403", p, resp.Status)
		}
	}
	l2, _ := f.d.Login()
	*f.clock = f.now.Add(LoginTTL + time.Second)
	if resp, _ := f.do(t, "GET", l2.Path, nil, nil, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("expired link: %s, want 403", resp.Status)
	}
	*f.clock = f.now.Add(SessionTTL + time.Second)
	if resp, _ := f.do(t, "GET", Prefix, c, nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("expired session: %s, want 401", resp.Status)
	}
}

// A POST without the session's CSRF token, with another one, or from
// another origin is refused and changes nothing; the dashboard's own form
// decides through the approval service.
func TestCrossSitePostRefused(t *testing.T) {
	f := newFixture(t, true)
	c := f.login(t)
	token := f.csrf(t, c)
	other := f.login(t)
	otherToken := f.csrf(t, other)
	own := map[string]string{"Origin": f.srv.URL}
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  map[string]string
	}{
		{"no token", url.Values{"decision": {"allow"}}, own},
		{"wrong token", url.Values{"decision": {"allow"}, "csrf": {"nope"}}, own},
		{"another session's token", url.Values{"decision": {"allow"}, "csrf": {otherToken}}, own},
		{"foreign origin", url.Values{"decision": {"allow"}, "csrf": {token}}, map[string]string{"Origin": "http://evil.example"}},
		{"null origin", url.Values{"decision": {"allow"}, "csrf": {token}}, map[string]string{"Origin": "null"}},
		{"cross-site fetch", url.Values{"decision": {"allow"}, "csrf": {token}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		resp, _ := f.do(t, "POST", Prefix+"approvals/a1", c, tc.form, tc.hdr)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", tc.name, resp.Status)
		}
	}
	if d := f.appr.decisions(); len(d) != 0 {
		t.Fatalf("refused POSTs decided %v", d)
	}
	if resp, _ := f.do(t, "GET", Prefix+"approvals/a1", c, nil, nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET of the decision: %s, want 405 (a change is a POST)", resp.Status)
	}
	resp, _ := f.do(t, "POST", Prefix+"approvals/a1", c, url.Values{"decision": {"allow"}, "csrf": {token}}, own)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the page's own POST: %s", resp.Status)
	}
	if d := f.appr.decisions(); len(d) != 1 || d[0] != "a1:allow:dashboard" {
		t.Errorf("decisions %v, want a1 allowed by the dashboard", d)
	}
	if resp, body := f.do(t, "POST", Prefix+"approvals/a1", c, url.Values{"decision": {"deny"}, "csrf": {token}}, own); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already decided") {
		t.Errorf("deciding again: %s %q, want 409 saying it was decided before", resp.Status, body)
	}
	if resp, _ := f.do(t, "POST", Prefix+"approvals/zz99", c, url.Values{"decision": {"deny"}, "csrf": {token}}, own); resp.StatusCode != http.StatusNotFound {
		t.Errorf("deciding an unknown request: %s, want 404", resp.Status)
	}
	if d := f.appr.decisions(); len(d) != 1 {
		t.Errorf("decisions %v after the refused ones, want only the first", d)
	}
}

// What a chat member wrote renders as text on every page that shows it,
// and in the live events.
func TestChatMarkupRendersAsText(t *testing.T) {
	f := newFixture(t, true)
	c := f.login(t)
	for _, p := range []string{Prefix + "groups/fam", Prefix + "messages/" + itoa(f.msgID), Prefix + "approvals", Prefix} {
		resp, body := f.do(t, "GET", p, c, nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", p, resp.Status, body)
		}
		for _, raw := range []string{"<script>alert", "<img src=x", "<b>bold", "<b>/tmp", "Al<i>ce", "Family <3"} {
			if strings.Contains(body, raw) {
				t.Errorf("GET %s carries %q unescaped", p, raw)
			}
		}
		if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s: no CSP", p)
		}
	}
	_, body := f.do(t, "GET", Prefix+"groups/fam", c, nil, nil)
	if !strings.Contains(body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Errorf("the conversation does not show the text as text:\n%s", body)
	}
}

func itoa(id store.MessageID) string { return strconv.FormatInt(int64(id), 10) }

// The live conversation streams a message stored after the page loaded.
func TestConversationIsLive(t *testing.T) {
	f := newFixture(t, false)
	c := f.login(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+f.d.prefix+"groups/fam/events?after="+itoa(f.msgID), nil)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	if _, _, err := f.db.Messages.Insert(ctx, store.Message{Chat: "local:fam", ExternalID: "m2", Sender: "bob", Text: "later <b>one</b>", SentAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, `"text":"later \u003cb\u003eone\u003c/b\u003e"`) || strings.Contains(line, "alice") {
				t.Fatalf("event %s: want only the later message", line)
			}
			return
		}
	}
	t.Fatalf("stream ended: %v", sc.Err())
}

// The dashboard is not on TCP unless an address is set; an address other
// than loopback is refused; on TCP it serves its own routes only, to its
// own host name.
func TestTCPOffUnlessSet(t *testing.T) {
	f := newFixture(t, false)
	if f.d.Addr() != "" {
		t.Fatalf("listening on %s without an address", f.d.Addr())
	}
	if l, _ := f.d.Login(); l.URL != "" {
		t.Errorf("login URL %q without an address", l.URL)
	}
	for _, a := range []string{"0.0.0.0:0", "192.0.2.1:8080", "[::]:0", "example.com:80", ":0"} {
		if _, err := New(Options{Source: f.d.opts.Source, Admin: f.d.opts.Admin, Addr: a}); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("address %s: %v, want ErrNotLoopback", a, err)
		}
	}
	d, err := New(Options{Source: f.d.opts.Source, Admin: f.d.opts.Admin, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	l, _ := d.Login()
	if !strings.HasPrefix(l.URL, "http://"+d.Addr()+d.prefix+"login?code=") {
		t.Fatalf("login URL %q", l.URL)
	}
	get := func(path, host string) int {
		req, _ := http.NewRequest("GET", "http://"+d.Addr()+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := noRedirect().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/v1/status", ""); code != http.StatusNotFound {
		t.Errorf("the control API on TCP: %d, want 404", code)
	}
	if code := get(d.prefix, ""); code != http.StatusUnauthorized {
		t.Errorf("the overview on TCP without a session: %d, want 401", code)
	}
	if code := get(l.Path, "evil.example"); code != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host: %d, want 421", code)
	}
	if code := get(l.Path, ""); code != http.StatusSeeOther {
		t.Errorf("login on TCP: %d, want 303", code)
	}
}

// Without an approval service the pages say there are none and a decision
// is refused.
func TestNoApprovalService(t *testing.T) {
	f := newFixture(t, false)
	c := f.login(t)
	for _, p := range []string{Prefix, Prefix + "approvals"} {
		if _, body := f.do(t, "GET", p, c, nil, nil); !strings.Contains(body, "No approvals") {
			t.Errorf("GET %s does not say there are no approvals", p)
		}
	}
	token := f.csrf(t, c)
	if resp, _ := f.do(t, "POST", Prefix+"approvals/a1", c, url.Values{"decision": {"allow"}, "csrf": {token}}, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("deciding without a service: %s, want 404", resp.Status)
	}
}

// A plot escapes its texts and says so when there is nothing to draw.
func TestPlotEscapes(t *testing.T) {
	p := plot{Title: "t<i>", Labels: []string{"a<b", "c"}, Series: []series{{Name: "<script>", Values: []float64{1, 2}}, {Name: "x", Values: []float64{0, 1}}}, Unit: countUnit}
	out := string(p.svg())
	if strings.Contains(out, "<script>") || strings.Contains(out, "<i>") || strings.Contains(out, "a<b") {
		t.Errorf("unescaped text in %s", out)
	}
	if !strings.Contains(out, "<svg") || strings.Count(out, "<rect") < 3 {
		t.Errorf("no bars in %s", out)
	}
	empty := string(plot{Title: "t", Labels: []string{"a"}, Series: []series{{Values: []float64{0}}}, Unit: countUnit, Empty: "nothing"}.svg())
	if strings.Contains(empty, "<svg") || !strings.Contains(empty, "nothing") {
		t.Errorf("empty plot: %s", empty)
	}
}

// Every page's template parses (they are parsed at the first page served).
func TestPagesParse(t *testing.T) {
	pages, err := parsePages(func(time.Time) string { return "" }, Prefix+"s3cret/")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"overview", "group", "tasks", "task", "approvals", "story", "error"} {
		if pages[p] == nil {
			t.Errorf("no page %s", p)
		}
	}
}

// On the control socket the server serves the dashboard under /dashboard/,
// behind the same login; POST /v1/dashboard/login makes the link.
func TestServedOnTheControlSocket(t *testing.T) {
	f := newFixture(t, false)
	dir, err := os.MkdirTemp("", "dsh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := control.Listen(control.Options{Socket: filepath.Join(dir, "s.sock"), Admin: f.d.opts.Admin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	call := func(method, path string, c *http.Cookie) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		if c != nil {
			req.AddCookie(c)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec
	}
	if rec := call("GET", Prefix, nil); rec.Code != http.StatusNotFound {
		t.Errorf("no dashboard set: %d, want 404", rec.Code)
	}
	if rec := call("POST", "/v1/dashboard/login", nil); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("login without a dashboard: %d, want 503", rec.Code)
	}
	// The same server with a dashboard.
	srv.Close()
	srv, err = control.Listen(control.Options{Socket: filepath.Join(dir, "s2.sock"), Admin: f.d.opts.Admin,
		Dashboard: func(*control.Server) (control.Dashboard, error) { return f.d, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if rec := call("GET", f.d.prefix, nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("the overview without a session: %d, want 401", rec.Code)
	}
	rec := call("POST", "/v1/dashboard/login", nil)
	var l control.DashboardLogin
	if err := json.Unmarshal(rec.Body.Bytes(), &l); rec.Code != http.StatusCreated || err != nil || !strings.HasPrefix(l.Path, f.d.prefix+"login?code=") || l.URL != "" {
		t.Fatalf("login: %d %s", rec.Code, rec.Body)
	}
	rec = call("GET", l.Path, nil)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("the link: %d %v", rec.Code, cookies)
	}
	if rec := call("GET", f.d.prefix, cookies[0]); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Family &lt;3") {
		t.Errorf("the overview with a session: %d", rec.Code)
	}

	// The live conversation streams through the socket's server.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	defer func() { stop(); <-done }()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(dir, "s2.sock"))
	}}}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://bridged"+f.d.prefix+"groups/fam/events?after=0", nil)
	req.AddCookie(cookies[0])
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, `"sender":"Al\u003ci\u003ece"`) {
				t.Errorf("event %s", line)
			}
			return
		}
	}
	t.Fatalf("the stream on the socket ended without an event: %v", sc.Err())
}

// The dashboard answers under its secret path only, which its session
// cookie is scoped to: the paths without it (what an older bridged served,
// and what a page elsewhere could guess) answer 404 with or without the
// session, and so do "/" and a wrong secret on TCP, which tell nothing of
// the path. Every link of a page is under the secret path. The secret is
// kept in its file: a second dashboard of the same home has the same path.
func TestDashboardBoundToItsSecretPath(t *testing.T) {
	f := newFixture(t, true)
	c := f.login(t)
	if !strings.HasPrefix(f.d.prefix, Prefix) || len(f.d.prefix) < len(Prefix)+23 {
		t.Fatalf("prefix %q; want %s and a secret", f.d.prefix, Prefix)
	}
	for _, p := range []string{Prefix, Prefix + "login?code=x", Prefix + "approvals", Prefix + "static/style.css", "/", Prefix + "wrong-secret-0123456789ab/"} {
		for _, ck := range []*http.Cookie{nil, c} {
			if resp, body := f.doRaw(t, "GET", p, ck, nil, nil); resp.StatusCode != http.StatusNotFound || strings.Contains(body, f.d.prefix) {
				t.Errorf("GET %s (cookie %v): %s; want 404 that does not tell the path", p, ck != nil, resp.Status)
			}
		}
	}
	_, body := f.do(t, "GET", Prefix, c, nil, nil)
	for _, m := range regexp.MustCompile(`(?:href|action|src|data-events)="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		if strings.HasPrefix(m[1], "/") && !strings.HasPrefix(m[1], f.d.prefix) {
			t.Errorf("the overview links to %s, outside the secret path", m[1])
		}
	}

	file := filepath.Join(t.TempDir(), "dashboard-path")
	d1, err := New(Options{Source: f.d.opts.Source, Admin: f.d.opts.Admin, PathFile: file})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := New(Options{Source: f.d.opts.Source, Admin: f.d.opts.Admin, PathFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if d1.prefix != d2.prefix || d1.prefix == f.d.prefix {
		t.Errorf("prefixes %s and %s from one file (another dashboard: %s); want one secret kept", d1.prefix, d2.prefix, f.d.prefix)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the secret's file: %v, %v; want mode 0600", fi, err)
	}
}

// The latency plot shows a turn's approval wait apart from the agent's
// time, and the approvals page shows each request's short id.
func TestApprovalWaitsShown(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	p := latency([]store.TurnLatency{
		{At: at, Latency: 8 * time.Second},
		{At: at.Add(time.Hour), Latency: 7*time.Minute + 5*time.Second, Approval: 7 * time.Minute},
	}, time.UTC)
	if len(p.Series) != 2 || p.Series[0].Values[1] != 5 || p.Series[1].Name != "waiting for approval" || p.Series[1].Values[1] != 420 {
		t.Errorf("latency series %+v; want the turn's 5 s and the approval's 420 s apart", p.Series)
	}
	if p := latency([]store.TurnLatency{{At: at, Latency: 8 * time.Second}}, time.UTC); len(p.Series) != 1 {
		t.Errorf("latency series %+v; want no approval series without a wait", p.Series)
	}
	f := newFixture(t, true)
	c := f.login(t)
	if _, body := f.do(t, "GET", Prefix+"approvals", c, nil, nil); !strings.Contains(body, `<code class="approval-id">a1</code>`) {
		t.Errorf("approvals page does not show the short id a1:\n%s", body)
	}
}

// The overview shows each channel's conditions and a polling channel's
// last poll.
func TestOverviewShowsChannels(t *testing.T) {
	f := newFixture(t, false)
	_, body := f.do(t, "GET", Prefix, f.login(t), nil, nil)
	for _, want := range []string{"telegram", "last poll", "privacy mode on"} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview has no %q", want)
		}
	}
}

// The overview's cost plot of many groups: the seven costliest each in a
// colour of their own, costliest first, the others added up in one series
// named for how many they are; a few groups are left as they are.
func TestCostliestFoldsTheRest(t *testing.T) {
	var ss []series
	for i := range 10 {
		ss = append(ss, series{Name: fmt.Sprintf("g%d", i), Values: []float64{float64(i), 1}})
	}
	got := costliest(ss, 7)
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	if want := []string{"g9", "g8", "g7", "g6", "g5", "g4", "g3", "3 other groups"}; !slices.Equal(names, want) {
		t.Errorf("series = %v; want %v", names, want)
	}
	if rest := got[len(got)-1].Values; !slices.Equal(rest, []float64{0 + 1 + 2, 3}) {
		t.Errorf("the others' values = %v; want [3 3]", rest)
	}
	if got := costliest(ss[:8], 7); len(got) != 8 || got[0].Name != "g0" {
		t.Errorf("8 series folded to %d (first %s); want them as they are", len(got), got[0].Name)
	}
}
