package claudecli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/ipc/ipctest"
)

// fakeCLI prepares a run of the test binary as a fake claude replaying
// script (a path, or timeline lines to write to a file).
type fakeCLI struct {
	t      *testing.T
	script string
	log    string
}

func newFake(t *testing.T, script string) *fakeCLI {
	t.Helper()
	return &fakeCLI{t: t, script: script, log: filepath.Join(t.TempDir(), "helper.log")}
}

func newScriptFake(t *testing.T, entries ...timelineEntry) *fakeCLI {
	t.Helper()
	var b strings.Builder
	for _, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return newFake(t, path)
}

func (f *fakeCLI) options(args []string) Options {
	exe, err := os.Executable()
	if err != nil {
		f.t.Fatal(err)
	}
	return Options{
		Path: exe,
		Args: args,
		// GORACE: a race-enabled helper otherwise sleeps 1s at exit.
		Env:      []string{"PATH=" + os.Getenv("PATH"), "GORACE=atexit_sleep_ms=0", helperScriptEnv + "=" + f.script, helperLogEnv + "=" + f.log},
		StopWait: 5 * time.Second,
	}
}

func (f *fakeCLI) start(ctx context.Context, opts Options) *Process {
	f.t.Helper()
	p, err := Start(ctx, opts)
	if err != nil {
		f.t.Fatalf("Start: %v", err)
	}
	f.t.Cleanup(func() {
		_ = p.Stop(time.Second, time.Second)
		for range p.Messages() {
		}
	})
	return p
}

// entries reads the helper's log.
func (f *fakeCLI) entries() []helperLog {
	f.t.Helper()
	file, err := os.Open(f.log)
	if err != nil {
		f.t.Fatalf("open helper log: %v", err)
	}
	defer file.Close()
	var out []helperLog
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e helperLog
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			f.t.Fatalf("helper log: %v", err)
		}
		out = append(out, e)
	}
	return out
}

func (f *fakeCLI) stdin() []string {
	var lines []string
	for _, e := range f.entries() {
		if e.Kind == "stdin" {
			lines = append(lines, e.Line)
		}
	}
	return lines
}

// next returns the next message, failing the test on timeout or close.
func next(t *testing.T, p *Process) Message {
	t.Helper()
	select {
	case m, ok := <-p.Messages():
		if !ok {
			t.Fatalf("messages closed early; exit %v; stderr %q", p.Err(), p.StderrTail())
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
	}
	return Message{}
}

// untilResult reads messages up to and including the next result.
func untilResult(t *testing.T, p *Process) (*Result, []Message) {
	t.Helper()
	var seen []Message
	for {
		m := next(t, p)
		seen = append(seen, m)
		if m.Result != nil {
			return m.Result, seen
		}
	}
}

// drain reads the remaining messages and returns them once the channel closes.
func drain(t *testing.T, p *Process) []Message {
	t.Helper()
	var rest []Message
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-p.Messages():
			if !ok {
				return rest
			}
			rest = append(rest, m)
		case <-timeout:
			t.Fatal("process did not finish within 10s")
		}
	}
}

func fixture(name string) string { return filepath.Join("testdata", "fixtures", name) }

func fixtureLines(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(fixture(name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func decodeObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not a JSON object: %q: %v", s, err)
	}
	return m
}

func TestMultiTurnAgainstRecording(t *testing.T) {
	f := newFake(t, fixture("02-multi-turn.timeline.jsonl"))
	args, err := Config{Model: "claude-sonnet-4-5", SettingSources: []string{}}.Args()
	if err != nil {
		t.Fatal(err)
	}
	opts := f.options(args)
	opts.AppendSystemPrompt = "You are a test bridge."
	p := f.start(t.Context(), opts)

	if err := p.SendUser("first message"); err != nil {
		t.Fatal(err)
	}
	r1, _ := untilResult(t, p)
	if _, err := p.WaitInitialized(t.Context()); err != nil {
		t.Errorf("WaitInitialized: %v", err)
	}
	if err := p.SendUser("second message"); err != nil {
		t.Fatal(err)
	}
	r2, _ := untilResult(t, p)
	if got, want := []string{r1.Text(), r2.Text()}, []string{"pong: first message", "pong: second message"}; !reflect.DeepEqual(got, want) {
		t.Errorf("results %q; want %q", got, want)
	}
	if err := p.CloseInput(); err != nil {
		t.Fatal(err)
	}
	drain(t, p)
	if code := p.ExitCode(); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
	if got, want := p.SessionID(), "1136e566-5921-4965-90a3-7838ed10d293"; got != want {
		t.Errorf("session %q; want %q", got, want)
	}
	if got, want := p.LastAssistantUUID(), "1f04c35f-3ca0-445e-82e7-5ddc8377cb78"; got != want {
		t.Errorf("last assistant uuid %q; want %q", got, want)
	}
	if err := p.SendUser("too late"); !errors.Is(err, ErrInputClosed) {
		t.Errorf("SendUser after CloseInput: %v; want ErrInputClosed", err)
	}

	// What reached the CLI's stdin is what the SDK wrote, byte for byte for
	// the user messages.
	got := f.stdin()
	recorded := fixtureLines(t, "02-multi-turn.stdin.jsonl")
	if len(got) != len(recorded) {
		t.Fatalf("stdin lines %d; want %d: %q", len(got), len(recorded), got)
	}
	init := decodeObject(t, got[0])
	req, _ := init["request"].(map[string]any)
	if req["subtype"] != "initialize" || req["appendSystemPrompt"] != "You are a test bridge." {
		t.Errorf("first stdin line %s; want initialize with appendSystemPrompt", got[0])
	}
	if _, ok := req["systemPrompt"]; ok {
		t.Errorf("initialize carries systemPrompt: %s", got[0])
	}
	for i := 1; i < len(got); i++ {
		if got[i] != recorded[i] {
			t.Errorf("stdin line %d:\n got %s\nwant %s", i, got[i], recorded[i])
		}
	}
}

func TestHooksAgainstRecording(t *testing.T) {
	f := newFake(t, fixture("05-hooks.timeline.jsonl"))
	args, _ := Config{}.Args()
	opts := f.options(args)
	compacted := make(chan HookInput, 1)
	opts.Hooks = []Hook{
		{Event: HookPreCompact, Func: func(_ context.Context, in HookInput) (any, error) {
			compacted <- in
			yes := true
			return HookOutput{Continue: &yes}, nil
		}},
		{Event: HookPreToolUse, Matcher: "Bash", Func: func(_ context.Context, in HookInput) (any, error) {
			var ti map[string]any
			if err := json.Unmarshal(in.ToolInput, &ti); err != nil {
				return nil, err
			}
			ti["command"] = "echo rewritten-by-hook"
			b, _ := json.Marshal(ti)
			return HookOutput{HookSpecificOutput: PreToolUseOutput{
				HookEventName: HookPreToolUse, PermissionDecision: "allow",
				PermissionDecisionReason: "rewritten by test hook", UpdatedInput: b,
			}}, nil
		}},
	}
	p := f.start(t.Context(), opts)
	if err := p.SendUser("CALL_TOOL Bash please"); err != nil {
		t.Fatal(err)
	}
	r1, _ := untilResult(t, p)
	if got, want := r1.Text(), "bash said: rewritten-by-hook"; got != want {
		t.Errorf("result %q; want %q", got, want)
	}
	if err := p.SendUser("/compact"); err != nil {
		t.Fatal(err)
	}
	r2, _ := untilResult(t, p)
	if r2.LocalCommand != "compact" || r2.IsError {
		t.Errorf("compact result %+v; want local_command compact, no error", r2)
	}
	select {
	case in := <-compacted:
		if in.HookEventName != HookPreCompact || !strings.HasSuffix(in.TranscriptPath, "ba98c4bc-dd0e-4681-95d1-388c78014ef2.jsonl") || in.Trigger != "manual" {
			t.Errorf("PreCompact input %+v", in)
		}
	default:
		t.Error("PreCompact hook never ran")
	}
	p.CloseInput()
	drain(t, p)
	if code := p.ExitCode(); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}

	got := f.stdin()
	recorded := fixtureLines(t, "05-hooks.stdin.jsonl")
	if len(got) != len(recorded) {
		t.Fatalf("stdin lines %d; want %d: %q", len(got), len(recorded), got)
	}
	// initialize registers the same hooks as the SDK did, and no systemPrompt.
	gotReq := decodeObject(t, got[0])["request"].(map[string]any)
	wantReq := decodeObject(t, recorded[0])["request"].(map[string]any)
	if !reflect.DeepEqual(gotReq["hooks"], wantReq["hooks"]) {
		t.Errorf("hooks %v; want %v", gotReq["hooks"], wantReq["hooks"])
	}
	if _, ok := gotReq["systemPrompt"]; ok {
		t.Error("initialize carries systemPrompt")
	}
	// Hook answers: same envelope and content as the SDK's.
	for _, i := range []int{2, 4} {
		if g, w := decodeObject(t, got[i]), decodeObject(t, recorded[i]); !reflect.DeepEqual(g, w) {
			t.Errorf("stdin line %d:\n got %s\nwant %s", i, got[i], recorded[i])
		}
	}
}

func TestCanUseToolAllowsWithOriginalInput(t *testing.T) {
	f := newFake(t, fixture("06-can-use-tool.timeline.jsonl"))
	args, _ := Config{PermissionPromptTool: "stdio", PermissionMode: PermissionDefault}.Args()
	p := f.start(t.Context(), f.options(args))
	if err := p.SendUser("CALL_TOOL Bash:touch made-by-tool.txt && echo hi"); err != nil {
		t.Fatal(err)
	}
	untilResult(t, p)
	p.CloseInput()
	drain(t, p)
	got := f.stdin()
	if len(got) != 3 {
		t.Fatalf("stdin lines %q; want 3", got)
	}
	resp := decodeObject(t, got[2])["response"].(map[string]any)
	if resp["subtype"] != "success" || resp["request_id"] != "c5f68bc2-1c6e-4ee5-8b6d-b0c52d6d38bb" {
		t.Fatalf("answer %s; want success for the CLI's request id", got[2])
	}
	body := resp["response"].(map[string]any)
	wantInput := map[string]any{"command": "touch made-by-tool.txt && echo hi", "description": "Run a test command"}
	if body["behavior"] != "allow" || !reflect.DeepEqual(body["updatedInput"], wantInput) || body["toolUseID"] != "toolu_fake00010d4d0d8e22a4" {
		t.Errorf("answer %v; want allow with updatedInput = original input", body)
	}
}

func TestInterruptAgainstRecording(t *testing.T) {
	f := newFake(t, fixture("09-interrupt.timeline.jsonl"))
	args, _ := Config{}.Args()
	p := f.start(t.Context(), f.options(args))
	if err := p.SendUser("SLOW please"); err != nil {
		t.Fatal(err)
	}
	for m := next(t, p); m.System == nil || m.System.Subtype != SystemInit; m = next(t, p) {
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := p.Interrupt(ctx); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	r1, _ := untilResult(t, p)
	if !r1.IsError || r1.Subtype != "error_during_execution" || r1.TerminalReason != "aborted_streaming" {
		t.Errorf("interrupted result %+v; want error_during_execution/aborted_streaming", r1)
	}
	if err := p.SendUser("after interrupt"); err != nil {
		t.Fatal(err)
	}
	r2, _ := untilResult(t, p)
	if got, want := r2.Text(), "pong: after interrupt"; got != want {
		t.Errorf("result %q; want %q", got, want)
	}
	p.CloseInput()
	drain(t, p)
	got := f.stdin()
	if len(got) < 3 || !strings.Contains(got[2], `"subtype":"interrupt"`) {
		t.Errorf("stdin %q; want the interrupt request third", got)
	}
}

func TestUnknownResumeExitsOnItsOwn(t *testing.T) {
	f := newFake(t, fixture("18-raw-unknown-resume.timeline.jsonl"))
	args, _ := Config{Resume: "d30afbd0-53ca-4ad4-a777-959e8fd3fa64"}.Args()
	p := f.start(t.Context(), f.options(args))
	if err := p.SendUser("hello to a session that does not exist"); err != nil {
		t.Fatal(err)
	}
	r, _ := untilResult(t, p)
	if !r.UnknownSession() {
		t.Errorf("result %+v; want UnknownSession", r)
	}
	drain(t, p)
	if code := p.ExitCode(); code != 1 {
		t.Errorf("exit code %d; want 1", code)
	}
	if tail := p.StderrTail(); len(tail) == 0 || !strings.Contains(tail[0], "No conversation found") {
		t.Errorf("stderr tail %q; want the CLI's complaint", tail)
	}
	if _, err := p.WaitInitialized(t.Context()); !errors.Is(err, ErrExited) {
		t.Errorf("WaitInitialized: %v; want ErrExited", err)
	}
}

// initLines answers the host's initialize the way the CLI does.
func initLines() []timelineEntry {
	return []timelineEntry{
		{Dir: "in", Line: `{"request_id":"rec-init","type":"control_request","request":{"subtype":"initialize"}}`},
		{Dir: "out", Line: `{"type":"control_response","response":{"subtype":"success","request_id":"rec-init","response":{"pid":1}}}`},
	}
}

func TestEveryControlRequestIsAnswered(t *testing.T) {
	script := append(initLines(),
		// Unknown subtype: an error answer, never silence.
		timelineEntry{Dir: "out", Line: `{"type":"control_request","request_id":"u-1","request":{"subtype":"elicitation","message":"?"}}`},
		timelineEntry{Dir: "in"},
		// A hook id nobody registered: an error answer.
		timelineEntry{Dir: "out", Line: `{"type":"control_request","request_id":"u-2","request":{"subtype":"hook_callback","callback_id":"hook_9","input":{}}}`},
		timelineEntry{Dir: "in"},
		// A can_use_tool the CLI cancels: no answer at all.
		timelineEntry{Dir: "out", Line: `{"type":"control_request","request_id":"u-3","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"t-3"}}`},
		timelineEntry{Dir: "out", Line: `{"type":"control_cancel_request","request_id":"u-3"}`},
		// A hook that panics: an error answer, the process keeps going.
		timelineEntry{Dir: "out", Line: `{"type":"control_request","request_id":"u-4","request":{"subtype":"hook_callback","callback_id":"hook_0","input":{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"x"}}}}`},
		timelineEntry{Dir: "in"},
		// Noise the reader must survive.
		timelineEntry{Dir: "out", Line: `[SandboxDebug] not json`},
		timelineEntry{Dir: "out", Line: ``},
		timelineEntry{Dir: "out", Line: `{"type":"brand_new_kind","x":1}`},
		timelineEntry{Dir: "out", Line: `{"type":"system","subtype":"task_started","session_id":"s-1","uuid":"u"}`},
		timelineEntry{Dir: "out", Line: `{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s-1","uuid":"r"}`},
		timelineEntry{Dir: "note", Line: "parent closed stdin -> closing child stdin"},
		timelineEntry{Dir: "note", Line: "child exited rc=0"},
	)
	f := newScriptFake(t, script...)
	args, _ := Config{}.Args()
	opts := f.options(args)
	cancelled := make(chan struct{})
	opts.CanUseTool = func(ctx context.Context, _ ToolPermissionRequest) (PermissionResult, error) {
		<-ctx.Done()
		close(cancelled)
		return PermissionResult{Behavior: BehaviorAllow}, nil
	}
	opts.Hooks = []Hook{{Event: HookPreToolUse, Matcher: "Bash", Func: func(context.Context, HookInput) (any, error) {
		panic("boom")
	}}}
	p := f.start(t.Context(), opts)

	var kinds []string
	r, seen := untilResult(t, p)
	for _, m := range seen {
		kinds = append(kinds, string(m.Type))
	}
	if want := []string{"brand_new_kind", "system", "result"}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("messages %v; want %v", kinds, want)
	}
	if r.Text() != "ok" {
		t.Errorf("result %q; want ok", r.Text())
	}
	<-cancelled
	p.CloseInput()
	drain(t, p)

	got := f.stdin()
	answers := map[string]map[string]any{}
	for _, l := range got[1:] {
		resp := decodeObject(t, l)["response"].(map[string]any)
		answers[resp["request_id"].(string)] = resp
	}
	if _, ok := answers["u-3"]; ok {
		t.Error("cancelled request u-3 was answered")
	}
	for _, id := range []string{"u-1", "u-2", "u-4"} {
		a, ok := answers[id]
		if !ok {
			t.Errorf("request %s got no answer", id)
			continue
		}
		if a["subtype"] != "error" || a["error"] == "" {
			t.Errorf("answer to %s: %v; want an error answer", id, a)
		}
	}
	if msg, _ := answers["u-1"]["error"].(string); !strings.Contains(msg, "elicitation") {
		t.Errorf("unknown subtype answer %q; want it to name the subtype", msg)
	}
}

func TestStopEscalates(t *testing.T) {
	tests := []struct {
		name     string
		script   []timelineEntry
		wantSig  syscall.Signal
		wantExit int
	}{
		{
			name:     "exits on EOF",
			script:   append(initLines(), timelineEntry{Dir: "note", Line: "parent closed stdin"}, timelineEntry{Dir: "note", Line: "child exited rc=0"}),
			wantExit: 0,
		},
		{
			name:     "needs SIGTERM",
			script:   append(initLines(), timelineEntry{Dir: "note", Line: "spawn sleeper"}, timelineEntry{Dir: "note", Line: "hang"}),
			wantSig:  syscall.SIGTERM,
			wantExit: -1,
		},
		{
			name:     "needs SIGKILL",
			script:   append(initLines(), timelineEntry{Dir: "note", Line: "ignore SIGTERM"}, timelineEntry{Dir: "note", Line: "spawn sleeper"}, timelineEntry{Dir: "note", Line: "hang"}),
			wantSig:  syscall.SIGKILL,
			wantExit: -1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newScriptFake(t, tc.script...)
			args, _ := Config{}.Args()
			p := f.start(t.Context(), f.options(args))
			if _, err := p.WaitInitialized(t.Context()); err != nil {
				t.Fatalf("WaitInitialized: %v", err)
			}
			var sleeper int
			var sleeperExit *ipctest.Exit
			if tc.wantSig != 0 {
				sleeper = waitSleeper(t, f)
				// Opened while it runs: a pid reused after it is reaped is not it.
				sleeperExit = openExit(t, sleeper)
			}
			done := make(chan error, 1)
			// Generous waits: each step must be taken because the previous one failed,
			// not because the machine was slow.
			go func() { done <- p.Stop(2*time.Second, 2*time.Second) }()
			for range p.Messages() {
			}
			if err := <-done; (err == nil) != (tc.wantSig == 0) {
				t.Errorf("Stop: %v", err)
			}
			if got := p.ExitCode(); got != tc.wantExit {
				t.Errorf("exit code %d; want %d", got, tc.wantExit)
			}
			if tc.wantSig != 0 {
				ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
				if !ws.Signaled() || ws.Signal() != tc.wantSig {
					t.Errorf("ended by %v; want %v", ws, tc.wantSig)
				}
				if alive(sleeperExit) {
					t.Errorf("child %d of the process group survived Stop", sleeper)
				}
			}
		})
	}
}

// waitSleeper waits for the helper to log the pid of the child it spawned.
func waitSleeper(t *testing.T, f *fakeCLI) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	pid := 0
	err := ipctest.WaitFor(ctx, filepath.Dir(f.log), func() bool {
		if _, err := os.Stat(f.log); err != nil {
			return false
		}
		for _, e := range f.entries() {
			if e.Kind == "pid" {
				pid = e.PID
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("helper never spawned its child: %v", err)
	}
	return pid
}

// openExit opens pid for alive: pid is the helper's child, not ours, so
// there is no Wait to block on; its pidfd is (see ipctest.OpenExit).
func openExit(t *testing.T, pid int) *ipctest.Exit {
	t.Helper()
	p, err := ipctest.OpenExit(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// alive reports whether p still runs (a zombie does not) 5 s on, waiting
// that long for a signalled process to go.
func alive(p *ipctest.Exit) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Wait(ctx) != nil
}

func TestEnvIsExactlyWhatIsGiven(t *testing.T) {
	t.Setenv("CLAUDECODE", "1")
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-the-parent")
	script := append(initLines(), timelineEntry{Dir: "note", Line: "parent closed stdin"}, timelineEntry{Dir: "note", Line: "child exited rc=0"})
	f := newScriptFake(t, script...)
	args, _ := Config{}.Args()
	opts := f.options(args)
	opts.Env = append(opts.Env, "ONLY_THIS=1")
	p := f.start(t.Context(), opts)
	p.CloseInput()
	drain(t, p)
	var env []string
	for _, e := range f.entries() {
		if e.Kind == "env" {
			env = e.Args
		}
	}
	want := append([]string(nil), opts.Env...)
	if !reflect.DeepEqual(env, want) {
		t.Errorf("child env %q; want exactly %q", env, want)
	}
}

func TestContextCancelStopsProcess(t *testing.T) {
	f := newScriptFake(t, append(initLines(), timelineEntry{Dir: "note", Line: "hang"})...)
	args, _ := Config{}.Args()
	ctx, cancel := context.WithCancel(t.Context())
	opts := f.options(args)
	opts.StopWait = 200 * time.Millisecond
	p := f.start(ctx, opts)
	if _, err := p.WaitInitialized(t.Context()); err != nil {
		t.Fatal(err)
	}
	cancel()
	drain(t, p)
	if p.Err() == nil {
		t.Error("process ended cleanly; want it stopped by a signal")
	}
}

func TestReadLineBounds(t *testing.T) {
	input := "short\n" + strings.Repeat("x", 100) + "\nlast"
	r := bufio.NewReaderSize(strings.NewReader(input), 16)
	var got []string
	for {
		line, err := readLine(r, 50)
		if errors.Is(err, errLineTooLong) {
			got = append(got, "<too long>")
			continue
		}
		if err != nil {
			break
		}
		got = append(got, string(line))
	}
	if want := []string{"short\n", "<too long>", "last"}; !reflect.DeepEqual(got, want) {
		t.Errorf("lines %q; want %q", got, want)
	}
}

// Each recorded SDK session, replayed against the driver: the same options
// give the same argv, initialize comes first (never with systemPrompt), the
// user lines are byte for byte what the SDK wrote, and the results and exit
// code are the recorded ones.
func TestRecordedSessionsReplay(t *testing.T) {
	tests := []struct {
		fixture string
		cfg     Config
		append  string
		results []string
		exit    int
	}{
		{fixture: "01-single-turn", results: []string{"pong: hello world"}},
		{fixture: "02-multi-turn", cfg: Config{Model: "claude-sonnet-4-5", SettingSources: []string{}},
			append: "You are a test bridge.", results: []string{"pong: first message", "pong: second message"}},
		{fixture: "03-resume", cfg: Config{Resume: "2c8e9ed0-c57e-4605-bc4c-d8315a8f81a4"},
			results: []string{"pong: what did I say before?"}},
		{fixture: "03b-resume-session-at", cfg: Config{
			Resume: "1136e566-5921-4965-90a3-7838ed10d293", SettingSources: []string{},
			ResumeSessionAt: "4f5b6dc0-01c7-4986-8bca-4ebac800429b",
		}, results: []string{"pong: third message after rewinding"}},
		{fixture: "04-mcp-tool", cfg: Config{
			MCPServers:     map[string]MCPServer{"bridge": {Command: "python3", Args: []string{"<TOOLS>/mcp_bridge.py"}}},
			PermissionMode: PermissionBypass, AllowDangerouslySkipPermissions: true,
		}, results: []string{"done"}},
		{fixture: "08-api-error", results: []string{"API Error: Repeated 529 Overloaded errors. The API is at capacity — this is usually temporary. Try again in a moment. If it persists, check your inference gateway (127.0.0.1:<PORT>)."}, exit: 1},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			args, err := tc.cfg.Args()
			if err != nil {
				t.Fatal(err)
			}
			if want := recordedArgv(t, tc.fixture); !reflect.DeepEqual(args, want) {
				t.Errorf("argv %q; want %q", args, want)
			}
			recorded := fixtureLines(t, tc.fixture+".stdin.jsonl")
			var users []string
			for _, l := range recorded[1:] {
				var m struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				}
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatal(err)
				}
				users = append(users, m.Message.Content)
			}
			f := newFake(t, fixture(tc.fixture+".timeline.jsonl"))
			opts := f.options(args)
			opts.AppendSystemPrompt = tc.append
			p := f.start(t.Context(), opts)
			var got []string
			for _, u := range users {
				if err := p.SendUser(u); err != nil {
					t.Fatal(err)
				}
				r, _ := untilResult(t, p)
				got = append(got, r.Text())
			}
			if !reflect.DeepEqual(got, tc.results) {
				t.Errorf("results %q; want %q", got, tc.results)
			}
			p.CloseInput()
			drain(t, p)
			if code := p.ExitCode(); code != tc.exit {
				t.Errorf("exit code %d; want %d", code, tc.exit)
			}
			stdin := f.stdin()
			if len(stdin) != len(recorded) {
				t.Fatalf("stdin %q; want %d lines", stdin, len(recorded))
			}
			req, _ := decodeObject(t, stdin[0])["request"].(map[string]any)
			if req["subtype"] != "initialize" {
				t.Errorf("first stdin line %s; want initialize", stdin[0])
			}
			if _, ok := req["systemPrompt"]; ok {
				t.Errorf("initialize carries systemPrompt: %s", stdin[0])
			}
			if got, _ := req["appendSystemPrompt"].(string); got != tc.append {
				t.Errorf("appendSystemPrompt %q; want %q", got, tc.append)
			}
			for i := 1; i < len(stdin); i++ {
				if stdin[i] != recorded[i] {
					t.Errorf("stdin line %d\n got %s\nwant %s", i, stdin[i], recorded[i])
				}
			}
		})
	}
}
