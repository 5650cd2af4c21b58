package e2e

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The approval waits below are scaled to the daemon's timeouts, not to the
// defaults: the container timeout is 32 s (the least an idle timeout of
// 2 s allows) and chat -m's --timeout 15 s, and the owner answers only
// after holdPast, longer than both; the approvals' own timeout stays far
// above (10 min). A wait of minutes against the default 30 min container
// timeout and 5 min --timeout is the same case, slower.
const (
	waitContainerTimeout = 32 * time.Second
	holdPast             = waitContainerTimeout + 8*time.Second
)

// keepsRunning fails if, within d, fewer than n containers of the home run:
// the time passing is what is tested.
func (w *containerWatch) keepsRunning(t testing.TB, n int, d time.Duration) {
	t.Helper()
	end := time.After(d)
	for {
		if r, _, _ := w.snapshot(); r < n {
			t.Fatalf("%d containers run while a turn waits for the owner; want %d (stopped mid-turn)", r, n)
		}
		select {
		case <-w.changed:
		case <-end:
			return
		}
	}
}

// A turn that asks twice, each answer coming after the container timeout
// has passed, is held open meanwhile: its container is not stopped, and the
// reply comes after the answers, from the one container.
func TestE2EApprovalWaitHoldsTheTurn(t *testing.T) {
	parallel(t, long)
	e := newEnv(t, "--idle-timeout", "2s", "--container-timeout", waitContainerTimeout.String())
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchContainers(ctx)
	const wait = 90 * time.Second
	mainFrom := lastID(e, "local:main")
	id := e.post("local:fam", "fake:bash touch held-1 && echo one\nfake:bash touch held-2 && echo two\nfake:reply both done")
	req, reqMsg := e.waitApproval(mainFrom, wait)
	w.keepsRunning(t, 1, holdPast)
	e.mustCLI("approve", req)
	req2, _ := e.waitApproval(reqMsg, wait)
	w.keepsRunning(t, 1, holdPast)
	e.mustCLI("approve", req2)
	got := e.waitOut("local:fam", id, 1, wait)
	if last := got[len(got)-1].Text; !strings.HasSuffix(last, "both done") {
		t.Fatalf("fam got %+v; want the turn's reply after both answers", got)
	}
	for _, f := range []string{"held-1", "held-2"} {
		if !exists(filepath.Join(e.home, "groups", "fam", f)) {
			t.Errorf("%s not made: the approved command did not run", f)
		}
	}
	if _, _, starts := w.snapshot(); starts != 1 {
		t.Errorf("containers started: %d; want the one, never stopped mid-turn", starts)
	}
	for _, m := range e.outSince("local:main", mainFrom) {
		if strings.Contains(m.Text, "was open when its container ended") {
			t.Errorf("main chat: %q; want no approval denied for a container that ended", m.Text)
		}
	}
	d.stop(t)
}

// `chat -m` whose turn waits for an approval says so at once, with the
// command that answers it, keeps waiting past its --timeout and the
// container timeout, and prints the reply once the owner answered.
func TestE2EChatOnceWaitsForApproval(t *testing.T) {
	parallel(t, long)
	e := newEnv(t, "--idle-timeout", "2s", "--container-timeout", waitContainerTimeout.String())
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	const wait = 90 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgedBin, "chat", "-m", "fake:bash touch waited && echo done after the wait", "--timeout", "15s", "fam", "--home", e.home)
	cmd.Env = e.environ()
	var stdout strings.Builder
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	waitLine := regexp.MustCompile("waiting for approval ([a-z0-9]{4}): `bridged approve ([a-z0-9]{4})`")
	var req string
	deadline := time.After(wait)
	for req == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("chat -m ended before telling the approval wait: %v; stdout %q", <-exited, stdout.String())
			}
			if g := waitLine.FindStringSubmatch(l); g != nil && g[1] == g[2] {
				req = g[1]
			}
		case <-deadline:
			t.Fatalf("chat -m told no approval wait within %s", wait)
		}
	}
	if out := e.mustCLI("approvals", "--open"); !strings.Contains(out, req) {
		t.Fatalf("approvals --open:\n%s\nwant %s, the one chat -m named", out, req)
	}
	// The owner answers after chat -m's --timeout and the container timeout.
	hold := time.After(holdPast)
	for waiting := true; waiting; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("chat -m ended while its approval waited: %v; stdout %q", <-exited, stdout.String())
			}
			t.Logf("chat -m: %s", l)
		case <-hold:
			waiting = false
		}
	}
	e.mustCLI("approve", req)
	for range lines {
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("chat -m: %v; want the reply after the approval (stdout %q)", err, stdout.String())
		}
	case <-time.After(wait):
		t.Fatal("chat -m did not end after the approval")
	}
	if got := stdout.String(); got != "done after the wait\n" {
		t.Errorf("chat -m printed %q; want the reply", got)
	}
	// The message's story tells the wait: which approval, who answered,
	// after how long.
	why := e.mustCLI("why", "last", "--chat", "fam")
	if !regexp.MustCompile(`approval allowed .*approval ` + req + ` \(Bash: touch waited && echo done after the wait\) allowed by the owner \(command line\) after [1-9][0-9.]*s waiting`).MatchString(why) {
		t.Errorf("why:\n%s\nwant the approval %s told, answered from the command line after its wait", why, req)
	}
	d.stop(t)
}

// lines sends each line r gives on a channel, and its whole text on all
// when r ends.
func lines(r io.Reader) (<-chan string, <-chan string) {
	ch, all := make(chan string, 64), make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			ch <- sc.Text()
		}
		close(ch)
		all <- b.String()
	}()
	return ch, all
}

// The interactive `bridged chat` answers approvals and stays open: `yes ID`
// for its own turn's approval, which it shows when it opens, and `no ID` in
// the main chat for another group's, which bridged takes as an answer and
// runs no turn for. Then it still talks to the agent; and when its input
// ends while the last turn waits for the owner, it waits past its --timeout
// for the answer and prints the reply.
func TestE2EChatInteractiveAnswersApprovals(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "5m")
	e.mustCLI("groups", "add", "--tools", "ask", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	const wait = 90 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const chatTimeout = 10 * time.Second
	cmd := exec.CommandContext(ctx, bridgedBin, "chat", "main", "--timeout", chatTimeout.String(), "--home", e.home)
	cmd.Env = e.environ()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out, _ := lines(stdout)
	errs, errText := lines(stderr)
	// expect waits for a line of ch that contains want.
	expect := func(ch <-chan string, want string) {
		t.Helper()
		deadline := time.After(wait)
		for {
			select {
			case l, ok := <-ch:
				if !ok {
					t.Fatalf("the chat ended waiting for %q: %v", want, cmd.Wait())
				}
				t.Logf("chat: %s", l)
				if strings.Contains(l, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q from the chat within %s", want, wait)
			}
		}
	}
	say := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatalf("write %q to the chat: %v", line, err)
		}
	}

	// Its own turn asks: the chat shows the wait; `yes ID` answers it.
	mainFrom := lastID(e, "local:main")
	say("fake:bash touch mine && echo mine-$((40+2))") // the request shows the command, not its output
	req, reqMsg := e.waitApproval(mainFrom, wait)
	expect(errs, "waiting for approval "+req)
	say("yes " + req)
	expect(out, "mine-42")

	// Another group's turn asks in the main chat: `no ID` answers it, and
	// the chat stays open.
	famID := e.post("local:fam", "fake:bash touch theirs && echo theirs done")
	req2, _ := e.waitApproval(reqMsg, wait)
	say("no " + req2)
	if got := e.waitOut("local:fam", famID, 1, wait)[0].Text; !strings.Contains(got, "not approved by the owner") {
		t.Errorf("fam got %q after `no %s` in the chat; want the denial", got, req2)
	}
	say("fake:reply still here")
	expect(out, "still here")

	// The input ends while the last turn waits for the owner: the chat
	// waits past its --timeout for the answer and the reply.
	last := lastID(e, "local:main")
	say("fake:bash touch last && echo last-$((40+2))")
	req3, _ := e.waitApproval(last, wait)
	expect(errs, "waiting for approval "+req3)
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	for hold := time.After(chatTimeout + 5*time.Second); hold != nil; {
		select {
		case l, ok := <-out:
			if !ok {
				t.Fatalf("the chat ended while its last turn waited for the owner: %v", cmd.Wait())
			}
			t.Logf("chat: %s", l)
		case <-hold:
			hold = nil
		}
	}
	e.mustCLI("approve", req3)
	expect(out, "last-42")
	for range out {
	}
	for range errs {
	}
	text := <-errText
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the chat ended with %v; stderr:\n%s", err, text)
	}
	if strings.Contains(text, "invalid request") {
		t.Errorf("stderr:\n%s\nwant no invalid request", text)
	}
	if !exists(filepath.Join(e.home, "groups", "main", "mine")) || exists(filepath.Join(e.home, "groups", "fam", "theirs")) {
		t.Error("want the approved command run and the denied one not")
	}
	d.stop(t)
}
