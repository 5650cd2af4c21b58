package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bridged-app/bridged/internal/testlog"
)

// refusingUpstream is a Messages API that refuses every request with one
// HTTP status and error type, and records the prompt of each.
type refusingUpstream struct {
	srv     *httptest.Server
	mu      sync.Mutex
	prompts []string
}

func newRefusingUpstream(t *testing.T, status int, typ, msg string) *refusingUpstream {
	u := &refusingUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(body, &req)
		p := ""
		if len(req.Messages) > 0 && len(req.Messages[0].Content) > 0 {
			p = req.Messages[0].Content[0].Text
		}
		u.mu.Lock()
		u.prompts = append(u.prompts, p)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *refusingUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.prompts...)
}

// An API key the API refuses (401) fails the turn at once: no back-off
// retries, one notice in the chat naming the fix, one alert to the owner;
// a later message, and a restart, do not run the failed message again.
func TestE2EAPIKeyRefusedFailsAtOnce(t *testing.T) {
	parallel(t, timed)
	up := newRefusingUpstream(t, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.srv.URL}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "team", "--no-trigger", "local:team")
	d := e.start()
	mainFrom := lastID(e, "local:main")

	// The default retry base is 5 s: the six attempts of a retried failure
	// take over 2.5 minutes, and the first retry comes 5 s after the first
	// failure. The notice must come well before that.
	began := time.Now()
	id := e.post("local:team", "fake:api first question")
	notice := e.waitOut("local:team", id, 1, 75*time.Second)[0].Text
	took := time.Since(began)
	if !strings.Contains(notice, "ANTHROPIC_API_KEY") || !strings.Contains(notice, "401") || !strings.Contains(notice, "restart") {
		t.Errorf("team got %q; want a notice naming the refused key (401) and the fix", notice)
	}
	t.Logf("the refused turn was told after %s", took.Round(time.Millisecond))
	alert := e.waitOut("local:main", mainFrom, 1, 30*time.Second)[0].Text
	if !strings.Contains(alert, "team") || !strings.Contains(alert, "401") || !strings.Contains(alert, "ANTHROPIC_API_KEY") {
		t.Errorf("main chat got %q; want the owner alerted of the refused key", alert)
	}
	if p := up.seen(); len(p) != 1 {
		t.Errorf("the API was asked %d times (%q); want once, no retry", len(p), p)
	}

	// A later message runs once, on its own: the failed one is not run again.
	id = e.post("local:team", "fake:api second question")
	if got := e.waitOut("local:team", id, 1, 60*time.Second)[0].Text; !strings.Contains(got, "ANTHROPIC_API_KEY") {
		t.Errorf("team got %q for the second message; want the notice again", got)
	}
	if p := up.seen(); len(p) != 2 || p[1] != "second question" {
		t.Errorf("the API was asked %q; want the first question once, then the second once", p)
	}

	// A restart runs nothing again either.
	d.stop(t)
	d = e.start()
	id = e.post("local:team", "fake:api third question")
	e.waitOut("local:team", id, 1, 60*time.Second)
	if p := up.seen(); len(p) != 3 || p[2] != "third question" {
		t.Errorf("after a restart the API was asked %q; want each question once", p)
	}
	// One alert: the owner was told once.
	if told := e.outSince("local:main", mainFrom); len(told) != 1 {
		t.Errorf("main chat got %d messages %+v; want the one alert", len(told), told)
	}
	if took > 45*time.Second {
		t.Errorf("the refused turn was told after %s; want it at once, not after back-off", took.Round(time.Second))
	}
	d.stop(t)
}

// chatM runs `bridged chat -m text group` and returns its output, exit
// code and how long it took.
func (e *env) chatM(group, text string, extra ...string) (stdout, stderr string, code int, took time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append([]string{"chat", "-m", text, "--home", e.home}, extra...)
	cmd := exec.CommandContext(ctx, bridgedBin, append(args, group)...)
	cmd.Env = e.environ()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	began := time.Now()
	err := cmd.Run()
	took = time.Since(began)
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		e.t.Fatalf("chat -m: %v", err)
	}
	return out.String(), errb.String(), code, took
}

// A message that will not start a turn is said at once: `chat -m` to a
// group that needs its trigger, and to a group paused by its budget,
// prints why and exits with its documented status (3, 4) instead of
// waiting out --timeout.
func TestE2EChatSaysAtOnceNoTurn(t *testing.T) {
	parallel(t, timed)
	// The budget counts what the proxy meters: the fake upstream prices
	// each call.
	up := newPricedUpstream(t)
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = append(e.extraEnv, "BRIDGED_ANTHROPIC_URL="+up.srv.URL)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "club", "local:club") // needs @Andy
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "--no-trigger", "local:fam")
	// One metered API call costs more than this.
	e.mustCLI("groups", "set", "--budget-daily", "0.0001", "fam")
	d := e.start()

	out, errs, code, took := e.chatM("club", "hello", "--timeout", "60s")
	if code != 3 || !strings.Contains(errs, "not triggered (needs @Andy)") || out != "" {
		t.Errorf("chat -m hello to a group needing @Andy: exit %d, stdout %q, stderr %q; want exit 3 and the reason", code, out, errs)
	}
	if took > 15*time.Second {
		t.Errorf("chat -m to an untriggered group took %s; want it at once", took.Round(time.Millisecond))
	}
	// The interactive chat says it too, and its end of input ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgedBin, "chat", "--home", e.home, "--timeout", "60s", "club")
	cmd.Env = e.environ()
	cmd.Stdin = strings.NewReader("hello again\n")
	var iout, ierr strings.Builder
	cmd.Stdout, cmd.Stderr = &iout, &ierr
	began := time.Now()
	if err := cmd.Run(); err != nil || !strings.Contains(ierr.String(), "not triggered (needs @Andy)") {
		t.Errorf("interactive chat to a group needing @Andy: %v, stdout %q, stderr %q; want it to say the message was not triggered", err, iout.String(), ierr.String())
	}
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("interactive chat with an untriggered message took %s; want it to end at once", took.Round(time.Millisecond))
	}

	// The kept messages are context for the next one with the trigger.
	if out, _, code, _ := e.chatM("club", "@Andy fake:reply triggered"); code != 0 || out != "triggered\n" {
		t.Errorf("chat -m with the trigger: exit %d, %q; want the reply", code, out)
	}

	// Spend the budget, then the next message is paused.
	if out, _, code, _ := e.chatM("fam", "fake:api first"); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("first message to fam: exit %d, %q; want the reply", code, out)
	}
	out, errs, code, took = e.chatM("fam", "fake:reply second", "--timeout", "60s")
	if code != 4 || !strings.Contains(errs, "paused by its budget until") {
		t.Errorf("chat -m to a group paused by its budget: exit %d, stdout %q, stderr %q; want exit 4 and the reason", code, out, errs)
	}
	if took > 15*time.Second {
		t.Errorf("chat -m to a paused group took %s; want it at once", took.Round(time.Millisecond))
	}
	d.stop(t)
}

// A post with several files is one turn: `chat -m … --attach a --attach b
// --attach c` is answered once, by a turn whose prompt has the caption and
// every file, and chat -m prints that turn's reply. Repeated, since a post
// split into turns showed only now and then.
func TestE2EAttachmentsOneTurn(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	names := []string{"alpha-notes.txt", "beta-chart.png", "gamma-memo.txt"}
	for i := range 5 {
		from := lastID(e, "local:main")
		args := []string{"chat", "-m", fmt.Sprintf("fake:prompt summarise these, round %d", i)}
		for _, n := range names {
			args = append(args, "--attach", attachFile(t, n, []byte("content of "+n)))
		}
		out := e.mustCLI(append(args, "main")...)
		for _, want := range append([]string{fmt.Sprintf("summarise these, round %d", i)}, names...) {
			if !strings.Contains(out, want) {
				t.Errorf("round %d: chat -m printed %q; want one reply whose prompt has %q", i, out, want)
			}
		}
		// Every reply of the post is in: exactly one, and only after the
		// turn took all three files.
		e.waitOut("local:main", from, 1, 30*time.Second)
		if n := len(e.outSince("local:main", from)); n != 1 {
			t.Errorf("round %d: %d replies %+v; want one turn, one reply", i, n, e.outSince("local:main", from))
		}
	}
	d.stop(t)
}

// A daemon whose output goes to a pipe (`make run | tee log`) is not killed
// by SIGPIPE when the pipe's reader is gone: Ctrl-C (SIGINT) still drains,
// stops its containers and exits 0.
func TestE2EPipedDaemonSurvivesClosedPipe(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "5m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bridgedBin, append([]string{"run", "--home", e.home, "--image", testImage}, e.args...)...)
	cmd.Env = e.environ()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	// Read the log (as tee would) until the daemon runs, then keep reading
	// until the pipe is closed by the test.
	var mu sync.Mutex
	var logs strings.Builder
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), "bridged running") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	select {
	case <-ready:
	case <-exited:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("daemon exited during start-up: %v\n%s", waitErr, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatal("the daemon did not say it runs within 60 s")
	}
	if got := e.ask("local:main", "fake:reply up", 90*time.Second); got != "up" {
		t.Fatalf("reply %q; want up", got)
	}
	ctx := context.Background()
	if n := len(e.containers(ctx)); n != 1 {
		t.Fatalf("%d containers; want the main agent's one", n)
	}

	r.Close() // the reader is gone: the daemon's next log write hits a broken pipe
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("daemon exit after SIGINT with its output pipe closed: %v; want exit 0", waitErr)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("daemon did not stop within 90 s after SIGINT")
	}
	if left := e.containers(ctx); len(left) != 0 {
		t.Errorf("containers left after the piped daemon stopped: %+v", left)
	}
}

// `chat -m` waiting for a turn while the daemon drains on SIGTERM gets the
// turn's reply: the control socket answers until the drain ends, and the
// log says how many turns it drains.
func TestE2EChatDuringDrainGetsReply(t *testing.T) {
	parallel(t, timed)
	e := newEnv(t, "--idle-timeout", "5m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	if got := e.ask("local:main", "fake:reply warm", 90*time.Second); got != "warm" {
		t.Fatalf("reply %q; want warm", got)
	}
	type result struct {
		out, errs string
		code      int
	}
	res := make(chan result, 1)
	go func() {
		out, errs, code, _ := e.chatM("main", "fake:sleep 4s\nfake:reply finished in the drain")
		res <- result{out, errs, code}
	}()
	// The turn is under way (piped into the live container), then SIGTERM.
	if !d.waitLog("messages piped into the live container", 60*time.Second) {
		t.Fatal("the message did not reach the agent")
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	if !d.waitLog("draining 1 turns", 30*time.Second) {
		t.Error("no log line says the daemon drains 1 turn")
	}
	select {
	case r := <-res:
		if r.code != 0 || r.out != "finished in the drain\n" {
			t.Errorf("chat -m during the drain: exit %d, stdout %q, stderr %q; want the turn's reply", r.code, r.out, r.errs)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("chat -m did not end within 2 minutes")
	}
	select {
	case <-d.done:
		if d.err != nil {
			t.Errorf("daemon exit after the drain: %v", d.err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("daemon did not stop after the drain")
	}
}

// `tasks runs` shows how long the task itself took, not the container's
// close delay after its result (10 s).
func TestE2ETaskRunDurationWithoutCloseDelay(t *testing.T) {
	parallel(t, timed)
	e := newEnv(t, "--idle-timeout", "3s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	at := time.Now().Add(taskLead).UTC().Format(time.RFC3339)
	args := fmt.Sprintf(`{"prompt":"fake\u003areply the task ran","schedule_type":"once","schedule_value":%q,"context_mode":"isolated"}`, at)
	id := e.post("local:main", "fake:tool schedule_task "+args)
	first := e.waitOut("local:main", id, 1, 60*time.Second)[0].Text
	task := taskIDRE.FindString(first)
	if task == "" {
		t.Fatalf("schedule_task answer %q; want a task id", first)
	}
	got := e.waitOut("local:main", id, 2, taskLead+90*time.Second)
	if got[1].Text != "the task ran" {
		t.Fatalf("task output %q; want the task's reply", got[1].Text)
	}
	replied, err := time.Parse(time.RFC3339Nano, got[1].Time)
	if err != nil {
		t.Fatalf("reply time %q: %v", got[1].Time, err)
	}
	// The run is recorded when its container is gone, after the close
	// delay.
	var runs struct {
		Runs []struct {
			StartedAt time.Time `json:"started_at"`
			Duration  string    `json:"duration"`
			Status    string    `json:"status"`
		}
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(90 * time.Second)
	for len(runs.Runs) == 0 || runs.Runs[0].Status == "running" {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no finished run of %s within 90 s: %+v", task, runs.Runs)
		}
		if err := e.api("GET", "/v1/tasks/"+task+"/runs", nil, &runs.Runs); err != nil {
			t.Fatal(err)
		}
	}
	if len(runs.Runs) != 1 {
		t.Fatalf("task runs %+v; want one", runs.Runs)
	}
	dur, err := time.ParseDuration(runs.Runs[0].Duration)
	if err != nil {
		t.Fatalf("duration %q: %v", runs.Runs[0].Duration, err)
	}
	// The run ends with its result, which is committed before its reply
	// is sent; the container closes 10 s later.
	if end := runs.Runs[0].StartedAt.Add(dur); end.After(replied.Add(2 * time.Second)) {
		t.Errorf("the task's run took %s by `tasks runs`, ending %s after its reply was sent; want it to end with its result, without the 10 s close delay",
			dur, end.Sub(replied).Round(time.Millisecond))
	}
	d.stop(t)
}

// A message whose group waits for a container slot is said to be queued at
// once, and `chat -m` then waits for its turn and prints the reply.
func TestE2EChatSaysQueued(t *testing.T) {
	parallel(t, timed)
	e := newEnv(t, "--max-containers", "1", "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	busy := e.post("local:main", "fake:sleep 8s\nfake:reply main done")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.watchContainers(ctx).waitRunning(t, 1, 60*time.Second)
	if !d.waitLog(`"message":"session changed"`, 60*time.Second) {
		t.Fatal("main's agent did not begin its turn")
	}
	out, errs, code, _ := e.chatM("fam", "fake:reply fam done")
	if code != 0 || out != "fam done\n" || !strings.Contains(errs, "queued behind 1: all 1 container slots are busy") {
		t.Errorf("chat -m to a queued group: exit %d, stdout %q, stderr %q; want it told queued, then the reply", code, out, errs)
	}
	e.waitOut("local:main", busy, 1, 60*time.Second)
	d.stop(t)
}

// openPTY opens a pseudo-terminal and returns its controlling side and the
// terminal a command reads.
func openPTY(t *testing.T) (ctl, tty *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ctl.Close() })
	if err := unix.IoctlSetPointerInt(int(ctl.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ctl.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return ctl, tty
}

// Ctrl-D ends the interactive chat on a terminal at once, even while a turn
// runs (`thinking…`).
func TestE2EChatCtrlDEndsWhileThinking(t *testing.T) {
	parallel(t, timed)
	e := newEnv(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctl, tty := openPTY(t)
	cmd := exec.Command(bridgedBin, "chat", "--home", e.home, "main")
	cmd.Env = e.environ()
	cmd.Stdin = tty
	var out, errs lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()
	if _, err := ctl.Write([]byte("fake:sleep 30s\n")); err != nil {
		t.Fatal(err)
	}
	if !d.waitLog(`"message":"session changed"`, 60*time.Second) {
		t.Fatal("the agent did not begin the turn")
	}
	if !errs.waitFor("thinking…", 30*time.Second) {
		t.Fatalf("the chat did not show thinking…: %q", errs.String())
	}
	began := time.Now()
	if _, err := ctl.Write([]byte{4}); err != nil { // Ctrl-D
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("chat after Ctrl-D: %v; want exit 0 (stderr %q)", waitErr, errs.String())
		}
		t.Logf("Ctrl-D ended the chat in %s", time.Since(began).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Errorf("Ctrl-D did not end the chat within 10 s while the turn ran")
	}
	d.stop(t)
}

// lockedBuffer is a buffer a command writes and a test reads at once.
type lockedBuffer struct {
	testlog.Buffer
}

// waitFor reports whether s was written within d, looking again after
// every write.
func (l *lockedBuffer) waitFor(s string, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return l.WaitFor(ctx, func(written string) bool { return strings.Contains(written, s) }) == nil
}
