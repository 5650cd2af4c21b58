package e2e

// A bind source swapped exactly between the daemon's check and the
// engine's mount, on every start the test chooses: the daemon talks to
// Docker through a proxy in the test, which makes the swap when it sees the
// start request go by (the engine resolves the source at start, after the
// check made before create). TestE2EMountRaceExtraMount makes the same swap
// from an agent, where a start is hit only by chance; here every one is, so
// the confirmation after start is shown to stop it for each daemon user:
// root looking through /proc/<pid>/root, the `docker` group member from the
// runner's report (docs/decisions.md, record 44).

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestE2EMountSwapAtStart(t *testing.T) {
	parallel(t, light)
	for _, u := range daemonUsers() {
		t.Run(u.name, func(t *testing.T) {
			u.skipUnavailable(t)
			if u.rootless {
				t.Skip("SKIPPING: the test's proxy stands in for Docker's socket; Podman is given each source as a link of the daemon's (TestDockerStartStopsSwappedMount covers it)")
			}
			testMountSwapAtStart(t, u)
		})
	}
}

func testMountSwapAtStart(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "1s", "--retry-base", "100ms")
	base := t.TempDir()
	allowed := filepath.Join(base, "allowed")
	app := filepath.Join(allowed, "project", "app")
	secret := filepath.Join(base, "secret")
	for _, d := range []string{app, secret} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(app, "app.txt"), "the app\n")
	writeFile(t, filepath.Join(secret, "secret.txt"), "not for any agent\n")
	for _, d := range []string{filepath.Dir(base), base, allowed, filepath.Dir(app), app, secret} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	allowlist := filepath.Join(base, "mount-allowlist.json")
	writeFile(t, allowlist, `{"allowedRoots": [{"path": "`+allowed+`", "allowReadWrite": false}]}`)
	proxy := startSwapProxy(t, filepath.Join(base, "proxy"))
	e.extraEnv = append(e.extraEnv, "BRIDGED_MOUNT_ALLOWLIST="+allowlist, "DOCKER_HOST=unix://"+proxy.sock)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "other", "--no-trigger", "local:other")
	e.mustCLI("groups", "set", "--mount", app+":app", "other")
	d := e.start()

	if got := e.bash("local:other", "ls -A /workspace/extra/app", turnWait); !strings.Contains(got, "app.txt") {
		t.Fatalf("the other group's first run lists %q in /workspace/extra/app; want app.txt", got)
	}
	waitNoAgent(t, e, "other", turnWait)

	// The next start request swaps app/ for a link to the secret
	// directory, outside the allowed roots: the daemon checked app/
	// before it created the container, the engine mounts what the path
	// is at start.
	held := app + ".held"
	proxy.arm(func() {
		if err := os.Rename(app, held); err != nil {
			t.Errorf("swap: %v", err)
			return
		}
		if err := os.Symlink(secret, app); err != nil {
			t.Errorf("swap: %v", err)
		}
	})
	id := e.post("local:other", "fake:bash ls -A /workspace/extra/app 2>&1; echo listed")
	got := waitOutHolding(e, "local:other", id, "listed", 2*turnWait)
	if !proxy.fired.Load() {
		t.Fatal("the swap was not made: no start request went through the test's proxy")
	}
	t.Logf("the other group's agent after the swap at its start: %q", got)
	if strings.Contains(got, "secret.txt") {
		t.Errorf("the other group's /workspace/extra/app was the secret directory swapped in at its start:\n%s", got)
	}
	noneShows(t, e, "local:other", "secret.txt")
	logs := d.logs()
	if !strings.Contains(logs, `"message":"a bind mount of the started container is not the directory that was checked`) {
		t.Errorf("the daemon's log does not say it stopped the container whose mount was swapped at its start")
	}
	// The confirmation each daemon user makes: root looks through
	// /proc/<pid>/root; the docker group member, whose agents run as
	// other uids, takes its runner's report.
	byReport := strings.Contains(logs, "bind mounts confirmed from the runner's report")
	if want := u.uid != 0; byReport != want {
		t.Errorf("a start confirmed from the runner's report: %v; want %v for the daemon user %s", byReport, want, u.name)
	}
	if err := os.Remove(app); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(held, app); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
}

// swapProxy forwards the Docker Engine API from its socket to Docker's and
// runs its armed function once, when a container start request goes by,
// before the engine has it. Each connection carries one request (a
// connection upgraded for attach, one request and then the streams).
type swapProxy struct {
	sock  string
	mu    sync.Mutex
	swap  func()
	fired atomic.Bool
}

func startSwapProxy(t *testing.T, dir string) *swapProxy {
	t.Helper()
	target := "/var/run/docker.sock"
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
		target = h
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &swapProxy{sock: filepath.Join(dir, "docker.sock")}
	ln, err := net.Listen("unix", p.sock)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon's user reaches it as it reaches Docker's (the test's
	// own home is private to it).
	if err := os.Chmod(p.sock, 0o666); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.serve(c.(*net.UnixConn), target)
			}()
		}
	}()
	return p
}

func (p *swapProxy) arm(f func()) {
	p.mu.Lock()
	p.swap = f
	p.mu.Unlock()
}

func (p *swapProxy) serve(c *net.UnixConn, target string) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	b, err := net.Dial("unix", target)
	if err != nil {
		return
	}
	back := b.(*net.UnixConn)
	defer back.Close()
	if req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/containers/") && strings.HasSuffix(req.URL.Path, "/start") {
		p.mu.Lock()
		swap := p.swap
		p.swap = nil
		p.mu.Unlock()
		if swap != nil {
			swap()
			p.fired.Store(true)
		}
	}
	upgrade := req.Header.Get("Upgrade") != ""
	if !upgrade {
		req.Close = true // one request per connection: each is seen here
	}
	if err := req.Write(back); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if upgrade { // the attached stdin, half-closed by the client
			_, _ = io.Copy(back, br)
			_ = back.CloseWrite()
		}
	}()
	_, _ = io.Copy(c, back)
	_ = c.CloseWrite()
	if upgrade {
		c.Close() // ends the stdin copy if the client has not closed it
	}
	<-done
}
