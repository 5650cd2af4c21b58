// Package e2e drives the bridged daemon end to end, only through its command
// line and its control API, against the real Docker engine and the test image
// bridged-agent:test (whose claude is the scripted fake). Without a Docker
// daemon the tests skip loudly, except under CI=true, where they fail.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/testcover"
	"github.com/bridged-app/bridged/internal/testimage"
)

// testImage is the test agent image (BRIDGED_TEST_IMAGE names another).
var testImage = testimage.DefaultTag

const (
	// secret is the credential handed to the daemon; it must appear nowhere
	// but inside claude's environment.
	secret = "sk-ant-e2e-SECRET-5f0c2a9d7e"
)

var (
	bridgedBin string
	docker     *client.Client
	skipReason string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	// Generous: on a busy machine the test image and the -race daemon take
	// minutes to build.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: docker client:", err)
		return 1
	}
	skipReason, err = testimage.DockerSkipReason(ctx, func(ctx context.Context) error {
		_, err := cli.Ping(ctx, client.PingOptions{})
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if skipReason != "" {
		return m.Run()
	}
	docker = cli
	root, err := testimage.FindRepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "bridged-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bridgedBin = filepath.Join(dir, "bridged")
	// Tests run the daemon with the race detector; benchmarks without it,
	// so the figures are the product's.
	flag.Parse()
	// Under -cover the daemon counts too (see environ); -race needs the
	// atomic counter mode, so a coverage run in another mode builds without.
	buildArgs := []string{"build", "-race"}
	if mode := testing.CoverMode(); mode != "" && mode != "atomic" {
		buildArgs = []string{"build"}
	}
	buildArgs = append(buildArgs, testcover.BuildFlags()...)
	bench := false
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		// As `make build` builds it: the figures are the shipped binary's.
		buildArgs = []string{"build", "-trimpath", "-ldflags=-s -w"}
		bench = true
	}
	buildArgs = append(buildArgs, "-o", bridgedBin, "./cmd/bridged")
	build := exec.CommandContext(ctx, "go", buildArgs...)
	build.Dir = root
	if bench {
		build.Env = append(os.Environ(), "CGO_ENABLED=0") // static, as shipped
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	// The daemon builds while the test image does: each is a minute of
	// compiling on a small machine, and each waits on I/O part of it.
	if err := build.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build bridged:", err)
		return 1
	}
	imageErr := testimage.Ensure(ctx, cli, testimage.Options{Tag: testImage, RepoRoot: root})
	if err := build.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build bridged:", err)
		return 1
	}
	if imageErr != nil {
		fmt.Fprintln(os.Stderr, "e2e: test image:", imageErr)
		return 1
	}
	if err := setParallel(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// defaultParallel is how many light parallel tests (see parallel) run at
// once unless -parallel or E2E_PARALLEL says otherwise. go test's default,
// GOMAXPROCS, suits tests that compute; these mostly wait (for containers
// to start, for idle timeouts and retry delays), so more of them than
// there are cores fit beside each other: on 2 cores, 8 light slots took
// the package from 372 s to 319 s against 4 (docs/testing.md).
const defaultParallel = 8

// Slots for the other weights, beside the light ones: the long tests
// wait out the daemon's clock for a minute or two and use almost no CPU
// meanwhile, so all of them start at once; two heavy and two timed tests
// run at a time.
const longSlots, heavySlotCount, timedSlotCount = 8, 2, 2

var (
	// slots holds one token per light parallel test running, and
	// longSlots, heavySlots and timedSlots one per long, heavy and timed
	// one (see parallel). All are made by setParallel.
	slots, longSlotsCh, heavySlots, timedSlots chan struct{}
)

// setParallel sizes slots from -parallel when given, else E2E_PARALLEL,
// else defaultParallel, and lifts go test's own limit: a test waiting for
// a heavy or timed slot must not hold one of go test's, or a light test
// could not run in its place.
func setParallel() error {
	n := defaultParallel
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if f := flag.Lookup("test.parallel"); given && f != nil {
		k, err := strconv.Atoi(f.Value.String())
		if err != nil || k < 1 {
			return fmt.Errorf("-parallel %s: want a positive number", f.Value)
		}
		n = k
	} else if v := os.Getenv("E2E_PARALLEL"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			return fmt.Errorf("E2E_PARALLEL=%q: want a positive number", v)
		}
		n = k
	}
	slots, longSlotsCh = make(chan struct{}, n), make(chan struct{}, longSlots)
	heavySlots, timedSlots = make(chan struct{}, heavySlotCount), make(chan struct{}, timedSlotCount)
	return flag.Set("test.parallel", "1000")
}

// weight is the kind of a parallel test, which decides the slots it
// takes.
type weight int

// Weights of a parallel test: a light one mostly waits; a long one waits
// a minute or more on the daemon's clock (a cron minute, idle and
// container timeouts, retention passes) and would end the package last if
// it got its slot late; a heavy one keeps the CPU busy for minutes
// (restarting -race daemons over and over, or a dozen containers at once),
// and more than two of those side by side on a small machine starve each
// other, and every test beside them, into their timeouts. A timed one
// bounds a delay, a duration, a count over time, a descriptor count or a
// memory figure: two at a time, beside the others, whose load its bounds
// allow for (they hold at a load average of 25 on 2 cores: the bounds are
// about what the daemon does, a second against minutes, not about how
// fast the machine is).
const (
	light weight = iota
	long
	heavy
	timed
)

// parallel runs t beside the other parallel tests, after the serial ones
// (go test runs every serial test first, one at a time): as many light
// ones at once as setParallel made slots for and, beside them, the long,
// heavy and timed ones in slots of their own. None of those queue behind
// the light ones: they set the package's time when they start late. A test
// is parallel only when it shares nothing with another (its own home,
// daemon, containers and fake servers; nothing process-wide such as the
// umask: that one stays serial). The test's own deadlines start once it
// has its slot.
func parallel(t *testing.T, w weight) {
	t.Helper()
	needDocker(t)
	t.Parallel()
	slot := slots
	switch w {
	case long:
		slot = longSlotsCh
	case heavy:
		slot = heavySlots
	case timed:
		slot = timedSlots
	}
	asked := time.Now()
	slot <- struct{}{}
	// Said with -v (and in -json): where the package's time goes.
	t.Logf("%s slot after %v", w, time.Since(asked).Round(time.Millisecond))
	t.Cleanup(func() { <-slot })
}

func (w weight) String() string {
	switch w {
	case long:
		return "long"
	case heavy:
		return "heavy"
	case timed:
		return "timed"
	}
	return "light"
}

func needDocker(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip("SKIPPING Docker end-to-end test: " + skipReason)
	}
}

// env is one fresh bridged home.
type env struct {
	t    testing.TB
	home string
	args []string     // extra daemon flags
	http *http.Client // talks to the control API on the home's socket
	// extraEnv adds KEY=value variables to the daemon's and the CLI's
	// environment (after the harness's own, so they win).
	extraEnv []string
	// cred, when set, runs the daemon and the CLI as another user (see
	// newEnvAs).
	cred *syscall.Credential
	// engine is the daemon's engine when it is not the tests' Docker
	// (newPodmanEnv).
	engine *client.Client
}

// client is the Engine API client of the daemon's engine.
func (e *env) client() *client.Client {
	if e.engine != nil {
		return e.engine
	}
	return docker
}

// in returns a copy of e whose helpers report to t: a subtest sharing its
// parent's daemon fails itself, not the parent.
func (e *env) in(t testing.TB) *env {
	c := *e
	c.t = t
	return &c
}

func newEnv(t *testing.T, daemonArgs ...string) *env {
	t.Helper()
	needDocker(t)
	return makeEnv(t, daemonArgs)
}

// makeEnv builds the env of a fresh home for a test or a benchmark, and checks
// at its end that no managed container of that home is left.
func makeEnv(tb testing.TB, daemonArgs []string) *env {
	home := tb.TempDir()
	e := &env{t: tb, home: home, args: daemonArgs, http: controlClient(home)}
	tb.Cleanup(func() { e.assertNoContainers(tb) })
	return e
}

func (e *env) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "BRIDGED_") || strings.HasPrefix(kv, "ANTHROPIC_") || strings.HasPrefix(kv, "CLAUDE_CODE_") {
			continue
		}
		out = append(out, kv)
	}
	if e.cred == nil { // another user could not write the test's coverage directory
		out = append(out, testcover.Env(e.t)...)
	}
	if os.Getenv("GORACE") == "" {
		// The daemon and the CLI are built with -race, whose runtime
		// otherwise sleeps a second at every exit: a second per command.
		out = append(out, "GORACE=atexit_sleep_ms=0")
	}
	out = append(out, "ANTHROPIC_API_KEY="+secret, "BRIDGED_LOG_FORMAT=json", "BRIDGED_LOG_LEVEL=debug",
		"BRIDGED_MOUNT_ALLOWLIST="+filepath.Join(os.TempDir(), "bridged-e2e-no-allowlist.json"))
	return append(out, e.extraEnv...)
}

// cli runs a bridged subcommand to completion and returns its stdout.
func (e *env) cli(args ...string) (string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full := append(append([]string(nil), args...), "--home", e.home)
	cmd := exec.CommandContext(ctx, bridgedBin, full...)
	cmd.Env = e.environ()
	if e.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("bridged %s: %w\nstderr: %s", strings.Join(full, " "), err, errb.String())
	}
	return out.String(), nil
}

func (e *env) mustCLI(args ...string) string {
	e.t.Helper()
	out, err := e.cli(args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// daemon is a running `bridged run`.
type daemon struct {
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
	mu     sync.Mutex
	stderr bytes.Buffer
	wrote  chan struct{} // signalled (never blocking) after each write to stderr
}

func (d *daemon) logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

type lockedWriter struct{ d *daemon }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.d.mu.Lock()
	n, err := w.d.stderr.Write(p)
	w.d.mu.Unlock()
	select {
	case w.d.wrote <- struct{}{}:
	default:
	}
	return n, err
}

// waitLog reports whether the daemon's output holds s within the time
// given, checking after every write.
func (d *daemon) waitLog(s string, within time.Duration) bool {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for !strings.Contains(d.logs(), s) {
		select {
		case <-d.wrote:
		case <-timer.C:
			return strings.Contains(d.logs(), s)
		}
	}
	return true
}

// start runs the daemon and waits until its control API answers.
func (e *env) start() *daemon {
	e.t.Helper()
	return e.launch("", append([]string{"run", "--home", e.home, "--image", testImage}, e.args...))
}

// launch runs bridged with args in dir (the test's own when empty) as the
// daemon, stops it at the end of the test, and waits until its control API
// answers.
func (e *env) launch(dir string, args []string) *daemon {
	e.t.Helper()
	cmd := exec.Command(bridgedBin, args...)
	cmd.Env = e.environ()
	cmd.Dir = dir
	if e.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred}
	}
	d := &daemon{cmd: cmd, done: make(chan struct{}), wrote: make(chan struct{}, 1)}
	cmd.Stdout = lockedWriter{d}
	cmd.Stderr = lockedWriter{d}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	e.t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				<-d.done
			}
		}
		for _, line := range repeatedKeys(d.logs()) {
			e.t.Errorf("a daemon log line repeats a field: %s", line)
		}
		if e.t.Failed() || os.Getenv("E2E_LOGS") != "" {
			e.t.Logf("daemon log:\n%s", tail(d.logs(), 80))
		}
	})
	// Readiness is polled: the daemon announces it nowhere but by answering,
	// and the socket file appears before the API listens on it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := e.api("GET", "/healthz", nil, nil); err == nil {
			return d
		}
		select {
		case <-d.done:
			e.t.Fatalf("daemon exited during start-up: %v\n%s", d.err, d.logs())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("control API did not answer within 30s\n%s", d.logs())
		}
	}
}

// stop sends SIGTERM and fails the test unless the daemon exits 0 within 90s.
func (d *daemon) stop(t testing.TB) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		if d.err != nil {
			t.Fatalf("daemon exit after SIGTERM: %v; want exit 0", d.err)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("daemon did not stop within 90s after SIGTERM\n%s", tail(d.logs(), 60))
	}
}

func (d *daemon) kill9() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// repeatedKeys returns the JSON log lines in logs that hold a top-level key
// twice (a logger given a field its parent already had), each with the key.
func repeatedKeys(logs string) []string {
	var bad []string
	for _, line := range strings.Split(logs, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		if _, err := dec.Token(); err != nil {
			continue
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			key, _ := tok.(string)
			if seen[key] {
				bad = append(bad, fmt.Sprintf("%q in %s", key, line))
				break
			}
			seen[key] = true
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				break
			}
		}
	}
	return bad
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// controlClient returns an HTTP client for the control API of home.
func controlClient(home string) *http.Client {
	sock := filepath.Join(home, "bridged.sock")
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// api calls the control API; body and out may be nil.
func (e *env) api(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://bridged"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

type chatMessage struct {
	ID        int64  `json:"id"`
	Direction string `json:"direction"`
	Sender    string `json:"sender"`
	Text      string `json:"text"`
	Time      string `json:"time"`
}

// post stores a message from "Alice" in a local chat and returns its id.
func (e *env) post(chat, text string) int64 {
	e.t.Helper()
	var res struct {
		ID int64 `json:"id"`
	}
	if err := e.api("POST", "/v1/chats/"+url.PathEscape(chat)+"/messages", map[string]string{"sender": "Alice", "text": text}, &res); err != nil {
		e.t.Fatal(err)
	}
	return res.ID
}

// waitOut waits until at least n outbound messages after id are in chat, and
// returns every outbound message seen.
func (e *env) waitOut(chat string, after int64, n int, within time.Duration) []chatMessage {
	e.t.Helper()
	var out []chatMessage
	deadline := time.Now().Add(within)
	cursor := after
	for len(out) < n {
		left := time.Until(deadline)
		if left <= 0 {
			e.t.Fatalf("waited %s for %d replies in %s after #%d; got %d: %+v", within, n, chat, after, len(out), out)
		}
		wait := min(left, 20*time.Second).Round(time.Second)
		if wait < time.Second {
			wait = time.Second
		}
		for _, m := range e.messages(chat, cursor, wait) {
			cursor = max(cursor, m.ID)
			if m.Direction == "out" {
				out = append(out, m)
			}
		}
	}
	return out
}

// messages returns the messages of chat after id, both directions, waiting
// up to wait (none when zero) for the first one.
func (e *env) messages(chat string, after int64, wait time.Duration) []chatMessage {
	e.t.Helper()
	q := fmt.Sprintf("/v1/chats/%s/messages?after=%d", url.PathEscape(chat), after)
	if wait > 0 {
		q += "&wait=" + wait.String()
	}
	var res struct {
		Messages []chatMessage `json:"messages"`
	}
	if err := e.api("GET", q, nil, &res); err != nil {
		e.t.Fatal(err)
	}
	return res.Messages
}

// outSince returns every outbound message after id without waiting.
func (e *env) outSince(chat string, after int64) []chatMessage {
	e.t.Helper()
	var out []chatMessage
	for _, m := range e.messages(chat, after, 0) {
		if m.Direction == "out" {
			out = append(out, m)
		}
	}
	return out
}

// containers lists this home's managed containers.
func (e *env) containers(ctx context.Context) []container.Info {
	e.t.Helper()
	res, err := e.client().ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", container.LabelHome+"="+container.HomeLabel(e.home))})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []container.Info
	for _, c := range res.Items {
		out = append(out, container.Info{ID: c.ID, Group: c.Labels[container.LabelGroup], State: string(c.State)})
	}
	return out
}

// assertNoContainers fails when a managed container of this home is left,
// and removes it so one failure does not leak into other tests.
func (e *env) assertNoContainers(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left := e.containers(ctx)
	for _, c := range left {
		e.client().ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	}
	if len(left) > 0 {
		t.Errorf("%d managed containers left behind: %+v", len(left), left)
	}
}

// watchContainers follows container start and die events of this home.
type containerWatch struct {
	mu      sync.Mutex
	running map[string]bool // started, not yet dead
	exist   map[string]bool // created, not yet destroyed
	max     int
	starts  int
	changed chan struct{}
}

func (e *env) watchContainers(ctx context.Context) *containerWatch {
	e.t.Helper()
	w := &containerWatch{running: make(map[string]bool), exist: make(map[string]bool), changed: make(chan struct{}, 1)}
	res := e.client().Events(ctx, client.EventsListOptions{Since: fmt.Sprint(time.Now().Unix() - 1), Filters: make(client.Filters).
		Add("type", "container").
		Add("label", container.LabelHome+"="+container.HomeLabel(e.home))})
	ready := make(chan struct{})
	go func() {
		close(ready)
		for {
			select {
			case <-ctx.Done():
				return
			case <-res.Err:
				return
			case m := <-res.Messages:
				if os.Getenv("E2E_DEBUG_EVENTS") != "" {
					fmt.Fprintf(os.Stderr, "event %s %s %s\n", m.Action, m.Actor.ID[:12], time.Unix(0, m.TimeNano).Format("15:04:05.000"))
				}
				w.mu.Lock()
				switch m.Action {
				case events.ActionCreate:
					w.exist[m.Actor.ID] = true
				case events.ActionStart:
					w.exist[m.Actor.ID] = true
					w.running[m.Actor.ID] = true
					w.starts++
				case events.ActionDie:
					delete(w.running, m.Actor.ID)
				case events.ActionDestroy:
					delete(w.running, m.Actor.ID)
					delete(w.exist, m.Actor.ID)
				}
				w.max = max(w.max, len(w.running))
				w.mu.Unlock()
				select {
				case w.changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	<-ready
	return w
}

func (w *containerWatch) snapshot() (running, maxRunning, starts int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running), w.max, w.starts
}

// waitStarts waits until at least n containers of the home have started.
func (w *containerWatch) waitStarts(t testing.TB, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		if _, _, s := w.snapshot(); s >= n {
			return
		}
		select {
		case <-w.changed:
		case <-deadline:
			_, _, s := w.snapshot()
			t.Fatalf("waited %s for %d container starts; saw %d", within, n, s)
		}
	}
}

// waitGone waits until every container of the home seen so far is removed.
func (w *containerWatch) waitGone(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		w.mu.Lock()
		n := len(w.exist)
		w.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-w.changed:
		case <-deadline:
			t.Fatalf("waited %s for %d containers to be removed", within, n)
		}
	}
}

// waitRunning waits until exactly n containers of the home run.
func (w *containerWatch) waitRunning(t testing.TB, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		if r, _, _ := w.snapshot(); r == n {
			return
		}
		select {
		case <-w.changed:
		case <-deadline:
			r, _, _ := w.snapshot()
			t.Fatalf("waited %s for %d running containers; %d run", within, n, r)
		}
	}
}

// grepFiles reports the files under dir that contain s.
func grepFiles(t testing.TB, dir, s string) []string {
	t.Helper()
	var hits []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || info.Mode()&os.ModeSocket != 0 || info.Size() > 64<<20 {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), s) {
				hits = append(hits, p)
				break
			}
		}
		return nil
	})
	return hits
}

// newEnvAs is newEnv with the daemon and the CLI running as uid:gid, a user
// that is not root: the test process must be root to switch to it. The home
// belongs to that user, and the user gets the Docker socket's group.
func newEnvAs(t *testing.T, uid, gid int, daemonArgs ...string) *env {
	t.Helper()
	needDocker(t)
	return makeEnvAs(t, uid, gid, daemonArgs)
}

// makeEnvAs is newEnvAs for a test or a benchmark.
func makeEnvAs(t testing.TB, uid, gid int, daemonArgs []string) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("newEnvAs needs a root test process")
	}
	base := t.TempDir()
	// t.TempDir's parent is private to root; the user must reach its home
	// and the daemon binary.
	for _, d := range []string{filepath.Dir(base), base, filepath.Dir(bridgedBin)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(base, "home")
	userHome := filepath.Join(base, "user")
	for _, d := range []string{home, userHome} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	sock := "/var/run/docker.sock"
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
		sock = h
	}
	if fi, err := os.Stat(sock); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			cred.Groups = []uint32{st.Gid}
		}
	}
	e := &env{t: t, home: home, args: daemonArgs, http: controlClient(home), cred: cred,
		extraEnv: []string{"HOME=" + userHome}}
	t.Cleanup(func() { e.assertNoContainers(t) })
	return e
}

// ask posts text in chat and returns the first outbound message after it.
func (e *env) ask(chat, text string, within time.Duration) string {
	e.t.Helper()
	id := e.post(chat, text)
	return e.waitOut(chat, id, 1, within)[0].Text
}

// bash has the agent of chat run command with /bin/sh (fake:bash) and
// returns its reply: the command's output, or "tool error: exit status N:
// output" when it failed. command must be one line.
func (e *env) bash(chat, command string, within time.Duration) string {
	e.t.Helper()
	if strings.ContainsAny(command, "\n") || strings.Contains(command, "fake:") {
		e.t.Fatalf("bash: command %q must be one line without fake: directives", command)
	}
	return e.ask(chat, "fake:bash "+command, within)
}

// daemonDir returns a fresh directory outside the home that the daemon's
// user may write to: where an attack that makes the daemon write through a
// symlink would do harm.
func (e *env) daemonDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if e.cred != nil {
		if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, int(e.cred.Uid), int(e.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// daemonFile writes content to a new file in dir (see daemonDir) that the
// daemon's user may write to, and returns its path.
func (e *env) daemonFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if e.cred != nil {
		if err := os.Chown(p, int(e.cred.Uid), int(e.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestRepeatedKeys(t *testing.T) {
	logs := `{"level":"info","component":"store","component":"store","message":"x"}
{"level":"info","component":"router","nested":{"component":"a"},"message":"y"}
not json
{"level":"info","component":"docker","time":"t","component":"container"}`
	got := repeatedKeys(logs)
	if len(got) != 2 || !strings.Contains(got[0], `"store","component":"store"`) || !strings.Contains(got[1], `"container"`) {
		t.Errorf("repeatedKeys = %q; want the first and the last line", got)
	}
}
