package e2e

// A bind source swapped exactly between the daemon's check and the
// engine's mount, on the start the test chooses: the daemon talks to its
// engine through a proxy in the test, which makes the swap when it sees the
// create request go by, after the daemon's check (Docker resolves the
// source when it starts the container, rootless Podman when it creates it,
// through the daemon's link). TestE2EMountRaceExtraMount makes the same swap
// from an agent, where a start is hit only by chance; here every one is, so
// the confirmation after start is shown to stop it for each daemon user:
// root and rootless Podman's user looking through /proc/<pid>/root, the
// `docker` group member from the runner's report (docs/decisions.md,
// record 44).

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
	proxy := startSwapProxy(t, filepath.Join(base, "proxy"), engineSocket(e))
	e.extraEnv = append(e.extraEnv, "BRIDGED_MOUNT_ALLOWLIST="+allowlist, "DOCKER_HOST=unix://"+proxy.sock)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "other", "--no-trigger", "local:other")
	e.mustCLI("groups", "set", "--mount", app+":app", "other")
	d := e.start()

	if got := e.bash("local:other", "ls -A /workspace/extra/app", turnWait); !strings.Contains(got, "app.txt") {
		t.Fatalf("the other group's first run lists %q in /workspace/extra/app; want app.txt", got)
	}
	waitNoAgent(t, e, "other", turnWait)

	// The next create request swaps app/ for a link to the secret
	// directory, outside the allowed roots: the daemon checked app/
	// before it asked for the container, the engine mounts what the path
	// is after.
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
		t.Fatal("the swap was not made: no create request went through the test's proxy")
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
	// The confirmation each daemon user makes: root and rootless
	// Podman's user look through /proc/<pid>/root; the docker group
	// member, whose agents run as other uids, takes its runner's report.
	byReport := strings.Contains(logs, "bind mounts confirmed from the runner's report")
	if want := u.uid != 0 && !u.rootless; byReport != want {
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
// runs its armed function once, when a container create request goes by,
// before the engine has it. Each connection carries one request (a
// connection upgraded for attach, one request and then the streams).
type swapProxy struct {
	sock  string
	mu    sync.Mutex
	swap  func()
	fired atomic.Bool
}

// engineSocket is the socket of the engine e's daemon talks to: the
// DOCKER_HOST it is given (rootless Podman's), else the test's, else
// Docker's default.
func engineSocket(e *env) string {
	host := os.Getenv("DOCKER_HOST")
	for _, kv := range e.extraEnv {
		if v, ok := strings.CutPrefix(kv, "DOCKER_HOST="); ok {
			host = v
		}
	}
	if h, ok := strings.CutPrefix(host, "unix://"); ok {
		return h
	}
	return "/var/run/docker.sock"
}

func startSwapProxy(t *testing.T, dir, target string) *swapProxy {
	t.Helper()
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
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/containers/create") {
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
