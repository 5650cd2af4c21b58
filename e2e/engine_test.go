package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A broken or hung Engine API, through a fault-injecting proxy the daemon
// reaches with DOCKER_HOST: one container per group always, and a hung
// engine reaches the chat as a failure notice.

// engineEnv starts a daemon for one main group (local:main) that talks to
// the engine through a fault proxy.
func engineEnv(t *testing.T, extraEnv []string, args ...string) (*env, *daemon, *faultProxy, *containerWatch) {
	t.Helper()
	needDocker(t)
	p := startFaultProxy(t)
	e := newEnv(t, append([]string{"--retry-base", "100ms"}, args...)...)
	e.extraEnv = append([]string{"DOCKER_HOST=" + p.dockerHost()}, extraEnv...)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := e.watchContainers(ctx)
	if got := e.ask("local:main", "fake:reply one", time.Minute); got != "one" {
		t.Fatalf("first reply %q; want one", got)
	}
	return e, d, p, w
}

// The attach and wait connections are cut while a turn runs (as a dockerd
// restart with live-restore does): the old container is stopped before the
// turn runs again, the turn and every follow-up are answered, and at no
// time do two containers of the group run.
//
// Without the fix (the runtime not stopping a container whose connection
// was lost, and the router not stopping leftovers) the old container keeps
// running beside the retry's: maxRunning is 2 and follow-ups it takes from
// input/ are never answered.
func TestE2EEngineConnectionCut(t *testing.T) {
	parallel(t, light)
	e, d, p, w := engineEnv(t, nil, "--idle-timeout", "5m")
	id := e.post("local:main", "fake:bash touch .started\nfake:sleep 3s\nfake:reply two")
	e.waitGroupFile(t, ".started", time.Minute)
	if n := p.cutStreams(); n < 2 {
		t.Fatalf("cut %d connections; want the attach and the wait", n)
	}
	got := e.waitOut("local:main", id, 1, 2*time.Minute)
	if strings.TrimSpace(got[0].Text) != "two" {
		t.Fatalf("reply %q; want the cut turn answered by the retry", got[0].Text)
	}
	last := got[0].ID
	for _, f := range []string{"three", "four", "five"} {
		id := e.post("local:main", "fake:reply "+f)
		got := e.waitOut("local:main", id, 1, time.Minute)
		if strings.TrimSpace(got[0].Text) != f {
			t.Fatalf("reply %q; want %s", got[0].Text, f)
		}
		last = got[0].ID
	}
	e.noMoreOut(t, "local:main", last, 3*time.Second)
	if running, maxRunning, starts := w.snapshot(); maxRunning != 1 || running != 1 || starts != 2 {
		t.Errorf("containers: %d running, at most %d at once, %d started; want 1, 1, 2 (the old one stopped before the retry)", running, maxRunning, starts)
	}
	d.stop(t)
}

// The attach and wait connections of an idle container are cut: it is
// stopped (all it did is committed: no retry, no notice), and the next
// messages are answered by one new container, never two at once.
func TestE2EEngineConnectionCutIdle(t *testing.T) {
	parallel(t, light)
	e, d, p, w := engineEnv(t, nil, "--idle-timeout", "5m")
	if n := p.cutStreams(); n < 2 {
		t.Fatalf("cut %d connections; want the attach and the wait", n)
	}
	w.waitRunning(t, 0, time.Minute) // the lost container is stopped
	var last int64
	for _, f := range []string{"two", "three", "four"} {
		id := e.post("local:main", "fake:reply "+f)
		got := e.waitOut("local:main", id, 1, time.Minute)
		if strings.TrimSpace(got[0].Text) != f {
			t.Fatalf("reply %q; want %s", got[0].Text, f)
		}
		last = got[0].ID
	}
	e.noMoreOut(t, "local:main", last, 3*time.Second)
	if running, maxRunning, starts := w.snapshot(); maxRunning != 1 || running != 1 || starts != 2 {
		t.Errorf("containers: %d running, at most %d at once, %d started; want 1, 1, 2", running, maxRunning, starts)
	}
	d.stop(t)
}

// The engine hangs (accepts connections, never answers): every call has
// its own deadline, so the run fails, is retried, and the chat gets a
// failure notice within a bounded time; status shows it. Once the engine
// answers again, the next message is answered.
//
// Without the fix (no per-call deadlines) the run hangs on its first
// Engine API call: no notice ever comes.
func TestE2EEngineHang(t *testing.T) {
	// Serial: its 2 s deadline on each Engine API call is against the one
	// Docker engine, which the parallel tests keep busy starting and
	// removing containers; beside them a call that should answer did not.
	e, d, p, w := engineEnv(t, []string{"BRIDGED_ENGINE_TIMEOUT=2s"}, "--idle-timeout", "2s")
	w.waitGone(t, time.Minute) // idled out: the next message needs a new container
	p.setHang(true)
	start := time.Now()
	id := e.post("local:main", "fake:reply two")
	got := e.waitOut("local:main", id, 1, 2*time.Minute)
	took := time.Since(start)
	notice := got[0].Text
	if !strings.Contains(notice, "could not answer") || !strings.Contains(notice, "did not answer within 2s") {
		t.Fatalf("first outbound message %q; want a failure notice naming the engine that did not answer", notice)
	}
	// 6 attempts of a few 2 s calls each, plus 3.1 s of back-off.
	if took > 90*time.Second {
		t.Errorf("notice after %s; want it within 90s", took)
	}
	if p.held.Load() == 0 {
		t.Errorf("the proxy held no request; the hang was not exercised")
	}
	status := e.mustCLI("status", "--json")
	if !strings.Contains(status, "did not answer within 2s") || !strings.Contains(e.mustCLI("status"), "Recent failures") {
		t.Errorf("status does not show the failure:\n%s", status)
	}
	p.setHang(false)
	id = e.post("local:main", "fake:reply three")
	got = e.waitOut("local:main", id, 1, time.Minute)
	if !strings.Contains(got[len(got)-1].Text, "three") {
		t.Fatalf("replies after the engine came back: %+v; want three", got)
	}
	if _, maxRunning, _ := w.snapshot(); maxRunning != 1 {
		t.Errorf("at most %d containers ran at once; want 1", maxRunning)
	}
	d.stop(t)
}
