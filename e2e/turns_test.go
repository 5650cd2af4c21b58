package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/ipc/ipctest"
	"github.com/moby/moby/client"
)

// Per-turn outcomes of a live container: a later turn that fails is retried
// (or ends in a notice), never skipped, and the container whose claude died
// does not stay busy.

// laterTurnEnv starts a daemon for one main group (local:main) whose idle
// timeout is long, so a container that goes away early went away because of
// the failure, not because it idled out; its first turn has been answered.
func laterTurnEnv(t *testing.T, extra ...string) (*env, *daemon, *containerWatch) {
	t.Helper()
	e := newEnv(t, append([]string{"--retry-base", "100ms", "--idle-timeout", "5m"}, extra...)...)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := e.watchContainers(ctx)
	if got := e.ask("local:main", "fake:reply one", time.Minute); got != "one" {
		t.Fatalf("first reply %q; want one", got)
	}
	return e, d, w
}

// waitGroupFile waits until the agent of main created name in its folder.
func (e *env) waitGroupFile(t *testing.T, name string, within time.Duration) {
	t.Helper()
	dir := filepath.Join(e.home, "groups", "main")
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	err := ipctest.WaitFor(ctx, dir, func() bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	})
	if err != nil {
		t.Fatalf("waiting for the agent to create %s: %v", name, err)
	}
}

// gatedTurn is a fake:bash directive for the main agent that creates began
// in its folder and then waits until the test opens gate there (openGate):
// a turn the test must catch in the middle waits for it, not for a clock
// a busy machine can outrun. A turn run again finds the gate open and goes
// on at once. It prints nothing.
func gatedTurn(began, gate string) string {
	return "fake:bash touch " + began + "; until [ -e " + gate + " ]; do sleep 0.1; done"
}

// openGate lets the main agent's turn waiting on gate (gatedTurn) go on.
func (e *env) openGate(t *testing.T, gate string) {
	t.Helper()
	writeFile(t, filepath.Join(e.home, "groups", "main", gate), "")
}

// noMoreOut fails if anything is sent to chat after id within wait.
func (e *env) noMoreOut(t *testing.T, chat string, after int64, wait time.Duration) {
	t.Helper()
	for _, m := range e.messages(chat, after, wait) {
		if m.Direction == "out" {
			t.Errorf("sent again after #%d: %+v", after, m)
		}
	}
}

// A later turn that crashes claude every time: the runner gives the turn to
// a restarted claude once, it dies again, and the host retries the turn in
// fresh containers; after the retries one notice names the real reason,
// status shows the failure, and no container is left running (the first one
// did not sit "busy" until the container timeout).
func TestE2ELaterTurnCrashEveryAttempt(t *testing.T) {
	parallel(t, light)
	e, d, w := laterTurnEnv(t)
	id := e.post("local:main", "fake:crash")
	got := e.waitOut("local:main", id, 1, 3*time.Minute)
	notice := got[0].Text
	if !strings.Contains(notice, "failed 6 times") || !strings.Contains(notice, "claude exited with status 2") {
		t.Fatalf("first outbound message %q; want a notice that the agent failed 6 times because claude exited with status 2", notice)
	}
	if strings.Contains(notice, "mcp") || strings.Contains(notice, "{") {
		t.Errorf("notice %q quotes a log line", notice)
	}
	w.waitRunning(t, 0, 30*time.Second)
	if _, _, starts := w.snapshot(); starts != 6 {
		t.Errorf("containers started: %d; want 6 (the live container whose later turn failed, and five retries)", starts)
	}
	status := e.mustCLI("status")
	if !strings.Contains(status, "claude exited with status 2") {
		t.Errorf("bridged status does not show the failed turn:\n%s", status)
	}
	e.noMoreOut(t, "local:main", got[0].ID, 3*time.Second)
	d.stop(t)
}

// claude killed once during a later turn: the runner restarts it and gives
// it the turn again, which is answered exactly once; the container is then
// closed, not left busy.
func TestE2ELaterTurnClaudeKilledOnce(t *testing.T) {
	parallel(t, light)
	e, d, w := laterTurnEnv(t)
	id := e.post("local:main", "fake:bash test -e .killed && echo answered || { touch .killed; kill -9 $PPID; }")
	got := e.waitOut("local:main", id, 1, 2*time.Minute)
	if strings.TrimSpace(got[0].Text) != "answered" {
		t.Fatalf("reply %q; want the turn answered after claude's restart", got[0].Text)
	}
	w.waitRunning(t, 0, time.Minute)
	if _, _, starts := w.snapshot(); starts != 1 {
		t.Errorf("containers started: %d; want 1 (the restarted claude answered in the same container)", starts)
	}
	e.noMoreOut(t, "local:main", got[0].ID, 3*time.Second)
	d.stop(t)
}

// A container killed (docker kill) during a later turn: the turn is run
// again in a new container and answered exactly once.
func TestE2ELaterTurnContainerKilled(t *testing.T) {
	parallel(t, light)
	e, d, w := laterTurnEnv(t)
	id := e.post("local:main", gatedTurn(".started", ".go")+"\nfake:reply two")
	e.waitGroupFile(t, ".started", time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	live := e.containers(ctx)
	if len(live) != 1 {
		t.Fatalf("containers: %+v; want the one running the turn", live)
	}
	if _, err := docker.ContainerKill(ctx, live[0].ID, client.ContainerKillOptions{}); err != nil {
		t.Fatal(err)
	}
	e.openGate(t, ".go")
	got := e.waitOut("local:main", id, 1, 2*time.Minute)
	if strings.TrimSpace(got[0].Text) != "two" {
		t.Fatalf("reply %q; want the killed turn answered by the retry", got[0].Text)
	}
	if _, _, starts := w.snapshot(); starts != 2 {
		t.Errorf("containers started: %d; want 2", starts)
	}
	e.noMoreOut(t, "local:main", got[0].ID, 3*time.Second)
	d.stop(t)
}

// A later turn that hangs past the container timeout: the container is
// stopped and the turn runs again in a new one (where it does not hang),
// answered exactly once. The hanging turn is queued behind a running one, so
// it is a later turn of the first container whatever the timing.
func TestE2ELaterTurnHang(t *testing.T) {
	parallel(t, long)
	e := newEnv(t, "--retry-base", "100ms", "--idle-timeout", "2s", "--container-timeout", "32s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchContainers(ctx)
	first := e.post("local:main", "fake:bash touch .first\nfake:sleep 2s\nfake:reply one")
	e.waitGroupFile(t, ".first", time.Minute)
	e.post("local:main", "fake:bash test -e .hung && echo two || { touch .hung; sleep 300; }")
	got := e.waitOut("local:main", first, 2, 3*time.Minute)
	if strings.TrimSpace(got[0].Text) != "one" || strings.TrimSpace(got[1].Text) != "two" {
		t.Fatalf("replies %+v; want one, then two from the retry", got)
	}
	if _, _, starts := w.snapshot(); starts != 2 {
		t.Errorf("containers started: %d; want 2", starts)
	}
	e.noMoreOut(t, "local:main", got[1].ID, 3*time.Second)
	d.stop(t)
}

// A reply that cannot be committed because the disk holding the store is
// full: the turn fails and is retried, status says why, the message is not
// skipped, and once space returns it is answered exactly once. The store is
// put on a small tmpfs the test mounts, so it needs root.
func TestE2EReplyOnFullDisk(t *testing.T) {
	parallel(t, light)
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING the full-disk test: mounting a small tmpfs for the store needs root")
	}
	e := newEnv(t, "--retry-base", "1s", "--idle-timeout", "5m")
	storeDir := filepath.Join(e.home, "store")
	if err := os.MkdirAll(storeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", storeDir).CombinedOutput(); err != nil {
		t.Skipf("SKIPPING the full-disk test: cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", storeDir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", storeDir, err, out)
		}
	})
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	if got := e.ask("local:main", "fake:reply one", time.Minute); got != "one" {
		t.Fatalf("first reply %q; want one", got)
	}

	id := e.post("local:main", gatedTurn(".started", ".go")+"\nfake:reply two")
	e.waitGroupFile(t, ".started", time.Minute)
	filler := filepath.Join(storeDir, "filler")
	fill(t, filler)
	e.openGate(t, ".go")

	// The reply cannot be stored: status shows the failed turn and why.
	deadline := time.Now().Add(time.Minute)
	for {
		status := e.mustCLI("status")
		if strings.Contains(status, "disk full") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridged status does not show the full disk:\n%s\n%s", status, tail(d.logs(), 40))
		}
		// Nothing announces the failure but status: poll it.
		e.messages("local:main", id, time.Second)
	}
	if out := e.outSince("local:main", id); len(out) != 0 {
		t.Fatalf("sent while the disk is full: %+v", out)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	got := e.waitOut("local:main", id, 1, 2*time.Minute)
	if strings.TrimSpace(got[0].Text) != "two" {
		t.Fatalf("reply %q; want the turn answered once space returned", got[0].Text)
	}
	e.noMoreOut(t, "local:main", got[0].ID, 3*time.Second)
	d.stop(t)
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// The last partial block.
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
}
