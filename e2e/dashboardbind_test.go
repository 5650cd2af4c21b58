package e2e

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// dashLink is the login link `bridged dashboard` prints, and the path the
// dashboard is served under (with its secret, when it has one).
var dashLink = regexp.MustCompile(`http://127\.0\.0\.1:\d+(/dashboard/(?:[A-Za-z0-9_-]+/)?)login\?code=[A-Za-z0-9_-]+`)

// The dashboard's session is bound to this daemon: its cookie is scoped to
// the dashboard's secret path, so a browser (here Go's cookie jar, which
// ignores ports as browsers do) never sends it to another program on
// another loopback port; the paths without the secret, and "/", answer 404;
// the secret is kept in the home, so after a restart the same path serves
// (and a new login is needed: sessions are in memory).
func TestE2EDashboardSessionBound(t *testing.T) {
	parallel(t, light)
	e := newEnv(t)
	e.extraEnv = append(e.extraEnv, "BRIDGED_DASHBOARD=127.0.0.1:0")
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	d := e.start()

	m := dashLink.FindStringSubmatch(e.mustCLI("dashboard"))
	if m == nil {
		t.Fatal("bridged dashboard printed no login link")
	}
	link, prefix := m[0], m[1]
	base := link[:strings.Index(link, prefix)]
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(link); code != http.StatusOK || !strings.Contains(body, "Channels") {
		t.Fatalf("the login link led to %d:\n%s", code, tail(body, 500))
	}

	// Another program on another loopback port, where the owner's browser
	// is sent: it gets no cookie, whatever path it is visited at.
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if c := r.Header.Get("Cookie"); c != "" {
			seen = append(seen, r.URL.Path+": "+c)
		}
	}))
	defer other.Close()
	for _, p := range []string{"/", "/dashboard/", "/dashboard/login", "/dashboard/tasks"} {
		get(other.URL + p)
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Errorf("another loopback port was sent the dashboard's cookie: %v", seen)
	}
	mu.Unlock()
	if len(prefix) < len("/dashboard/")+23 {
		t.Errorf("the link %s is not under a secret path", link)
	}

	// The paths without the secret answer 404, with the session or not.
	for _, p := range []string{"/", "/dashboard/", "/dashboard/tasks", "/dashboard/login?code=x", "/dashboard/static/style.css"} {
		if code, body := get(base + p); code != http.StatusNotFound || strings.Contains(body, prefix) {
			t.Errorf("GET %s: %d; want 404 that does not tell the secret path", p, code)
		}
	}
	if code, _ := get(base + prefix + "tasks"); code != http.StatusOK {
		t.Errorf("GET the tasks page under the secret path with the session: %d; want 200", code)
	}

	// The secret is kept (daemon-owned, 0600): the same path after a restart.
	kept := filepath.Join(e.home, "store", "dashboard-path")
	if fi, err := os.Stat(kept); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the dashboard's path secret: %v %v; want a 0600 file in store/", fi, err)
	}
	d.stop(t)
	d = e.start()
	m2 := dashLink.FindStringSubmatch(e.mustCLI("dashboard"))
	if m2 == nil || m2[1] != prefix {
		t.Errorf("after a restart the link is %v; want it under the same path %s", m2, prefix)
	}
	u, _ := url.Parse(base)
	if cs := jar.Cookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/dashboard/"}); len(cs) != 0 {
		t.Errorf("the jar sends %v to /dashboard/; want the cookie scoped to the secret path only", cs)
	}
	d.stop(t)
}
