package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/ipc/ipctest"
)

// The daemon's documented descriptor bound with the default limits
// (docs/security.md, "Limits"): 256 + max containers × (16 + 1 socket +
// 64 connections + 32 requests in flight).
const (
	floodMaxConns    = 64
	floodMaxInFlight = 32
	floodFDBound     = 256 + 5*(16+1+floodMaxConns+floodMaxInFlight)
)

// openFDs counts the descriptors process pid holds.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("count the daemon's descriptors: %v", err)
	}
	return len(ents)
}

// fdWatch samples a process's descriptor count until stopped and keeps the
// highest.
type fdWatch struct {
	mu   sync.Mutex
	peak int
	stop chan struct{}
	done chan struct{}
}

func watchFDs(t *testing.T, pid int) *fdWatch {
	w := &fdWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
				w.mu.Lock()
				w.peak = max(w.peak, len(ents))
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(w.end)
	return w
}

func (w *fdWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *fdWatch) max() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

// waitFile waits for path, a file a container writes in a directory bind
// mounted from the host, to exist.
func waitFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	err := ipctest.WaitFor(ctx, filepath.Dir(path), func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
	if err != nil {
		t.Fatalf("%s did not appear within %s: %v", path, within, err)
	}
}

// One group's agent floods its credential-proxy socket: 3,000 requests the
// proxy refuses, then 3,000 idle connections held open. The daemon's
// descriptors stay under the documented bound, the connections past the cap
// are closed at once, the control API and another group (a new container,
// its own API request through its own proxy socket) keep answering, and
// the log holds a handful of refusal lines, not thousands. Containers run
// with a nofile limit of 4096.
func TestE2EProxyFlood(t *testing.T) {
	parallel(t, timed)
	onEngines(t, testProxyFlood)
}

func testProxyFlood(t *testing.T, u daemonUser) {
	const n = 3000
	up := newFakeUpstream(t)
	e := u.env(t, "--idle-timeout", "3m")
	e.extraEnv = append(e.extraEnv, "BRIDGED_ANTHROPIC_URL="+up.srv.URL)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "evil", "--no-trigger", "local:evil")
	d := e.start()
	pid := d.cmd.Process.Pid

	if got := e.bash("local:evil", "ulimit -n; ulimit -Hn", 90*time.Second); strings.Join(strings.Fields(got), " ") != "4096 4096" {
		t.Errorf("the container's open-file limit (soft, hard) is %q; want 4096 4096", got)
	}
	base := openFDs(t, pid)
	t.Logf("daemon descriptors with one container up: %d (bound %d)", base, floodFDBound)

	watch := watchFDs(t, pid)
	floodID := e.post("local:evil", fmt.Sprintf("fake:flood %d", n))
	evilDir := filepath.Join(e.home, "groups", "evil")
	waitFile(t, filepath.Join(evilDir, "flood-held"), 3*time.Minute)
	held := openFDs(t, pid)
	t.Logf("daemon descriptors with the flood held: %d", held)

	// While it holds: the control API answers, and another group gets a
	// new container whose API request goes through its own proxy socket.
	if err := e.api("GET", "/healthz", nil, nil); err != nil {
		t.Errorf("the control API under the flood: %v", err)
	}
	// Its agent also sends a message through its IPC namespace.
	out := e.mustCLI("chat", "-m", `fake:tool send_message {"text":"ipc under flood"}`+"\nfake:api hello under flood", "main")
	if !strings.HasPrefix(out, "ipc under flood\n") || !strings.HasSuffix(out, "upstream says: hello under flood\n") {
		t.Errorf("the main group under the flood printed %q; want its IPC message, then the upstream's answer", out)
	}

	if err := os.WriteFile(filepath.Join(evilDir, "flood-release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	reply := e.waitOut("local:evil", floodID, 1, 3*time.Minute)[0].Text
	watch.end()
	t.Logf("flood: %s", reply)
	peak := watch.max()
	t.Logf("daemon descriptors: %d before, %d at the peak", base, peak)

	if peak >= floodFDBound {
		t.Errorf("the daemon held %d descriptors under the flood; want under the documented bound %d", peak, floodFDBound)
	}
	if grew := peak - base; grew > floodMaxConns+floodMaxInFlight+16 {
		t.Errorf("the daemon's descriptors grew by %d under the flood; want at most one socket's connection cap (%d) and its requests in flight (%d)",
			grew, floodMaxConns, floodMaxInFlight)
	}
	m := regexp.MustCompile(`connections opened (\d+), closed by the proxy (\d+)`).FindStringSubmatch(reply)
	if m == nil {
		t.Fatalf("flood reply %q", reply)
	}
	opened, closed := atoi(m[1]), atoi(m[2])
	if opened < n/2 {
		t.Errorf("the agent opened only %d of %d connections", opened, n)
	}
	if opened-closed > floodMaxConns {
		t.Errorf("%d of the agent's %d connections were still open on the proxy; want at most the cap, %d", opened-closed, opened, floodMaxConns)
	}

	logs := d.logs()
	refusals := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"component":"credproxy"`) && strings.Contains(line, "refused") {
			refusals++
		}
	}
	if refusals > 20 {
		t.Errorf("the log holds %d proxy refusal lines for the flood; want a few, rate-limited", refusals)
	}
	d.stop(t)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
