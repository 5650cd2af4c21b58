package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's chromium: missing, the browser test skips
// loudly, or fails under CI=true.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"chromium", "/usr/bin/chromium", "chromium-browser"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is missing: the dashboard's browser test needs Debian's chromium (make deps installs it)")
	}
	t.Skip("SKIPPING the dashboard's browser test: chromium is missing (apt-get install chromium, or make deps)")
	return ""
}

// screenshotDir is where the browser test writes its screenshots:
// BRIDGED_E2E_SCREENSHOTS, else the test's artifact directory.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("BRIDGED_E2E_SCREENSHOTS")
	if dir == "" {
		dir = t.ArtifactDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard screenshots in %s", dir)
	return dir
}

var loginURL = regexp.MustCompile(`http://127\.0\.0\.1:\d+/dashboard/[A-Za-z0-9_-]{22,}/login\?code=[A-Za-z0-9_-]+`)

// The dashboard in a real browser against a real daemon with real
// containers: each page loads without a script error or a failed request;
// a message sent with `bridged chat -m` appears in the open conversation
// without a reload; markup a member wrote shows as text; an ask group's
// command waits in the overview and on the approvals page until the page's
// Approve button lets it run, once, decided by the dashboard.
func TestE2EDashboardInBrowser(t *testing.T) {
	parallel(t, timed)
	chromium := chromiumPath(t)
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = append(e.extraEnv, "BRIDGED_DASHBOARD=127.0.0.1:0")
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "fam", "--no-trigger", "--tools", "ask", "local:fam")
	e.start()
	if out := e.mustCLI("chat", "-m", "hello", "main"); !strings.Contains(out, "echo: hello") {
		t.Fatalf("bridged chat -m hello main printed %q", out)
	}
	link := loginURL.FindString(e.mustCLI("dashboard"))
	if link == "" {
		t.Fatal("bridged dashboard printed no login link")
	}
	shots := screenshotDir(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1000, 900), chromedp.UserDataDir(t.TempDir()))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	var mu sync.Mutex
	var problems []string
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			problems = append(problems, fmt.Sprintf("exception: %s at %s:%d", ev.ExceptionDetails.Text, ev.ExceptionDetails.URL, ev.ExceptionDetails.LineNumber))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == "error" || ev.Type == "assert" {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, "console error: "+strings.Join(args, " "))
			}
		case *log.EventEntryAdded:
			switch {
			case ev.Entry.Level != "error":
			case strings.Contains(ev.Entry.Text, "net::ERR_NETWORK_CHANGED"):
				// The machine's, not the page's: chromium drops a load
				// in flight when a network interface comes or goes, as
				// the containers of the tests beside this one start.
				t.Logf("browser, not counted: %s %s", ev.Entry.Text, ev.Entry.URL)
			default:
				problems = append(problems, "log error: "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		}
	}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(listen))
	defer cancel()
	ctx, tcancel := context.WithTimeout(ctx, 8*time.Minute)
	defer tcancel()
	// The pages are under the dashboard's secret path, which the link names.
	base := link[:strings.Index(link, "login?code=")-1]
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	visit := func(name, path, want string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(base+strings.TrimPrefix(path, "/dashboard")), chromedp.WaitReady("main")); err != nil {
			t.Fatalf("%s (%s): %v", name, path, err)
		}
		body, err := chromedp.Run(ctx, chromedp.Text("main"))
		if err != nil {
			t.Fatalf("%s (%s): %v", name, path, err)
		}
		if !strings.Contains(body, want) {
			t.Errorf("%s (%s) does not show %q:\n%s", name, path, want, body)
		}
		shot(name)
	}

	// The login link logs in and lands on the overview; it works once.
	if err := chromedp.Do(ctx, chromedp.Navigate(link), chromedp.WaitReady("main")); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(title, "overview") {
		t.Fatalf("after the login link the page is %q, want the overview", title)
	}
	// The listener hears the page's console: a probe error is seen, then
	// forgotten.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`console.error("bridged-probe")`)); err != nil {
		t.Fatal(err)
	}
	probe, err := chromedp.Run(ctx, chromedp.Poll[bool](`true`))
	if err != nil || !probe {
		t.Fatal(err)
	}
	mu.Lock()
	heard := strings.Contains(strings.Join(problems, "\n"), "bridged-probe")
	problems = nil
	mu.Unlock()
	if !heard {
		t.Fatal("the browser's console errors do not reach the test")
	}

	visit("overview", "/dashboard/", "Channels")
	if _, err := chromedp.Run(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2))); err != nil {
		t.Fatal(err)
	}
	visit("overview-phone", "/dashboard/", "Channels")
	if _, err := chromedp.Run(ctx, chromedp.EmulateViewport(1000, 900)); err != nil {
		t.Fatal(err)
	}
	visit("tasks", "/dashboard/tasks", "Tasks")
	visit("approvals-none", "/dashboard/approvals", "No approvals waiting")

	// An ask group's write command waits for the owner: the overview lists
	// it, the approvals page shows it, and its Approve button (a form POST
	// with the session's CSRF token) lets it run, once.
	const wait = 2 * time.Minute
	famDir := filepath.Join(e.home, "groups", "fam")
	mainFrom := lastID(e, "local:main")
	famMsg := e.post("local:fam", "fake:bash touch made-dash && echo did-dash")
	req, _ := e.waitApproval(mainFrom, wait)
	if exists(filepath.Join(famDir, "made-dash")) {
		t.Fatal("the command ran before it was approved")
	}
	t.Logf("approval %s is open", req)
	visit("overview-approval", "/dashboard/", "1 waiting")
	if listed, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("open-`+req+`") || {}).textContent || ""`)); err != nil || !strings.Contains(listed, "touch made-dash") {
		t.Errorf("the overview does not list the open approval %s with its command: %q %v", req, listed, err)
	}
	visit("approvals", "/dashboard/approvals", "touch made-dash")
	t.Logf("approving %s on the page", req)
	// The button is clicked by the page's own DOM (the form's submit with
	// its CSRF token); the browser then follows the redirect to the page.
	if clicked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const b = document.querySelector("#approval-`+req+` button.allow");
		if (!b) return false;
		setTimeout(() => b.click(), 0);
		return true;
	})()`)); err != nil || !clicked {
		t.Fatalf("no Approve button for %s on the page: %v", req, err)
	}
	// A polling tick, not a wait for an event: the submit navigates, which
	// ends any wait set inside the page, so the test asks the page again
	// every 200 ms until it is back with the result, within the deadline.
	for deadline := time.Now().Add(90 * time.Second); ; {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		done, err := chromedp.Run(cctx, chromedp.Evaluate[bool](`location.search.includes("done=allow") && document.readyState === "complete" && !!document.querySelector("p.ok")`))
		ccancel()
		if err == nil && done {
			break
		}
		if time.Now().After(deadline) {
			shot("approvals-failed")
			where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			t.Fatalf("the page did not come back after Approve of %s: %v; it is at %s", req, err, where)
		}
		<-time.After(200 * time.Millisecond)
	}
	after, err := chromedp.Run(ctx, chromedp.Text("main"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(after, "Approved.") || strings.Contains(after, req) || !strings.Contains(after, "No approvals waiting") {
		t.Errorf("after Approve the page shows:\n%s\nwant Approved. and %s no longer open", after, req)
	}
	shot("approvals-decided")
	if got := e.waitOut("local:fam", famMsg, 1, wait); got[0].Text != "did-dash" {
		t.Fatalf("fam got %q after the approval on the page; want did-dash", got[0].Text)
	}
	if !exists(filepath.Join(famDir, "made-dash")) {
		t.Error("the approved command did not run")
	}
	var listed struct {
		Approvals []struct {
			ID        string `json:"id"`
			State     string `json:"state"`
			DecidedBy string `json:"decided_by"`
		} `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI("approvals", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, a := range listed.Approvals {
		if a.ID == req {
			mine = append(mine, a.State+" by "+a.DecidedBy)
		}
	}
	if len(mine) != 1 || mine[0] != "allowed by dashboard" {
		t.Errorf("bridged approvals --json shows %s as %v; want it allowed by dashboard", req, mine)
	}
	if n := e.requestsSince(mainFrom); n != 1 {
		t.Errorf("%d approval requests in the main chat; want the one", n)
	}
	if out := e.mustCLI("approvals", "--open"); strings.Contains(out, req) {
		t.Errorf("approvals --open still lists %s:\n%s", req, out)
	}
	visit("story", "/dashboard/messages/last?chat=main", "Its story")
	visit("group", "/dashboard/groups/main", "Conversation")

	// Live: a message sent from the command line appears in the open
	// conversation, as text, without a reload.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.bridgedNoReload = 1`)); err != nil {
		t.Fatal(err)
	}
	text := `live <b>check</b> & more`
	if out := e.mustCLI("chat", "-m", text, "main"); !strings.Contains(out, "echo: "+text) {
		t.Fatalf("bridged chat -m printed %q", out)
	}
	seen, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll("#conversation .text")].some(e => e.textContent === "echo: `+strings.ReplaceAll(text, `"`, `\"`)+`") && window.bridgedNoReload === 1`,
		chromedp.WithPollingTimeout(90*time.Second)))
	if err != nil || !seen {
		t.Fatalf("the reply did not appear in the open conversation without a reload: %v", err)
	}
	if bold, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#conversation b").length`)); err != nil || bold != 0 {
		t.Errorf("chat markup became elements (%d <b>): %v", bold, err)
	}
	shot("group-live")

	// The spent link does not log in again.
	if resp, err := http.Get(link); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a spent link: %s, want 403", resp.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
}
