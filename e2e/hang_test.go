package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A first turn whose claude prints nothing at all (stuck before its first
// event) is stopped after the start timeout, retried once, and then reported
// in the chat and in status: a hang reaches the user in about twice the
// start timeout plus a retry delay, not after the container timeout times
// the retries.
func TestE2EFirstTurnHangReported(t *testing.T) {
	parallel(t, timed)
	e := newEnv(t, "--retry-base", "100ms", "--idle-timeout", "2s", "--start-timeout", "3s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchContainers(ctx)

	start := time.Now()
	id := e.post("local:main", "fake:stall 1h")
	got := e.waitOut("local:main", id, 1, 2*time.Minute)
	took := time.Since(start)
	notice := strings.ToLower(got[0].Text)
	if !strings.Contains(notice, "did not start") {
		t.Fatalf("first outbound message %q; want a failure notice saying the agent did not start", got[0].Text)
	}
	if took > time.Minute {
		t.Errorf("the hang was reported after %s; want well under a minute with a 3 s start timeout", took)
	}
	w.waitRunning(t, 0, time.Minute)
	if _, _, starts := w.snapshot(); starts != 2 {
		t.Errorf("containers started: %d; want 2 (the hung run and one retry)", starts)
	}
	status := strings.ToLower(e.mustCLI("status"))
	if !strings.Contains(status, "fail") {
		t.Errorf("bridged status does not show the failure:\n%s", status)
	}

	d.stop(t)
}
