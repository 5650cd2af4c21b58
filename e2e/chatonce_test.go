package e2e

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// `bridged chat -m` against a live container ends when the agent's turn
// ends: no quiet period after the reply, every reply of the turn printed
// (a send_message during the turn too), and a turn bridged gave up on exits
// non-zero with the reason.
func TestE2EChatOnceEndsAtTurnEnd(t *testing.T) {
	parallel(t, timed)
	e := newEnv(t, "--retry-base", "100ms", "--idle-timeout", "5m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	if out := e.mustCLI("chat", "-m", "fake:reply warm", "main"); out != "warm\n" {
		t.Fatalf("first chat -m printed %q; want the reply", out)
	}

	// What is timed is from the turn's reply, as the daemon stored it, to
	// the command's end: not the command's start, which on two busy cores
	// alone can take seconds.
	from := lastID(e, "local:main")
	out := e.mustCLI("chat", "-m", `fake:tool send_message {"text":"on it"}`+"\nfake:reply all done", "main")
	ended := time.Now()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 2 || lines[0] != "on it" || lines[len(lines)-1] != "all done" {
		t.Errorf("chat -m printed %q; want the message sent during the turn, then the reply", out)
	}
	var replied time.Time
	for _, m := range e.outSince("local:main", from) {
		if strings.HasSuffix(m.Text, "all done") {
			var err error
			if replied, err = time.Parse(time.RFC3339Nano, m.Time); err != nil {
				t.Fatalf("the reply's time %q: %v", m.Time, err)
			}
		}
	}
	if replied.IsZero() {
		t.Fatalf("no reply ending \"all done\" in the chat: %+v", e.outSince("local:main", from))
	}
	took := ended.Sub(replied)
	t.Logf("chat -m ended %s after the turn's reply", took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("chat -m to a live container ended %s after the turn's reply; want it to end with the turn, well under 2 s", took.Round(time.Millisecond))
	}

	// A turn that fails after the agent's own message: not run again (the
	// message would go twice), but chat -m says it failed.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgedBin, "chat", "-m", `fake:tool send_message {"text":"on it"}`+"\nfake:error API Error: boom", "main", "--home", e.home)
	cmd.Env = e.environ()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("chat -m on a turn that failed after its own message: %v; want exit code 1 (stdout %q, stderr %q)", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "on it") || !strings.Contains(stdout.String(), "could not finish my answer") ||
		!strings.Contains(stderr.String(), "gave up after its first attempt") || !strings.Contains(stderr.String(), "boom") {
		t.Errorf("stdout %q, stderr %q; want the agent's message, the notice, and why the turn failed", stdout.String(), stderr.String())
	}

	// A turn that fails every time: retried, then given up.
	cmd = exec.CommandContext(ctx, bridgedBin, "chat", "-m", "fake:error API Error: Repeated 529 Overloaded errors", "main", "--home", e.home)
	cmd.Env = e.environ()
	stdout.Reset()
	stderr.Reset()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("chat -m on a failing turn: %v; want exit code 1 (stdout %q, stderr %q)", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "attempt 1 of 6 failed") || !strings.Contains(stderr.String(), "gave up after 6 attempts") ||
		!strings.Contains(stderr.String(), "529 Overloaded") {
		t.Errorf("stderr %q; want each failed attempt and the final reason", stderr.String())
	}

	d.stop(t)
}
