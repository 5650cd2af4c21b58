package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

const (
	cliVersion   = "2.1.330"
	defaultModel = "claude-opus-5-5"
	costPerCall  = 0.000188 // USD per fake API call, as in fixture 01
)

// errStreamClosed fails CLI → host requests once stdin is closed.
//
//lint:ignore ST1005 the real CLI's message, word for word
var errStreamClosed = errors.New("Stream closed")

// writer serialises stdout lines; after kill nothing more is written.
type writer struct {
	mu   sync.Mutex
	w    io.Writer
	dead bool
}

func (w *writer) emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode stdout line: %v", err))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead {
		return
	}
	_, _ = w.w.Write(append(b, '\n'))
}

func (w *writer) kill() {
	w.mu.Lock()
	w.dead = true
	w.mu.Unlock()
}

// userMsg is one user line from stdin.
type userMsg struct {
	content json.RawMessage // as sent: a string or content blocks
	text    string          // the text of the content
}

// ctlReply is the host's answer to a CLI → host control request.
type ctlReply struct {
	response json.RawMessage
	err      error
}

type hookMatcher struct {
	Matcher         *string  `json:"matcher"`
	HookCallbackIDs []string `json:"hookCallbackIds"`
	Timeout         *float64 `json:"timeout,omitempty"`
}

// turn is the state of the turn in flight.
type turn struct {
	ctx       context.Context
	cancel    context.CancelFunc
	interrupt chan string // request id of an interrupt, at most one
	promptID  string
	inTool    bool
}

type fake struct {
	opts     options
	settings loaded // the settings files' rules, hooks and env (settings.go)
	env      []string
	stderr   io.Writer
	out      *writer
	stdinLog *os.File
	cwd      string
	sess     *session
	mcp      *mcpClients
	start    time.Time
	pid      int

	ctx   context.Context
	fatal chan int // first fatal exit code wins

	mu          sync.Mutex
	initialized bool
	initAppend  string // initialize's appendSystemPrompt (under mu)
	hooks       map[string][]hookMatcher
	model       string
	permMode    string
	pending     map[string]chan ctlReply
	inputClosed bool
	queue       []userMsg
	wake        chan struct{}
	current     *turn
	resultIndex int
	totalCost   float64
	totalCalls  int
	lastIsError bool
}

func getenv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// run is the whole program; it returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env []string, uid int) int {
	if len(args) > 0 && args[0] == "remote-control" {
		return remoteControl(ctx, args[1:], stdin, stdout, stderr, env)
	}
	opts, err := parseArgs(args)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if opts.version {
		fmt.Fprintln(stdout, cliVersion+" (Claude Code)")
		return 0
	}
	if uid == 0 && opts.bypass() && getenv(env, "IS_SANDBOX") != "1" && getenv(env, "CLAUDE_CODE_BUBBLEWRAP") == "" {
		fmt.Fprintln(stderr, "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons")
		return 1
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "Error: cannot read the working directory: %v\n", err)
		return 1
	}
	configDir := getenv(env, "CLAUDE_CONFIG_DIR")
	if configDir == "" {
		home := getenv(env, "HOME")
		if home == "" {
			fmt.Fprintln(stderr, "Error: HOME is not set")
			return 1
		}
		configDir = filepath.Join(home, ".claude")
	}

	st, err := loadSettings(opts, cwd, configDir, env, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	env = mergeEnv(env, st.env)
	if st.noBypass && opts.bypass() {
		fmt.Fprintln(stderr, "bypassPermissions mode is disabled by the managed settings; running in default mode")
		opts.skipPermissions, opts.allowSkip = false, false
		if opts.permissionMode == "bypassPermissions" {
			opts.permissionMode = "default"
		}
	}
	if st.mcp != "" {
		if err := opts.addMCPConfig(st.mcp); err != nil {
			fmt.Fprintf(stderr, "%s skipped: %v\n", st.mcp, err)
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := &fake{
		settings: st,
		opts:     opts,
		env:      env,
		stderr:   stderr,
		out:      &writer{w: stdout},
		cwd:      cwd,
		start:    time.Now(),
		pid:      os.Getpid(),
		ctx:      ctx,
		fatal:    make(chan int, 1),
		hooks:    map[string][]hookMatcher{},
		model:    opts.model,
		permMode: opts.permissionMode,
		pending:  map[string]chan ctlReply{},
		wake:     make(chan struct{}, 1),
	}
	if f.model == "" {
		f.model = defaultModel
	}

	if opts.resume != "" {
		s, err := resumeSession(configDir, opts.resume, opts.resumeSessionAt, cwd)
		if errors.Is(err, errNoSession) {
			f.unknownSession(opts.resume)
			return 1
		}
		if err != nil {
			fmt.Fprintf(stderr, "Error: %v\n", err)
			return 1
		}
		f.sess = s
	} else {
		f.sess = newSession(configDir, cwd)
	}
	f.sess.errw = stderr

	if p := getenv(env, "FAKECLAUDE_STDIN_LOG"); p != "" {
		lf, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "Error: open FAKECLAUDE_STDIN_LOG: %v\n", err)
			return 1
		}
		defer lf.Close()
		f.stdinLog = lf
	}

	f.runSessionStart(ctx)
	f.mcp = startMCP(ctx, opts.mcpServers, env, stderr)
	defer func() {
		cancel() // stops connection attempts still running
		f.mcp.close()
	}()

	go f.readLoop(stdin)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.worker()
	}()
	select {
	case <-done:
	case code := <-f.fatal:
		return code
	}
	select { // a fatal error may race the end of the last turn
	case code := <-f.fatal:
		return code
	default:
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lastIsError {
		return 1
	}
	return 0
}

// die ends the process with code: nothing more reaches stdout.
func (f *fake) die(code int) {
	f.out.kill()
	select {
	case f.fatal <- code:
	default:
	}
}

// unknownSession prints fixture 18's start-up failure.
func (f *fake) unknownSession(id string) {
	msg := "No conversation found with session ID: " + id
	f.out.emit(map[string]any{
		"type": "result", "subtype": "error_during_execution", "duration_ms": 0, "duration_api_ms": 0,
		"is_error": true, "num_turns": 0, "stop_reason": nil, "session_id": id, "total_cost_usd": 0,
		"usage": usage(0), "modelUsage": map[string]any{}, "permission_denials": []any{},
		"uuid": uuid.NewString(), "errors": []string{msg}, "result_index": 0,
	})
	fmt.Fprintln(f.stderr, msg)
}

// ---- stdin ----

func (f *fake) logStdin(typ, text string) {
	if f.stdinLog == nil {
		return
	}
	if len(text) > 1000 {
		text = text[:1000]
	}
	text = strings.NewReplacer("\n", " ", "\r", " ").Replace(text)
	_, _ = fmt.Fprintf(f.stdinLog, "%d %s %s\n", time.Now().UnixNano(), typ, text)
}

type inLine struct {
	Type      string          `json:"type"`
	RequestID string          `json:"request_id"`
	Request   json.RawMessage `json:"request"`
	Response  json.RawMessage `json:"response"`
	Message   *struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

func (f *fake) readLoop(stdin io.Reader) {
	r := bufio.NewReaderSize(stdin, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if !f.handleLine(bytes.TrimRight(line, "\r\n")) {
				return
			}
		}
		if err != nil {
			f.closeInput()
			return
		}
	}
}

// handleLine dispatches one stdin line; false means the process is dying.
func (f *fake) handleLine(line []byte) bool {
	var in inLine
	if err := json.Unmarshal(line, &in); err != nil || !bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
		f.logStdin("invalid", string(line))
		fmt.Fprintf(f.stderr, "Error parsing streaming input line (type=unknown, %d chars): SyntaxError\n", utf8.RuneCount(line))
		f.die(1)
		return false
	}
	switch in.Type {
	case "user":
		if in.Message == nil {
			f.logStdin(in.Type, "")
			fmt.Fprintln(f.stderr, "Error: user line without a message, ignored")
			return true
		}
		text := contentText(in.Message.Content)
		f.logStdin(in.Type, text)
		f.mu.Lock()
		f.queue = append(f.queue, userMsg{content: in.Message.Content, text: text})
		f.mu.Unlock()
		f.signal()
	case "control_request":
		var req struct {
			Subtype string `json:"subtype"`
		}
		_ = json.Unmarshal(in.Request, &req)
		f.logStdin(in.Type, req.Subtype)
		f.handleControl(in.RequestID, req.Subtype, in.Request)
	case "control_response":
		f.logStdin(in.Type, "")
		f.handleControlResponse(in.Response)
	default:
		f.logStdin(in.Type, "")
		// keep_alive, update_environment_variables and unknown types: ignored (14b).
	}
	return true
}

func (f *fake) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fake) closeInput() {
	f.mu.Lock()
	f.inputClosed = true
	for id, ch := range f.pending {
		ch <- ctlReply{err: errStreamClosed}
		delete(f.pending, id)
	}
	f.mu.Unlock()
	f.signal()
}

// contentText is the text of a user message's content: the string itself, or
// the text blocks joined by newlines.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ---- control protocol ----

func (f *fake) respond(id string, body any) {
	f.out.emit(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": id, "response": body,
	}})
}

func (f *fake) respondError(id, msg, code string) {
	resp := map[string]any{"subtype": "error", "request_id": id, "error": msg}
	if code != "" {
		resp["error_code"] = code
	}
	f.out.emit(map[string]any{"type": "control_response", "response": resp})
}

func (f *fake) handleControl(id, subtype string, raw json.RawMessage) {
	switch subtype {
	case "initialize":
		var req struct {
			Hooks              map[string][]hookMatcher `json:"hooks"`
			AppendSystemPrompt string                   `json:"appendSystemPrompt"`
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			f.respondError(id, "Invalid initialize request: "+err.Error(), "")
			return
		}
		f.mu.Lock()
		if f.initialized {
			f.mu.Unlock()
			f.respondError(id, "Already initialized", "")
			return
		}
		f.initialized = true
		f.initAppend = req.AppendSystemPrompt
		if req.Hooks != nil {
			f.hooks = req.Hooks
		}
		f.mu.Unlock()
		f.out.emit(map[string]any{"type": "control_response", "response": map[string]any{
			"subtype": "success", "request_id": id, "response": f.initResponse(),
			"pending_permission_requests": []any{}, "pending_user_dialog_requests": []any{},
		}})
	case "interrupt":
		f.mu.Lock()
		t := f.current
		if t != nil {
			select {
			case t.interrupt <- id:
				t.cancel()
				f.mu.Unlock()
				return // the turn answers once it has stopped
			default:
			}
		}
		f.mu.Unlock()
		f.respond(id, map[string]any{"still_queued": []any{}})
	case "set_permission_mode":
		var req struct {
			Mode string `json:"mode"`
		}
		_ = json.Unmarshal(raw, &req)
		if req.Mode == "bypassPermissions" && f.settings.noBypass {
			f.respondError(id, "Cannot set permission mode to bypassPermissions because it is disabled by settings or configuration", "")
			return
		}
		f.mu.Lock()
		f.permMode = req.Mode
		f.mu.Unlock()
		f.respond(id, map[string]any{"mode": req.Mode})
		f.out.emit(map[string]any{"type": "system", "subtype": "status", "status": nil,
			"permissionMode": req.Mode, "uuid": uuid.NewString(), "session_id": f.sess.id})
	case "set_model":
		var req struct {
			Model *string `json:"model"`
		}
		_ = json.Unmarshal(raw, &req)
		f.mu.Lock()
		f.model = defaultModel
		if req.Model != nil && *req.Model != "" {
			f.model = *req.Model
		}
		f.mu.Unlock()
		f.respond(id, map[string]any{"model": req.Model})
	case "mcp_status":
		f.respond(id, map[string]any{"mcpServers": f.mcp.status(f.ctx)})
	default:
		f.respondError(id, "Unsupported control request subtype: "+subtype, "unsupported_request")
	}
}

func (f *fake) handleControlResponse(raw json.RawMessage) {
	var resp struct {
		Subtype   string          `json:"subtype"`
		RequestID string          `json:"request_id"`
		Response  json.RawMessage `json:"response"`
		Error     string          `json:"error"`
	}
	if json.Unmarshal(raw, &resp) != nil {
		return
	}
	f.mu.Lock()
	ch, ok := f.pending[resp.RequestID]
	delete(f.pending, resp.RequestID)
	f.mu.Unlock()
	if !ok {
		return // unknown or cancelled request: ignored
	}
	if resp.Subtype == "error" {
		ch <- ctlReply{err: errors.New(resp.Error)}
		return
	}
	ch <- ctlReply{response: resp.Response}
}

// request sends a CLI → host control request and waits for the answer.
func (f *fake) request(ctx context.Context, body map[string]any, timeout time.Duration) (json.RawMessage, error) {
	id := uuid.NewString()
	ch := make(chan ctlReply, 1)
	f.mu.Lock()
	if f.inputClosed {
		f.mu.Unlock()
		return nil, errStreamClosed
	}
	f.pending[id] = ch
	f.mu.Unlock()
	f.out.emit(map[string]any{"type": "control_request", "request_id": id, "request": body})
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r.response, r.err
	case <-timer.C:
		f.forget(id)
		return nil, fmt.Errorf("no answer within %s", timeout)
	case <-ctx.Done():
		f.forget(id)
		f.out.emit(map[string]any{"type": "control_cancel_request", "request_id": id})
		return nil, ctx.Err()
	}
}

func (f *fake) forget(id string) {
	f.mu.Lock()
	delete(f.pending, id)
	f.mu.Unlock()
}

// ---- turns ----

// worker runs queued user messages one turn at a time, until stdin is closed
// and the queue is empty.
func (f *fake) worker() {
	for {
		f.mu.Lock()
		if len(f.queue) > 0 {
			m := f.queue[0]
			f.queue = f.queue[1:]
			f.mu.Unlock()
			f.runTurn(m)
			if f.ctx.Err() != nil {
				return
			}
			continue
		}
		closed := f.inputClosed
		f.mu.Unlock()
		if closed {
			return
		}
		select {
		case <-f.wake:
		case <-f.ctx.Done():
			return
		}
	}
}

func (f *fake) beginTurn() *turn {
	ctx, cancel := context.WithCancel(f.ctx)
	t := &turn{ctx: ctx, cancel: cancel, interrupt: make(chan string, 1), promptID: uuid.NewString()}
	f.mu.Lock()
	f.current = t
	f.mu.Unlock()
	f.sessionState("running")
	return t
}

// sessionState prints system/session_state_changed when the host asked for
// it (CLAUDE_CODE_SDK_READS_SESSION_STATE=1).
func (f *fake) sessionState(state string) {
	if getenv(f.env, "CLAUDE_CODE_SDK_READS_SESSION_STATE") == "1" {
		f.out.emit(map[string]any{"type": "system", "subtype": "session_state_changed", "state": state,
			"sdk_host_only": true, "uuid": uuid.NewString(), "session_id": f.sess.id})
	}
}

// endTurn clears the turn; an interrupt that arrived too late to stop it is
// answered now.
func (f *fake) endTurn(t *turn) {
	f.mu.Lock()
	f.current = nil
	f.mu.Unlock()
	t.cancel()
	select {
	case id := <-t.interrupt:
		f.respond(id, map[string]any{"still_queued": []any{}})
	default:
	}
	f.sessionState("idle")
}

// interrupted reports whether the turn was stopped by an interrupt and, if
// so, prints what the CLI prints (fixtures 09, 15).
func (f *fake) interrupted(t *turn, start time.Time, calls int) bool {
	var id string
	select {
	case id = <-t.interrupt:
	default:
		return false
	}
	f.respond(id, map[string]any{"still_queued": []any{}})
	u := uuid.NewString()
	content := []map[string]any{{"type": "text", "text": "[Request interrupted by user]"}}
	f.out.emit(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": content},
		"parent_tool_use_id": nil, "session_id": f.sess.id, "uuid": u, "timestamp": timestamp()})
	f.sess.append(f.entry("user", u, map[string]any{"role": "user", "content": content}))
	reason := "aborted_streaming"
	if t.inTool {
		reason = "aborted_tools"
	}
	f.result(resultFields{
		subtype: "error_during_execution", isError: true, start: start, calls: calls,
		terminalReason: reason, errors: []string{"[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"},
	})
	return true
}

func (f *fake) runTurn(m userMsg) {
	t := f.beginTurn()
	defer f.endTurn(t)
	start := time.Now()
	dirs := parseDirectives(m.text)
	for _, d := range dirs {
		switch d.verb {
		case "compact":
			f.compactTurn(t, m, start)
			return
		case "stall":
			// A CLI stuck before its first event of the turn: nothing at
			// all is printed for the duration.
			if dur, err := time.ParseDuration(d.arg); err == nil {
				timer := time.NewTimer(dur)
				select {
				case <-timer.C:
				case <-t.ctx.Done():
					timer.Stop()
				}
				if f.ctx.Err() != nil {
					return
				}
			}
		}
	}
	f.emitInit()
	f.sess.append(f.entry("user", "", map[string]any{"role": "user", "content": m.content}))

	calls := 1
	var replies []string
	for _, d := range dirs {
		switch d.verb {
		case "reply":
			replies = append(replies, d.arg)
		case "pid":
			replies = append(replies, fmt.Sprintf("pid=%d session=%s", f.pid, f.sess.id))
		case "prompt":
			// The turn's whole prompt, as it was given.
			replies = append(replies, m.text)
		case "memory":
			replies = append(replies, f.memoryDirective())
		case "sleep":
			dur, err := time.ParseDuration(d.arg)
			if err != nil {
				replies = append(replies, fmt.Sprintf("fake: bad duration %q", d.arg))
				continue
			}
			timer := time.NewTimer(dur)
			select {
			case <-timer.C:
			case <-t.ctx.Done():
				timer.Stop()
			}
			if f.ctx.Err() != nil {
				return
			}
			if f.interrupted(t, start, calls) {
				return
			}
		case "crash":
			text := strings.Join(replies, "\n")
			if text == "" {
				text = "crashing"
			}
			f.assistant([]any{map[string]any{"type": "text", "text": text}}, nil)
			f.die(2)
			return
		case "error":
			f.apiError(d.arg, start, calls)
			return
		case "api":
			res := f.apiDirective(t.ctx, d.arg)
			calls++
			if f.ctx.Err() != nil {
				return
			}
			switch {
			case res.status != 0:
				f.apiErrorStatus(fmt.Sprintf("API Error: %d %s", res.status, res.text), res.status, start, calls)
				return
			case res.err != "":
				f.apiErrorStatus("API Error: "+res.err, 0, start, calls)
				return
			}
			replies = append(replies, res.text)
		case "flood":
			replies = append(replies, f.floodDirective(t.ctx, d.arg))
			calls++
			if f.ctx.Err() != nil {
				return
			}
		case "tool", "bash", "write", "fetch":
			do := f.toolDirective
			switch d.verb {
			case "bash":
				do = f.bashDirective
			case "write":
				do = f.writeDirective
			case "fetch":
				do = f.fetchDirective
			}
			text, ok := do(t, d.arg)
			calls++
			if !ok && f.interrupted(t, start, calls) {
				return
			}
			if f.ctx.Err() != nil {
				return
			}
			replies = append(replies, text)
		}
	}
	if len(dirs) == 0 {
		replies = []string{defaultReply(m)}
	}
	text := strings.Join(replies, "\n")
	f.assistant([]any{map[string]any{"type": "text", "text": text}}, nil)
	f.result(resultFields{subtype: "success", text: &text, start: start, calls: calls, terminalReason: "completed", stopReason: "end_turn"})
}

// apiError ends the turn like fixture 08: a synthetic assistant message and a
// result with subtype success but is_error true.
func (f *fake) apiError(text string, start time.Time, calls int) {
	if text == "" {
		text = "API Error: fake error"
	}
	f.apiErrorStatus(text, 500, start, calls)
}

// apiErrorStatus is apiError with the HTTP status (0: no answer at all).
func (f *fake) apiErrorStatus(text string, status int, start time.Time, calls int) {
	u := uuid.NewString()
	msg := map[string]any{
		"id": uuid.NewString(), "type": "message", "role": "assistant", "model": "<synthetic>",
		"content":     []any{map[string]any{"type": "text", "text": text}},
		"stop_reason": "stop_sequence", "stop_sequence": "", "usage": usage(0), "context_management": nil,
	}
	f.out.emit(map[string]any{
		"type": "assistant", "message": msg, "parent_tool_use_id": nil, "session_id": f.sess.id,
		"uuid": u, "timestamp": timestamp(), "error": "server_error", "request_id": "req_" + shortID(),
		"is_api_error_message": true, "api_error_status": status, "api_error_type": apiErrorType(status),
	})
	f.sess.append(f.entry("assistant", u, msg))
	f.result(resultFields{
		subtype: "success", isError: true, text: &text, start: start, calls: calls, free: true,
		terminalReason: "api_error", stopReason: "stop_sequence", apiErrorStatus: status,
	})
}

// assistant prints an assistant line and records it in the transcript.
func (f *fake) assistant(content []any, extra map[string]any) {
	u := uuid.NewString()
	f.mu.Lock()
	model := f.model
	f.mu.Unlock()
	msg := map[string]any{
		"id": "msg_fake" + shortID(), "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": nil, "stop_sequence": nil,
		"usage":              map[string]any{"input_tokens": 12, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
		"context_management": nil,
	}
	line := map[string]any{
		"type": "assistant", "message": msg, "parent_tool_use_id": nil, "session_id": f.sess.id,
		"uuid": u, "timestamp": timestamp(), "request_id": "req_fake" + shortID(),
	}
	for k, v := range extra {
		line[k] = v
	}
	f.out.emit(line)
	f.sess.append(f.entry("assistant", u, msg))
}

// toolResult prints the user line carrying a tool result.
func (f *fake) toolResult(toolUseID string, content any, isError bool, raw any, meta string) {
	u := uuid.NewString()
	block := map[string]any{"tool_use_id": toolUseID, "type": "tool_result", "content": content}
	if isError {
		block["is_error"] = true
	}
	msg := map[string]any{"role": "user", "content": []any{block}}
	f.out.emit(map[string]any{
		"type": "user", "message": msg, "parent_tool_use_id": nil, "session_id": f.sess.id,
		"uuid": u, "timestamp": timestamp(), "tool_use_result": raw,
		"tool_result_meta": []any{map[string]any{"id": toolUseID,
			"permission_decision": map[string]any{"decision": "accept", "source": meta, "reason_type": meta}}},
	})
	f.sess.append(f.entry("user", u, msg))
}

type resultFields struct {
	subtype        string
	isError        bool
	text           *string
	start          time.Time
	calls          int
	free           bool // no cost (API errors)
	terminalReason string
	stopReason     string
	apiErrorStatus int
	errors         []string
	localCommand   string
}

func (f *fake) result(r resultFields) {
	f.mu.Lock()
	cost := 0.0
	if !r.free {
		cost = float64(r.calls) * costPerCall
		f.totalCalls += r.calls
	}
	f.totalCost += cost
	idx := f.resultIndex
	f.resultIndex++
	f.lastIsError = r.isError
	total, totalCalls, model := f.totalCost, f.totalCalls, f.model
	f.mu.Unlock()

	d := time.Since(r.start).Milliseconds()
	line := map[string]any{
		"type": "result", "subtype": r.subtype, "is_error": r.isError,
		"duration_ms": d, "duration_api_ms": d, "num_turns": r.calls,
		"session_id": f.sess.id, "total_cost_usd": total, "usage": usage(r.calls),
		"modelUsage":                    modelUsage(model, totalCalls, total),
		"model_usage_since_last_result": modelUsage(model, r.calls, cost),
		"permission_denials":            []any{}, "uuid": uuid.NewString(),
		"result_index": idx, "queued_turn_count": 0,
		"fast_mode_state": "off", "safety_stops": 0,
	}
	if r.stopReason != "" {
		line["stop_reason"] = r.stopReason
	} else {
		line["stop_reason"] = nil
	}
	if r.text != nil {
		line["result"] = *r.text
	}
	if r.terminalReason != "" {
		line["terminal_reason"] = r.terminalReason
	}
	if r.subtype == "success" && r.localCommand == "" {
		line["api_error_status"] = nil
	}
	if r.apiErrorStatus != 0 {
		line["api_error_status"] = r.apiErrorStatus
		line["api_error_type"] = apiErrorType(r.apiErrorStatus)
	}
	if r.errors != nil {
		line["errors"] = r.errors
	}
	if r.localCommand != "" {
		line["local_command"] = r.localCommand
	}
	f.out.emit(line)
}

func usage(calls int) map[string]any {
	return map[string]any{
		"input_tokens": 12 * calls, "output_tokens": 7 * calls,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
		"server_tool_use": map[string]any{"web_search_requests": 0, "web_fetch_requests": 0},
		"service_tier":    "standard",
		"cache_creation":  map[string]any{"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
	}
}

func modelUsage(model string, calls int, cost float64) map[string]any {
	if calls == 0 {
		return map[string]any{}
	}
	return map[string]any{model: map[string]any{
		"inputTokens": 12 * calls, "outputTokens": 7 * calls, "cacheReadInputTokens": 0,
		"cacheCreationInputTokens": 0, "webSearchRequests": 0, "costUSD": cost,
		"contextWindow": 1000000, "maxOutputTokens": 128000,
	}}
}

func timestamp() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

func shortID() string { return strings.ReplaceAll(uuid.NewString(), "-", "")[:16] }
