package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bridged-app/bridged/agent-runner/runner"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipc/ipctest"
	"github.com/bridged-app/bridged/internal/testcover"
	"github.com/bridged-app/bridged/internal/testlog"
	"github.com/rs/zerolog"
)

// The tests run agent-runner as a plain process against cmd/fakeclaude, both
// built once into a temporary directory.
var bin struct{ runner, claude string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agent-runner-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.runner = filepath.Join(dir, "agent-runner")
	bin.claude = filepath.Join(dir, "claude")
	for _, b := range []struct{ out, pkg string }{
		{bin.runner, "github.com/bridged-app/bridged/agent-runner"},
		{bin.claude, "github.com/bridged-app/bridged/cmd/fakeclaude"},
	} {
		args := append([]string{"build", "-o", b.out}, testcover.BuildFlags()...)
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, b.pkg)...)

		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", b.pkg, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	// The leak check runs before the binaries are removed and the process exits.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// Credentials held by the host's proxy (apiProxy); they must reach only the
// upstream, never the runner, claude or any file.
const (
	secretKey   = "sk-ant-secret-value-8c1f"
	secretOAuth = "oauth-secret-value-77d2"
)

type agent struct {
	t       testing.TB
	root    string
	ipc     ipc.Layout
	work    string
	home    string
	cmd     *exec.Cmd
	events  chan ipc.Event
	badOut  chan string
	stderr  *testlog.Buffer
	exited  chan struct{}
	exitErr error
}

type agentOpts struct {
	args    []string
	env     []string
	noSandx bool
	claude  string
	rawIn   []byte
	setup   func(root string) // runs before the runner starts
}

func defaultInput(prompt string) ipc.RunInput {
	return ipc.RunInput{
		Prompt:        prompt,
		Group:         "family",
		Chat:          "120363001@g.us",
		AssistantName: "Andy",
		Timezone:      "Europe/Berlin",
	}
}

func startAgent(t testing.TB, in ipc.RunInput, o agentOpts) *agent {
	t.Helper()
	root := t.TempDir()
	a := &agent{
		t:      t,
		root:   root,
		ipc:    ipc.Layout{Root: filepath.Join(root, "ipc")},
		work:   filepath.Join(root, "group"),
		home:   filepath.Join(root, "home"),
		events: make(chan ipc.Event, 256),
		badOut: make(chan string, 16),
		stderr: &testlog.Buffer{},
		exited: make(chan struct{}),
	}
	for _, d := range []string{a.work, a.home, filepath.Join(root, "global"), filepath.Join(root, "extra")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.ipc.Ensure(); err != nil {
		t.Fatal(err)
	}
	if o.setup != nil {
		o.setup(root)
	}
	claude := o.claude
	if claude == "" {
		claude = bin.claude
	}
	args := append([]string{
		"--ipc-dir", a.ipc.Root, "--workdir", a.work,
		"--global-dir", filepath.Join(root, "global"), "--extra-dir", filepath.Join(root, "extra"),
		"--claude", claude,
	}, o.args...)
	a.cmd = exec.Command(bin.runner, args...)
	env := []string{
		"HOME=" + a.home,
		"PATH=" + os.Getenv("PATH"),
		// Present in the runner's environment: must not reach claude.
		"ANTHROPIC_API_KEY=parent-key-must-not-leak",
		"CLAUDECODE=1",
		// Race-enabled binaries otherwise sleep 1s at exit.
		"GORACE=atexit_sleep_ms=0",
	}
	if !o.noSandx {
		env = append(env, "IS_SANDBOX=1") // these tests run as root
	}
	env = append(env, testcover.Env(t)...)
	a.cmd.Env = append(env, o.env...)
	a.cmd.Dir = root
	input := o.rawIn
	if input == nil {
		var err error
		if input, err = json.Marshal(in); err != nil {
			t.Fatal(err)
		}
	}
	a.cmd.Stdin = bytes.NewReader(input)
	a.cmd.Stderr = a.stderr
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			ev, err := ipc.DecodeEvent(sc.Bytes())
			if err != nil {
				a.badOut <- sc.Text()
				continue
			}
			a.events <- ev
		}
	}()
	go func() {
		<-readDone
		a.exitErr = a.cmd.Wait()
		close(a.events)
		close(a.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-a.exited:
		default:
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
		select {
		case line := <-a.badOut:
			t.Errorf("stdout carried a line that is not an event: %q", line)
		default:
		}
		if t.Failed() {
			t.Logf("agent-runner stderr:\n%s", a.stderr.String())
		}
	})
	return a
}

// next returns the next event.
func (a *agent) next() ipc.Event {
	a.t.Helper()
	select {
	case ev, ok := <-a.events:
		if !ok {
			a.t.Fatalf("agent-runner exited (%v) while an event was expected", a.exitErr)
		}
		return ev
	case <-time.After(20 * time.Second):
		a.t.Fatal("no event within 20s")
	}
	return ipc.Event{}
}

// nextOf skips session events and returns the next event of type typ;
// any other event fails the test.
func (a *agent) nextOf(typ ipc.EventType) ipc.Event {
	a.t.Helper()
	for {
		ev := a.next()
		if ev.Type == typ {
			return ev
		}
		if ev.Type != ipc.EventSession {
			a.t.Fatalf("got event %+v; want %s", ev, typ)
		}
	}
}

// wait returns the exit code once the runner has exited.
func (a *agent) wait() int {
	a.t.Helper()
	var rest []ipc.Event
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-a.events:
			if !ok {
				<-a.exited
				if len(rest) > 0 {
					a.t.Logf("events before exit: %+v", rest)
				}
				return a.cmd.ProcessState.ExitCode()
			}
			rest = append(rest, ev)
		case <-timeout:
			a.t.Fatal("agent-runner did not exit within 20s")
		}
	}
}

func (a *agent) writeInput(text string) string {
	a.t.Helper()
	name, err := ipctest.WriteInput(a.ipc, text)
	if err != nil {
		a.t.Fatal(err)
	}
	return name
}

func (a *agent) close() {
	a.t.Helper()
	if err := ipctest.WriteClose(a.ipc); err != nil {
		a.t.Fatal(err)
	}
}

// waitDir waits, on file system events, until cond holds for dir or the
// deadline passes.
func waitDir(t testing.TB, deadline time.Duration, dir, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	if err := ipctest.WaitFor(ctx, dir, cond); err != nil {
		t.Fatalf("waiting %s for %s: %v", deadline, what, err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// assertNoSecrets fails if a secret appears in any file under root or in the
// runner's stderr.
func (a *agent) assertNoSecrets() {
	a.t.Helper()
	for _, s := range []string{secretKey, secretOAuth} {
		if strings.Contains(a.stderr.String(), s) {
			a.t.Errorf("secret %q appears in agent-runner's stderr", s)
		}
		_ = filepath.WalkDir(a.root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(path)
			if err == nil && bytes.Contains(data, []byte(s)) {
				a.t.Errorf("secret %q written to %s", s, path)
			}
			return nil
		})
	}
}

func prompt(text string) string {
	return `<context timezone="Europe/Berlin" now="2026-11-22T09:30:00+01:00"/>` + "\n<messages>\n" +
		`<message sender="Alice" time="2026-11-22T09:29:58+01:00">` + text + "</message>\n</messages>"
}

func TestPromptGivesResult(t *testing.T) {
	a := startAgent(t, defaultInput(prompt("@Andy hello there")), agentOpts{})
	sess := a.next()
	if sess.Type != ipc.EventSession || sess.SessionID == "" || sess.Fresh {
		t.Fatalf("first event %+v; want the new session", sess)
	}
	res := a.nextOf(ipc.EventResult)
	if res.Text != "echo: @Andy hello there" || res.IsError {
		t.Errorf("result %q (error %v); want the echo", res.Text, res.IsError)
	}
	if res.SessionID != sess.SessionID || res.LastUUID == "" {
		t.Errorf("result session %q last uuid %q; want session %q and a uuid", res.SessionID, res.LastUUID, sess.SessionID)
	}
	if res.Usage == nil || res.Usage.InputTokens == 0 || res.NumTurns == 0 {
		t.Errorf("result usage %+v turns %d; want the CLI's figures", res.Usage, res.NumTurns)
	}
	a.close()
	if code := a.wait(); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
	if exists(filepath.Join(a.ipc.Input(), ipc.CloseName)) {
		t.Error("close sentinel left behind")
	}
}

func pidOf(t *testing.T, text string) (pid, session string) {
	t.Helper()
	// fake:pid replies "pid=<pid> session=<id>".
	for _, f := range strings.Fields(text) {
		if v, ok := strings.CutPrefix(f, "pid="); ok {
			pid = v
		}
		if v, ok := strings.CutPrefix(f, "session="); ok {
			session = v
		}
	}
	if pid == "" || session == "" {
		t.Fatalf("reply %q does not reveal pid and session", text)
	}
	return pid, session
}

func TestFollowUpReachesSameProcessMidTurn(t *testing.T) {
	a := startAgent(t, defaultInput("fake:sleep 1s\nfake:pid"), agentOpts{})
	a.nextOf(ipc.EventSession)
	name := a.writeInput("fake:pid")
	// The file is consumed (written to claude's stdin) while the first turn
	// is still sleeping: no result has arrived yet.
	waitDir(t, 5*time.Second, a.ipc.Input(), "follow-up consumed", func() bool { return !exists(filepath.Join(a.ipc.Input(), name)) })
	select {
	case ev := <-a.events:
		t.Fatalf("event %+v before the follow-up was consumed; want it consumed mid-turn", ev)
	default:
	}
	first := a.nextOf(ipc.EventResult)
	second := a.nextOf(ipc.EventResult)
	pid1, s1 := pidOf(t, first.Text)
	pid2, s2 := pidOf(t, second.Text)
	if pid1 != pid2 || s1 != s2 {
		t.Errorf("follow-up answered by pid %s session %s; want the same process %s and session %s", pid2, s2, pid1, s1)
	}
	a.close()
	if code := a.wait(); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
}

func TestCloseWaitsForTurnInFlight(t *testing.T) {
	a := startAgent(t, defaultInput("fake:sleep 800ms\nfake:reply finished"), agentOpts{})
	a.nextOf(ipc.EventSession)
	a.close()
	res := a.nextOf(ipc.EventResult)
	if res.Text != "finished" {
		t.Errorf("result %q; want the turn in flight to finish", res.Text)
	}
	if code := a.wait(); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
}

func TestFollowUpsAfterCloseAreLeftForNextContainer(t *testing.T) {
	a := startAgent(t, defaultInput("fake:reply one"), agentOpts{})
	a.nextOf(ipc.EventResult)
	a.close()
	if code := a.wait(); code != 0 {
		t.Fatalf("exit code %d; want 0", code)
	}
	// Written after the runner exited: still there for the next container.
	name := a.writeInput("late")
	if !exists(filepath.Join(a.ipc.Input(), name)) {
		t.Error("late follow-up vanished")
	}
}

func TestLeftoverInputIsDelivered(t *testing.T) {
	a := startAgent(t, defaultInput("fake:reply first"), agentOpts{setup: func(root string) {
		// Waiting before the runner started, with a stale close sentinel
		// from an earlier container.
		l := ipc.Layout{Root: filepath.Join(root, "ipc")}
		if _, err := ipctest.WriteInput(l, "fake:reply second"); err != nil {
			t.Fatal(err)
		}
		if err := ipctest.WriteClose(l); err != nil {
			t.Fatal(err)
		}
	}})
	r1 := a.nextOf(ipc.EventResult)
	r2 := a.nextOf(ipc.EventResult)
	if r1.Text != "first" || r2.Text != "second" {
		t.Errorf("results %q, %q; want first, second in order", r1.Text, r2.Text)
	}
	a.close()
	if code := a.wait(); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
}

func TestMalformedInputMovedToErrors(t *testing.T) {
	a := startAgent(t, defaultInput("fake:reply ready"), agentOpts{})
	a.nextOf(ipc.EventResult)
	for name, data := range map[string]string{
		"0001-bad.json":   `{"type":"message","text":""}`,
		"0002-junk.json":  `not json at all`,
		"0003-extra.json": `{"type":"message","text":"x","extra":1}`,
	} {
		if err := ipc.WriteFileAtomic(a.ipc.Input(), name, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	a.writeInput("fake:reply still alive")
	if res := a.nextOf(ipc.EventResult); res.Text != "still alive" {
		t.Errorf("result %q; want the good follow-up answered", res.Text)
	}
	for _, name := range []string{"0001-bad.json", "0002-junk.json", "0003-extra.json"} {
		if !exists(filepath.Join(a.ipc.Root, "errors", "input-"+name)) {
			t.Errorf("%s not moved to errors/", name)
		}
		if exists(filepath.Join(a.ipc.Input(), name)) {
			t.Errorf("%s still in input/", name)
		}
	}
	if !strings.Contains(a.stderr.String(), "malformed input file") {
		t.Error("no log line for the malformed files")
	}
	a.close()
	if code := a.wait(); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
}

// claude killed during a later turn is restarted once with --resume and
// given the turn in flight again, which it answers; the error line names the
// reason. A second death ends the run.
func TestCrashRestartsOnceWithResume(t *testing.T) {
	a := startAgent(t, defaultInput("fake:pid"), agentOpts{})
	pid1, s1 := pidOf(t, a.nextOf(ipc.EventResult).Text)

	// The command kills claude (its parent) the first time only.
	marker := filepath.Join(a.root, "killed-once")
	a.writeInput("fake:bash test -e " + marker + " && echo answered || { touch " + marker + "; kill -9 $PPID; }\nfake:pid")
	ev := a.nextOf(ipc.EventError)
	want := "claude was killed by signal killed; restarted with --resume " + s1 + "; the turn in flight was sent again"
	if !ev.Retryable || !strings.HasPrefix(ev.Message, want) {
		t.Errorf("crash report %+v; want a retryable error starting %q", ev, want)
	}
	res := a.nextOf(ipc.EventResult)
	if !strings.HasPrefix(res.Text, "answered\n") {
		t.Fatalf("result %q; want the turn in flight answered by the restarted claude", res.Text)
	}
	pid2, s2 := pidOf(t, res.Text)
	if pid2 == pid1 || s2 != s1 {
		t.Errorf("after restart pid %s session %s; want a new process on session %s", pid2, s2, s1)
	}

	// A second crash is not survived.
	a.writeInput("fake:crash")
	ev = a.nextOf(ipc.EventError)
	if ev.Message != "claude exited with status 2 again; giving up" {
		t.Errorf("second crash report %q; want the exit status and giving up", ev.Message)
	}
	if code := a.wait(); code == 0 {
		t.Error("exit code 0 after claude could not be kept running; want non-zero")
	}
}

// A turn that kills claude every time: the restarted claude gets it again,
// dies again, and the run ends with an error naming the exit status (never a
// log line of the MCP server), so the host retries the turn.
func TestCrashingTurnSentAgainThenGivesUp(t *testing.T) {
	a := startAgent(t, defaultInput("fake:reply hello"), agentOpts{})
	if res := a.nextOf(ipc.EventResult); res.Text != "hello" {
		t.Fatalf("result %q", res.Text)
	}
	a.writeInput("fake:crash")
	ev := a.nextOf(ipc.EventError)
	if !strings.HasPrefix(ev.Message, "claude exited with status 2; restarted with --resume ") ||
		!strings.HasSuffix(ev.Message, "; the turn in flight was sent again (1 message)") {
		t.Errorf("first crash report %q; want the exit status, the restart and the turn sent again", ev.Message)
	}
	ev = a.nextOf(ipc.EventError)
	if ev.Message != "claude exited with status 2 again; giving up" {
		t.Errorf("second crash report %q; want the exit status and giving up", ev.Message)
	}
	if code := a.wait(); code == 0 {
		t.Error("exit code 0; want non-zero so the host retries the turn")
	}
	if !strings.Contains(a.stderr.String(), "stderr_tail") {
		t.Error("claude's stderr tail is not in the runner's log")
	}
}

// A message written while a turn runs waits for a turn of its own (fixture
// 17); when claude dies in that turn, the restarted claude gets it again.
func TestCrashInQueuedTurnSendsItAgain(t *testing.T) {
	a := startAgent(t, defaultInput("fake:sleep 300ms\nfake:reply one"), agentOpts{})
	if ev := a.next(); ev.Type != ipc.EventSession {
		t.Fatalf("first event %+v; want the session of the first turn", ev)
	}
	marker := filepath.Join(a.root, "killed-once")
	a.writeInput("fake:bash test -e " + marker + " && echo two || { touch " + marker + "; kill -9 $PPID; }")
	if res := a.nextOf(ipc.EventResult); res.Text != "one" {
		t.Fatalf("first result %q; want one", res.Text)
	}
	if ev := a.nextOf(ipc.EventError); !strings.Contains(ev.Message, "the turn in flight was sent again (1 message)") {
		t.Errorf("crash report %q; want the queued turn sent again", ev.Message)
	}
	if res := a.nextOf(ipc.EventResult); res.Text != "two" {
		t.Errorf("result %q; want the queued turn answered after the restart", res.Text)
	}
	a.close()
	if code := a.wait(); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
}

func TestUnknownSessionStartsFresh(t *testing.T) {
	in := defaultInput("fake:reply hello again")
	in.SessionID = "5f1d3b8e-0000-4000-8000-00000000dead"
	in.ResumeAt = "6a2e4c9f-0000-4000-8000-00000000beef"
	a := startAgent(t, in, agentOpts{})
	a.writeInput("fake:reply and this too")
	sess := a.next()
	if sess.Type != ipc.EventSession || !sess.Fresh || sess.SessionID == "" || sess.SessionID == in.SessionID {
		t.Fatalf("first event %+v; want a fresh session replacing the unknown one", sess)
	}
	r1 := a.nextOf(ipc.EventResult)
	r2 := a.nextOf(ipc.EventResult)
	if r1.Text != "hello again" || r1.IsError || r1.SessionID != sess.SessionID {
		t.Errorf("result %+v; want the prompt answered in the fresh session", r1)
	}
	if r2.Text != "and this too" {
		t.Errorf("second result %q; want the follow-up answered too", r2.Text)
	}
	a.close()
	if code := a.wait(); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
}

// apiProxy runs the host's credential proxy (holding secretKey, or
// secretOAuth when oauth) in front of a fake upstream and returns the
// runner's environment for it and the headers the upstream saw.
func apiProxy(t *testing.T, oauth bool) (env []string, seen func() []http.Header) {
	t.Helper()
	var mu sync.Mutex
	var hdrs []http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hdrs = append(hdrs, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{`{"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":7,"output_tokens":1}}}`,
			`{"type":"content_block_delta","delta":{"type":"text_delta","text":"via the proxy"}}`,
			`{"type":"message_delta","usage":{"output_tokens":3}}`, `{"type":"message_stop"}`} {
			fmt.Fprintf(w, "data: %s\n\n", d)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(up.Close)
	cfg := credproxy.Config{Upstream: up.URL, APIKey: secretKey, Dir: filepath.Join(t.TempDir(), "proxy"), Log: zerolog.Nop()}
	auth := ipc.APIAuthAPIKey
	if oauth {
		cfg.APIKey, cfg.OAuthToken, auth = "", secretOAuth, ipc.APIAuthOAuth
	}
	p, err := credproxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.Open("family", "c1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	return []string{ipc.EnvAPISocket + "=" + ep.Socket, ipc.EnvAPIAuth + "=" + auth}, func() []http.Header {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(hdrs)
	}
}

func TestAPIThroughTheHostProxy(t *testing.T) {
	for _, oauth := range []bool{false, true} {
		t.Run(fmt.Sprintf("oauth=%v", oauth), func(t *testing.T) {
			env, seen := apiProxy(t, oauth)
			a := startAgent(t, defaultInput("fake:api stream"), agentOpts{env: env})
			res := a.nextOf(ipc.EventResult)
			if res.IsError || res.Text != "via the proxy" {
				t.Fatalf("result %+v; want the streamed text", res)
			}
			h := seen()
			if len(h) != 1 {
				t.Fatalf("upstream saw %d requests", len(h))
			}
			if oauth {
				if h[0].Get("Authorization") != "Bearer "+secretOAuth || h[0].Get("X-Api-Key") != "" {
					t.Errorf("upstream auth headers %v", h[0])
				}
			} else if h[0].Get("X-Api-Key") != secretKey || h[0].Get("Authorization") != "" {
				t.Errorf("upstream auth headers %v", h[0])
			}
			for k, vs := range h[0] {
				if strings.Contains(strings.Join(vs, ","), runner.Placeholder) || strings.Contains(strings.Join(vs, ","), "parent-key") {
					t.Errorf("upstream saw the placeholder or the runner's own key in %s", k)
				}
			}
			a.close()
			a.wait()
			a.assertNoSecrets()
		})
	}
}

// Across nodes (the kubernetes engine, decision record 36) the runner
// reaches the proxy over TCP: the address in its environment, the run's
// token in its input, sent first on each connection. The real key stays in
// the proxy; a wrong token gets no answer, neither from the API nor from
// the IPC host (decision record 42), so only a signal stops its runner.
func TestAPIThroughTheProxyOverTCP(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{`{"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":7,"output_tokens":1}}}`,
			`{"type":"content_block_delta","delta":{"type":"text_delta","text":"via the proxy over TCP"}}`,
			`{"type":"message_delta","usage":{"output_tokens":3}}`, `{"type":"message_stop"}`} {
			fmt.Fprintf(w, "data: %s\n\n", d)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(up.Close)
	c := newChannelHost(t, up.URL)
	token := c.token
	for name, tok := range map[string]string{"wrong token": strings.Repeat("0", len(token)), "right token": token} {
		t.Run(name, func(t *testing.T) {
			c.token = tok
			a := c.start(t, "fake:api stream")
			res := a.nextOf(ipc.EventResult)
			if tok == token && (res.IsError || res.Text != "via the proxy over TCP") {
				t.Fatalf("result %+v; want the streamed text", res)
			}
			if tok != token && res.Text == "via the proxy over TCP" {
				t.Fatalf("result %+v with a wrong token; want no answer from the API", res)
			}
			if tok == token {
				if err := c.home.WriteClose("family"); err != nil {
					t.Fatal(err)
				}
			} else if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			a.wait()
			a.assertNoSecrets()
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 1 || keys[0] != secretKey {
		t.Errorf("upstream saw keys %q; want the real key once (the right token's request only)", keys)
	}
}

func TestBashCommandsNeverSeeCredentials(t *testing.T) {
	env, _ := apiProxy(t, false)
	a := startAgent(t, defaultInput("fake:bash env\nfake:pid"), agentOpts{env: env})
	res := a.nextOf(ipc.EventResult)
	if !strings.Contains(res.Text, "HOME=") {
		t.Fatalf("result %q; want the env output", res.Text)
	}
	for _, leak := range []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", secretKey, secretOAuth, "parent-key", runner.Placeholder} {
		if strings.Contains(res.Text, leak) {
			t.Errorf("Bash command saw %q", leak)
		}
	}
	// claude itself holds the placeholder and the forwarder's address, never
	// a real credential (nor the runner's own).
	pid, _ := pidOf(t, res.Text[strings.Index(res.Text, "pid="):])
	environ, err := os.ReadFile("/proc/" + pid + "/environ")
	if err != nil {
		t.Fatalf("read claude's environment: %v", err)
	}
	vars := strings.Split(string(environ), "\x00")
	has := func(kv string) bool {
		for _, v := range vars {
			if v == kv || (strings.HasSuffix(kv, "*") && strings.HasPrefix(v, strings.TrimSuffix(kv, "*"))) {
				return true
			}
		}
		return false
	}
	for _, want := range []string{"ANTHROPIC_API_KEY=" + runner.Placeholder, "ANTHROPIC_BASE_URL=http://127.0.0.1:*",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=3",
		"IS_SANDBOX=1", "HOME=" + a.home} {
		if !has(want) {
			t.Errorf("claude's environment lacks %s", want)
		}
	}
	for _, v := range vars {
		if strings.HasPrefix(v, "CLAUDECODE=") || strings.Contains(v, "parent-key") || strings.Contains(v, secretKey) ||
			strings.HasPrefix(v, "CLAUDE_CODE_OAUTH_TOKEN=") || strings.HasPrefix(v, "BRIDGED_AGENT_") {
			t.Errorf("claude's environment has %q", v)
		}
	}
	a.close()
	a.wait()
	a.assertNoSecrets()
}

func TestCompactArchivesConversation(t *testing.T) {
	in := defaultInput(prompt("@Jarvis plan the trip to Lisbon"))
	in.AssistantName = "Jarvis"
	a := startAgent(t, in, agentOpts{})
	a.nextOf(ipc.EventResult)
	a.writeInput("fake:compact")
	if res := a.nextOf(ipc.EventResult); res.IsError {
		t.Fatalf("compaction result %+v", res)
	}
	loc, _ := time.LoadLocation(in.Timezone)
	files, _ := filepath.Glob(filepath.Join(a.work, "conversations", "*.md"))
	if len(files) != 1 {
		t.Fatalf("archives %v; want one", files)
	}
	name := filepath.Base(files[0])
	today := time.Now().In(loc).Format("2006-01-02")
	if want := today + "-jarvis-plan-the-trip-to-lisbon.md"; name != want {
		t.Errorf("archive named %q; want %q", name, want)
	}
	data, _ := os.ReadFile(files[0])
	text := string(data)
	for _, want := range []string{"**User**: ", "**Jarvis**: echo: @Jarvis plan the trip to Lisbon", "plan the trip to Lisbon"} {
		if !strings.Contains(text, want) {
			t.Errorf("archive lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "**Andy**") {
		t.Error("archive uses a hard-coded assistant name")
	}
	a.close()
	a.wait()
}

// nextRequest waits for one request file and returns it.
func nextRequest(t *testing.T, l ipc.Layout) ipc.Request {
	t.Helper()
	var names []string
	waitDir(t, 10*time.Second, l.Requests(), "a request file", func() bool {
		names, _ = ipc.List(l.Requests())
		return len(names) > 0
	})
	data, err := os.ReadFile(filepath.Join(l.Requests(), names[0]))
	if err != nil {
		t.Fatal(err)
	}
	req, err := ipc.DecodeRequest(data)
	if err != nil {
		t.Fatalf("request %s: %v", data, err)
	}
	return req
}

func TestToolCallRoundTrip(t *testing.T) {
	a := startAgent(t, defaultInput(`fake:tool send_message {"text":"hi"}`), agentOpts{})
	req := nextRequest(t, a.ipc)
	args, ok := req.Args.(ipc.SendMessageArgs)
	if req.Type != ipc.TypeSendMessage || !ok || args.Text != "hi" {
		t.Fatalf("request %+v; want send_message hi", req)
	}
	resp, err := ipc.OKResponse(req.ID, ipc.SendResult{OutboxID: 7, Chat: "120363001@g.us"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ipc.WriteJSON(a.ipc.Responses(), req.FileName(), resp); err != nil {
		t.Fatal(err)
	}
	res := a.nextOf(ipc.EventResult)
	if res.IsError || !strings.Contains(res.Text, "Message queued for delivery to this chat.") {
		t.Errorf("result %q; want the tool's answer", res.Text)
	}
	a.close()
	if code := a.wait(); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
}

func TestUnansweredToolCallTimesOut(t *testing.T) {
	a := startAgent(t, defaultInput(`fake:tool send_message {"text":"anyone?"}`), agentOpts{args: []string{"--mcp-timeout", "300ms"}})
	res := a.nextOf(ipc.EventResult)
	if !strings.Contains(res.Text, "tool error") || !strings.Contains(res.Text, "did not answer within 300ms") {
		t.Errorf("result %q; want a clear timeout error", res.Text)
	}
	a.close()
	a.wait()
}

func TestRegisterGroupRefusedOutsideMain(t *testing.T) {
	a := startAgent(t, defaultInput(`fake:tool register_group {"chat":"120363999@g.us","name":"Other","folder":"other"}`), agentOpts{})
	res := a.nextOf(ipc.EventResult)
	if !strings.Contains(res.Text, "tool error") || !strings.Contains(res.Text, "only the main group") {
		t.Errorf("result %q; want the refusal", res.Text)
	}
	if names, _ := ipc.List(a.ipc.Requests()); len(names) != 0 {
		t.Errorf("requests written for a refused call: %v", names)
	}
	a.close()
	a.wait()
}

func TestBadInputIsReported(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
		want  string
	}{
		{"not json", []byte("hello"), "bad run input"},
		{"unknown field", []byte(`{"prompt":"x","group":"g","assistant_name":"A","bogus":1}`), "bad run input"},
		{"empty prompt", []byte(`{"prompt":" ","group":"g","assistant_name":"A"}`), "prompt is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := startAgent(t, ipc.RunInput{}, agentOpts{rawIn: tc.input})
			ev := a.next()
			if ev.Type != ipc.EventError || ev.Retryable || !strings.Contains(ev.Message, tc.want) {
				t.Errorf("event %+v; want a non-retryable error containing %q", ev, tc.want)
			}
			if code := a.wait(); code == 0 {
				t.Error("exit code 0 for bad input")
			}
		})
	}
}

func TestRootWithoutSandboxIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not running as root: the refusal cannot be observed")
	}
	a := startAgent(t, defaultInput("fake:reply x"), agentOpts{noSandx: true})
	ev := a.next()
	if ev.Type != ipc.EventError || !strings.Contains(ev.Message, "root") {
		t.Errorf("event %+v; want an error about running as root", ev)
	}
	if code := a.wait(); code == 0 {
		t.Error("exit code 0 as root without IS_SANDBOX")
	}
}

// A recording stand-in for claude: the first time, it saves argv, the
// environment and the first two stdin lines; it always exits 3.
const recorderScript = `#!/bin/sh
out="$RECORD_DIR"
[ -e "$out/argv" ] && exit 3
env > "$out/env"
head -n 2 > "$out/stdin"
printf '%s\n' "$@" > "$out/argv"
exit 3
`

func TestClaudeInvocation(t *testing.T) {
	rec := t.TempDir()
	script := filepath.Join(rec, "claude")
	if err := os.WriteFile(script, []byte(recorderScript), 0o755); err != nil {
		t.Fatal(err)
	}
	in := defaultInput("first prompt")
	in.Model = "claude-sonnet-4-5"
	in.SessionID = "sess-1"
	in.ResumeAt = "uuid-1"
	a := startAgent(t, in, agentOpts{
		env:    []string{"RECORD_DIR=" + rec},
		claude: script,
		args:   []string{"--mcp-timeout", "5s"},
		setup: func(root string) {
			os.WriteFile(filepath.Join(root, "global", "CLAUDE.md"), []byte("Be kind.\n"), 0o644)
			os.MkdirAll(filepath.Join(root, "extra", "b-docs"), 0o755)
			os.MkdirAll(filepath.Join(root, "extra", "a-notes"), 0o755)
			os.WriteFile(filepath.Join(root, "extra", "not-a-dir"), nil, 0o644)
		},
	})
	if code := a.wait(); code == 0 {
		t.Error("exit code 0 although claude kept exiting")
	}
	read := func(name string) []string {
		data, err := os.ReadFile(filepath.Join(rec, name))
		if err != nil {
			t.Fatalf("recorder: %v", err)
		}
		return strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	}
	argv := read("argv")
	type server struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	}
	mcp, _ := json.Marshal(map[string]any{"mcpServers": map[string]server{"bridge": {
		Command: bin.runner, Args: []string{"mcp"},
		Env: map[string]string{
			"BRIDGED_MCP_CHAT": in.Chat, "BRIDGED_MCP_GROUP": in.Group, "BRIDGED_MCP_IPC_DIR": a.ipc.Root,
			"BRIDGED_MCP_IS_MAIN": "0", "BRIDGED_MCP_TIMEOUT": "5s", "BRIDGED_MCP_TIMEZONE": in.Timezone,
			// The credentials are blanked so claude does not pass them on to the server.
			"ANTHROPIC_API_KEY": "", "CLAUDE_CODE_OAUTH_TOKEN": "",
		},
	}}})
	want := []string{
		"--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
		"--model=claude-sonnet-4-5",
		"--resume=sess-1",
		"--allowedTools=Bash,Read,Write,Edit,Glob,Grep,WebSearch,WebFetch,Task,TaskOutput,TaskStop,TeamCreate,TeamDelete,SendMessage,TodoWrite,ToolSearch,Skill,NotebookEdit,mcp__bridge__*",
		"--mcp-config", string(mcp),
		"--setting-sources=project,user",
		"--permission-mode=bypassPermissions",
		"--allow-dangerously-skip-permissions",
		"--add-dir=" + filepath.Join(a.root, "extra", "a-notes"),
		"--add-dir=" + filepath.Join(a.root, "extra", "b-docs"),
		"--resume-session-at=uuid-1",
	}
	if strings.Join(argv, "\n") != strings.Join(want, "\n") {
		t.Errorf("argv\n got %q\nwant %q", argv, want)
	}

	stdin := read("stdin")
	if len(stdin) != 2 {
		t.Fatalf("stdin %q; want initialize and the prompt", stdin)
	}
	var init struct {
		Type    string         `json:"type"`
		Request map[string]any `json:"request"`
	}
	if err := json.Unmarshal([]byte(stdin[0]), &init); err != nil {
		t.Fatal(err)
	}
	var wantHooks any
	_ = json.Unmarshal([]byte(`{"PreCompact":[{"hookCallbackIds":["hook_1"]}],"PreToolUse":[{"matcher":"Bash","hookCallbackIds":["hook_0"]}]}`), &wantHooks)
	if init.Type != "control_request" || init.Request["subtype"] != "initialize" ||
		!reflect.DeepEqual(init.Request["hooks"], wantHooks) {
		t.Errorf("first stdin line %s; want initialize registering the Bash and PreCompact hooks", stdin[0])
	}
	if init.Request["appendSystemPrompt"] != "Be kind.\n" {
		t.Errorf("appendSystemPrompt %q; want the global CLAUDE.md", init.Request["appendSystemPrompt"])
	}
	if _, ok := init.Request["systemPrompt"]; ok {
		t.Error("initialize carries systemPrompt")
	}
	if want := `{"type":"user","message":{"role":"user","content":"first prompt"},"parent_tool_use_id":null,"session_id":""}`; stdin[1] != want {
		t.Errorf("second stdin line %s; want %s", stdin[1], want)
	}

	env := read("env")
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "CLAUDECODE" || strings.HasPrefix(name, "BRIDGED_AGENT_") || strings.Contains(kv, "parent-key") {
			t.Errorf("claude's environment has %q", kv)
		}
	}
}

func TestMainGroupGetsNoGlobalPrompt(t *testing.T) {
	rec := t.TempDir()
	script := filepath.Join(rec, "claude")
	if err := os.WriteFile(script, []byte(recorderScript), 0o755); err != nil {
		t.Fatal(err)
	}
	in := defaultInput("hi")
	in.IsMain = true
	a := startAgent(t, in, agentOpts{
		env: []string{"RECORD_DIR=" + rec}, claude: script,
		setup: func(root string) { os.WriteFile(filepath.Join(root, "global", "CLAUDE.md"), []byte("Be kind."), 0o644) },
	})
	a.wait()
	data, err := os.ReadFile(filepath.Join(rec, "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	if strings.Contains(first, "appendSystemPrompt") || strings.Contains(first, "systemPrompt") {
		t.Errorf("main group's initialize %s; want no system prompt addition", first)
	}
	argv, _ := os.ReadFile(filepath.Join(rec, "argv"))
	if !strings.Contains(string(argv), `"BRIDGED_MCP_IS_MAIN":"1"`) {
		t.Errorf("argv %s; want the MCP server told it serves the main group", argv)
	}
}

// claudeProcesses lists the live processes whose working directory is dir.
func claudeProcesses(dir string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dir {
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func TestTermSignalStopsClaude(t *testing.T) {
	a := startAgent(t, defaultInput("fake:sleep 60s"), agentOpts{})
	a.nextOf(ipc.EventSession)
	pids := claudeProcesses(a.work)
	if len(pids) == 0 {
		t.Fatal("no claude process found in the workdir")
	}
	// claude is the runner's child, not ours: its pidfd says when it is
	// gone, opened while it runs so a pid reused later is not mistaken for it.
	var exits []*ipctest.Exit
	for _, pid := range pids {
		n, _ := strconv.Atoi(pid)
		p, err := ipctest.OpenExit(n)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		exits = append(exits, p)
	}
	start := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(); code == 0 {
		t.Error("exit code 0 after being stopped mid-turn; want non-zero")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("stopping took %v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, p := range exits {
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("claude (pid %s) not gone: %v", pids[i], err)
		}
	}
}

func TestPlaceholderMatchesTheProxy(t *testing.T) {
	if runner.Placeholder != credproxy.Placeholder {
		t.Fatalf("runner placeholder %q, proxy placeholder %q", runner.Placeholder, credproxy.Placeholder)
	}
}
