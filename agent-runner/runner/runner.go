// Package runner is the agent-runner's core: it drives one claude CLI process
// for a group's container, feeds it the first prompt and every follow-up
// message from the IPC input directory, and reports results and session
// changes as ipc.Event lines.
//
// Life of a run: the prompt from the run input is the first user message;
// each input/*.json file becomes another user message on the same stdin, even
// while a turn is in flight, and is deleted once written; a malformed file is
// moved to <ipc>/errors/. input/_close makes the runner close claude's stdin as
// soon as claude is idle, and the runner exits 0 once claude has exited. On
// the kubernetes engine (a proxy token in the run input) the input, the close
// and the MCP server's requests cross the run's authenticated channel instead
// of the files (channel.go, decision record 42).
//
// Failures: a --resume id the CLI does not know ends the CLI at start-up; the
// runner starts a fresh session, sends what it had written again, and reports
// the new session with fresh:true. Any other unexpected exit is reported and
// claude is restarted once with --resume (at the last finished turn) and
// given the turn in flight again: every message whose turn has not ended
// with a result, and those written after the turn in flight began (they may
// be queued for a turn of their own, or folded into the one that died). A
// second unexpected exit ends the run with an error and a non-zero exit, so
// the host retries the turn. The error lines name the reason ("claude exited
// with status 2"); claude's last stderr lines go to the log only (they are
// often the MCP server's, not claude's).
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bridged-app/bridged/agent-runner/mcpserver"
	"github.com/bridged-app/bridged/internal/claudecli"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/rs/zerolog"
)

// MCPServerName is the name of the bridge server in --mcp-config; the agent
// sees its tools as mcp__bridge__<tool>.
const MCPServerName = mcpserver.ServerName

// ErrorsDir is the directory under the IPC root where malformed files go.
const ErrorsDir = "errors"

// Defaults.
const (
	// DefaultCloseGrace: after a result, a close waits this long for a turn
	// the CLI had queued to start (its system/init), so stdin is not closed
	// under a turn that may still need hook answers.
	DefaultCloseGrace = 150 * time.Millisecond
	// DefaultStopWait is the wait after each step of stopping claude when the
	// runner is told to stop (stdin closed, then SIGTERM, then SIGKILL): both
	// steps fit in the engine's default 10 s stop grace.
	DefaultStopWait = 3 * time.Second
)

// Config is everything Run needs.
type Config struct {
	Input     ipc.RunInput
	IPCDir    string // the IPC root as the runner sees it
	WorkDir   string // claude's working directory
	GlobalDir string // holds the global CLAUDE.md
	ExtraDir  string // one --add-dir per directory in it
	// Claude is the CLI executable.
	Claude string
	// Self is the agent-runner executable, run as `<Self> mcp` by claude.
	Self string
	// MCPTimeout, when set, is passed to the MCP server as its request
	// timeout.
	MCPTimeout time.Duration
	// Environ is the runner's environment; claude's is built from it.
	Environ []string
	// APISocket is the host's credential-proxy socket (ipc.EnvAPISocket).
	// When set, the runner forwards a loopback port to it and gives claude
	// ANTHROPIC_BASE_URL and a placeholder credential of the kind APIAuth
	// (ipc.EnvAPIAuth) names. Unset, claude gets no API settings from the
	// runner.
	APISocket, APIAuth string
	// APIAddr, when set, is the proxy's TCP address (ipc.EnvAPIAddr) in
	// place of APISocket; Input.ProxyToken opens it.
	APIAddr string
	// Events receives the ipc.Event lines (the runner's stdout).
	Events io.Writer
	Logger zerolog.Logger
	// Sweep is the IPC watcher's safety-net interval (ipc.DefaultSweep if 0).
	Sweep      time.Duration
	CloseGrace time.Duration
	StopWait   time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Ask, when set (tests), asks the owner instead of the host's
	// ask_approval request.
	Ask Asker
}

// Exit errors.
var (
	// ErrClaudeDied: claude exited unexpectedly and could not be kept running.
	ErrClaudeDied = errors.New("claude could not be kept running")
)

// Run drives claude until the host closes the input (nil), ctx ends
// (ctx.Err()), or claude cannot be kept running (ErrClaudeDied). Every
// failure is also reported as an error event.
func Run(ctx context.Context, cfg Config) error {
	var api map[string]string
	channel := ""
	if cfg.APISocket != "" || cfg.APIAddr != "" {
		fwd, err := startForwarder(cfg.APISocket, cfg.APIAddr, cfg.Input.ProxyToken, cfg.Logger)
		if err != nil {
			r := &run{cfg: cfg, log: cfg.Logger}
			r.emit(ipc.Event{Type: ipc.EventError, Message: err.Error(), Retryable: true})
			return err
		}
		defer fwd.Close()
		api = fwd.vars(cfg.APIAuth)
		if cfg.APIAddr != "" && cfg.Input.ProxyToken != "" {
			// The IPC crosses the same channel as the proxy.
			channel = fwd.BaseURL()
		}
	}
	r, err := newRun(cfg, api)
	if err != nil {
		r.emit(ipc.Event{Type: ipc.EventError, Message: err.Error(), Retryable: false})
		return err
	}
	r.channel = channel
	if r.perms.profile == ProfileAsk && r.perms.ask == nil {
		var c *mcpserver.Client
		if channel != "" {
			c = mcpserver.NewChannelClient(channel, MaxApprovalWait, cfg.Logger.With().Str("source", "approvals").Logger())
		} else if c, err = mcpserver.NewClient(cfg.IPCDir, MaxApprovalWait, cfg.Logger.With().Str("source", "approvals").Logger()); err != nil {
			r.emit(ipc.Event{Type: ipc.EventError, Message: fmt.Sprintf("watch responses: %v", err), Retryable: true})
			return err
		}
		defer c.Close()
		key := cfg.Input.ApprovalKey
		r.perms.ask = hostAsker(c.Call, func(ev ipc.Event) {
			ev.Key = key
			r.emit(ev)
		})
	}
	// A turn cut off ends when the container is gone.
	defer keepReadable(r.claudeHome)
	return r.loop(ctx)
}

type run struct {
	cfg     Config
	log     zerolog.Logger
	layout  ipc.Layout
	emitMu  sync.Mutex
	now     func() time.Time
	env     []string
	prefix  string
	append  string
	addDirs []string
	hooks   []claudecli.Hook
	perms   *permissions
	// claudeHome is claude's config directory, the agent's memory.
	claudeHome string
	// channel is the IPC channel's base URL (the forwarder), when the
	// IPC crosses it instead of the files; stream reads its input, and
	// taken names the inputs given to claude.
	channel string
	stream  *inputStream
	taken   map[string]bool

	// State below is owned by loop's goroutine: the claude process and
	// how it is supervised; what its turns saw and settled is in turns.
	proc        *claudecli.Process
	msgs        <-chan claudecli.Message
	resume      string
	resumeAt    string
	restarts    int
	closing     bool
	inputClosed bool
	turns       *ledger
}

// newRun prepares a run; api holds claude's API variables (base URL and
// placeholder credential).
func newRun(cfg Config, api map[string]string) (*run, error) {
	r := &run{cfg: cfg, log: cfg.Logger, layout: ipc.Layout{Root: cfg.IPCDir}, now: cfg.Now}
	if r.now == nil {
		r.now = time.Now
	}
	if cfg.CloseGrace <= 0 {
		r.cfg.CloseGrace = DefaultCloseGrace
	}
	if cfg.StopWait <= 0 {
		r.cfg.StopWait = DefaultStopWait
	}
	if cfg.Claude == "" || cfg.Self == "" || cfg.IPCDir == "" || cfg.WorkDir == "" {
		return r, errors.New("runner misconfigured: claude, self, ipc dir and workdir are required")
	}
	env, _, skipped := claudeEnv(cfg.Environ, api)
	if len(skipped) > 0 {
		r.log.Warn().Strs("names", skipped).Msg("API variables with unusable names ignored")
	}
	r.env = env
	r.claudeHome = claudeDir(cfg.Environ)
	r.prefix = unsetPrefix(nil)
	r.resume = cfg.Input.SessionID
	r.resumeAt = cfg.Input.ResumeAt
	r.turns = newLedger(cfg.Input.ResumeAt)

	var memory []string
	if !cfg.Input.IsMain && cfg.GlobalDir != "" {
		data, err := os.ReadFile(filepath.Join(cfg.GlobalDir, "CLAUDE.md"))
		switch {
		case err == nil:
			memory = append(memory, string(data))
		case !errors.Is(err, os.ErrNotExist):
			r.log.Warn().Err(err).Msg("global CLAUDE.md unreadable; not appended")
		}
	}
	if normProfile(cfg.Input.Tools) != ProfileFull {
		// Outside full the CLI loads no project memory (no setting
		// sources): the group's own CLAUDE.md is appended instead.
		if text := groupMemory(filepath.Join(cfg.WorkDir, "CLAUDE.md"), r.log); text != "" {
			memory = append(memory, text)
		}
	}
	r.append = strings.Join(memory, "\n\n")
	if cfg.ExtraDir != "" {
		entries, err := os.ReadDir(cfg.ExtraDir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.Warn().Err(err).Msg("extra directories unreadable")
		}
		for _, e := range entries {
			p := filepath.Join(cfg.ExtraDir, e.Name())
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				r.addDirs = append(r.addDirs, p)
			}
		}
		sort.Strings(r.addDirs)
	}
	loc, err := time.LoadLocation(cfg.Input.Timezone)
	if err != nil || cfg.Input.Timezone == "" {
		loc = time.UTC
	}
	arch := &archiver{
		dir:       filepath.Join(cfg.WorkDir, "conversations"),
		assistant: cfg.Input.AssistantName,
		loc:       loc,
		now:       r.now,
		log:       r.log,
	}
	r.perms = &permissions{
		profile: normProfile(cfg.Input.Tools),
		workDir: cfg.WorkDir,
		prefix:  r.prefix,
		ask:     cfg.Ask,
		log:     r.log.With().Str("source", "permissions").Logger(),
	}
	r.hooks = []claudecli.Hook{{Event: claudecli.HookPreCompact, Func: arch.hook}}
	if r.perms.profile == ProfileFull {
		// The hook's rewrite allows the call, which only the full profile
		// may do without can_use_tool; the other profiles add the prefix
		// in their can_use_tool answer.
		r.hooks = append([]claudecli.Hook{{Event: claudecli.HookPreToolUse, Matcher: "Bash", Func: bashHook(r.prefix, r.log)}}, r.hooks...)
	}
	return r, nil
}

// emit writes one event line. Events are the runner's only stdout output.
func (r *run) emit(ev ipc.Event) {
	line, err := json.Marshal(ev)
	if err != nil {
		r.log.Error().Err(err).Msg("encode event")
		return
	}
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	if _, err := r.cfg.Events.Write(append(line, '\n')); err != nil {
		r.log.Error().Err(err).Str("type", string(ev.Type)).Msg("write event")
	}
}

func (r *run) args() ([]string, error) {
	// Read by mcpserver.ConfigFromEnv.
	mcpEnv := map[string]string{
		mcpserver.EnvIPCDir:   r.cfg.IPCDir,
		mcpserver.EnvGroup:    r.cfg.Input.Group,
		mcpserver.EnvChat:     r.cfg.Input.Chat,
		mcpserver.EnvIsMain:   "0",
		mcpserver.EnvTimezone: r.cfg.Input.Timezone,
	}
	if r.cfg.Input.IsMain {
		mcpEnv[mcpserver.EnvIsMain] = "1"
	}
	if r.channel != "" {
		mcpEnv[ipc.EnvChannel] = r.channel
	}
	// claude passes its own environment, credentials included, to the MCP
	// servers it starts; blank them, the bridge server has no use for them.
	for _, name := range credentialVars {
		mcpEnv[name] = ""
	}
	if r.cfg.MCPTimeout > 0 {
		mcpEnv[mcpserver.EnvTimeout] = r.cfg.MCPTimeout.String()
	}
	c := claudecli.Config{
		Model:      r.cfg.Input.Model,
		Resume:     r.resume,
		MCPServers: map[string]claudecli.MCPServer{MCPServerName: {Command: r.cfg.Self, Args: []string{"mcp"}, Env: mcpEnv}},
		AddDirs:    r.addDirs,
	}
	profileConfig(&c, r.perms.profile)
	if err := settingsConfig(&c, r.perms.profile); err != nil {
		return nil, err
	}
	if r.resume != "" {
		c.ResumeSessionAt = r.resumeAt
	}
	return c.Args()
}

// start runs a new claude process and writes msgs to it (the prompt first).
func (r *run) start(msgs []string) error {
	args, err := r.args()
	if err != nil {
		return err
	}
	p, err := claudecli.Start(context.Background(), claudecli.Options{
		Path:               r.cfg.Claude,
		Args:               args,
		Dir:                r.cfg.WorkDir,
		Env:                r.env,
		AppendSystemPrompt: r.append,
		Hooks:              r.hooks,
		CanUseTool:         r.perms.decide,
		Logger:             r.log.With().Str("source", "claude").Logger(),
		StopWait:           r.cfg.StopWait,
	})
	if err != nil {
		return err
	}
	r.proc, r.msgs = p, p.Messages()
	r.turns.started()
	r.log.Info().Int("pid", p.Pid()).Bool("resume", r.resume != "").Msg("claude started")
	for i, m := range msgs {
		if err := r.send(m); err != nil {
			// It died at once; its exit is handled like any other, and these
			// messages go to the next process.
			r.log.Warn().Err(err).Msg("claude did not take its first messages")
			r.turns.undelivered(msgs[i:])
			break
		}
	}
	return nil
}

// send writes one user message to the current claude.
func (r *run) send(text string) error {
	if err := r.proc.SendUser(text); err != nil {
		return err
	}
	r.turns.wrote(text)
	return nil
}

func (r *run) loop(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	stop, err := r.watchInput(ctx, poke)
	if err != nil {
		return err
	}
	defer stop()

	if err := r.start([]string{r.cfg.Input.Prompt}); err != nil {
		r.emit(ipc.Event{Type: ipc.EventError, Message: err.Error(), Retryable: false})
		return err
	}
	defer func() {
		// A no-op for a process that already exited.
		_ = r.proc.Stop(r.cfg.StopWait, r.cfg.StopWait)
		for range r.msgs {
		}
	}()

	var closeTimer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			r.log.Info().Msg("stopping claude: runner told to stop")
			return ctx.Err() // the deferred stop ends claude

		case <-kick:
			r.scanInput()
			closeTimer = r.closeWhenIdle(closeTimer)

		case <-closeTimer:
			closeTimer = r.closeWhenIdle(nil)

		case m, ok := <-r.msgs:
			if !ok {
				done, err := r.exited()
				if done {
					return err
				}
				poke() // a new process runs: feed it what is waiting
				continue
			}
			r.handle(m)
			closeTimer = r.closeWhenIdle(closeTimer)
		}
	}
}

// watchInput starts what wakes the loop when input arrives: the host's
// input stream over the channel, or a watcher of the input directory. stop
// ends it.
func (r *run) watchInput(ctx context.Context, poke func()) (stop func(), err error) {
	wctx, wcancel := context.WithCancel(ctx)
	wdone := make(chan struct{})
	stop = func() {
		wcancel()
		<-wdone
	}
	if r.channel != "" {
		r.stream = newInputStream(r.channel, r.log, poke)
		r.taken = map[string]bool{}
		go func() {
			defer close(wdone)
			r.stream.run(wctx)
		}()
		return stop, nil
	}
	if err := os.MkdirAll(r.layout.Input(), 0o755); err != nil {
		wcancel()
		r.emit(ipc.Event{Type: ipc.EventError, Message: fmt.Sprintf("create input directory: %v", err), Retryable: true})
		return nil, fmt.Errorf("create input directory: %w", err)
	}
	// A close sentinel left by an earlier container is not meant for this one.
	if err := os.Remove(filepath.Join(r.layout.Input(), ipc.CloseName)); err == nil {
		r.log.Info().Msg("stale close sentinel removed")
	}

	w, err := ipc.NewWatcher(r.cfg.Sweep)
	if err != nil {
		wcancel()
		r.emit(ipc.Event{Type: ipc.EventError, Message: fmt.Sprintf("watch input directory: %v", err), Retryable: true})
		return nil, err
	}
	if err := w.Add(r.layout.Input()); err != nil {
		wcancel()
		w.Close()
		r.emit(ipc.Event{Type: ipc.EventError, Message: fmt.Sprintf("watch input directory: %v", err), Retryable: true})
		return nil, err
	}
	go func() {
		defer close(wdone)
		_ = w.Run(wctx, func(string) { poke() })
	}()
	return stop, nil
}

// closeWhenIdle closes claude's input once the host asked for it and claude
// is idle, waiting CloseGrace after a result for a queued turn to begin. It
// returns the timer to wait on, if any.
func (r *run) closeWhenIdle(timer <-chan time.Time) <-chan time.Time {
	if !r.closing || r.inputClosed || r.turns.inFlight() {
		return timer
	}
	if wait := r.cfg.CloseGrace - r.now().Sub(r.turns.resultAt); !r.turns.resultAt.IsZero() && wait > 0 {
		if timer == nil {
			timer = time.After(wait)
		}
		return timer
	}
	r.inputClosed = true
	r.log.Info().Msg("closing claude input: host asked to close and claude is idle")
	if err := r.proc.CloseInput(); err != nil {
		r.log.Warn().Err(err).Msg("close claude input")
	}
	return nil
}

// scanInput feeds claude the waiting input: from the channel's stream,
// or every waiting input file.
func (r *run) scanInput() {
	if r.stream != nil {
		r.scanChannel()
		return
	}
	r.scanFiles()
}

// scanFiles feeds every waiting input file to claude, in name order.
func (r *run) scanFiles() {
	dir := r.layout.Input()
	names, err := ipc.List(dir)
	if err != nil {
		r.log.Warn().Err(err).Msg("list input directory")
		return
	}
	for _, name := range names {
		path := filepath.Join(dir, name)
		if name == ipc.CloseName {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				r.log.Warn().Err(err).Msg("remove close sentinel")
			}
			if !r.closing {
				r.log.Info().Msg("host asked to close")
			}
			r.closing = true
			continue
		}
		if r.inputClosed {
			// Left in place: the next container picks it up.
			continue
		}
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			r.log.Warn().Err(err).Str("file", name).Msg("read input file")
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			r.reject(path, name, errors.New("not a .json file"))
			continue
		}
		in, err := ipc.DecodeInput(data)
		if err != nil {
			r.reject(path, name, err)
			continue
		}
		if err := r.send(in.Text); err != nil {
			// claude is gone; the file stays and is fed to the next process.
			r.log.Warn().Err(err).Str("file", name).Msg("follow-up not delivered yet")
			return
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.Warn().Err(err).Str("file", name).Msg("remove delivered input file")
		}
		r.log.Debug().Str("file", name).Msg("follow-up delivered")
	}
}

// reject moves a malformed input file to <ipc>/errors/.
func (r *run) reject(path, name string, why error) {
	errDir := filepath.Join(r.cfg.IPCDir, ErrorsDir)
	r.log.Warn().Err(why).Str("file", name).Str("moved_to", errDir).Msg("malformed input file")
	if err := os.MkdirAll(errDir, 0o755); err == nil {
		if err := os.Rename(path, filepath.Join(errDir, "input-"+name)); err == nil {
			return
		}
	}
	// Could not move it: remove it so it is not read again and again.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log.Error().Err(err).Str("file", name).Msg("remove malformed input file")
	}
}

// reportSession tells the host of a session id it has not been told of.
func (r *run) reportSession(id string) {
	if ev, ok := r.turns.report(id); ok {
		r.emit(ev)
	}
}

func (r *run) handle(m claudecli.Message) {
	switch {
	case m.System != nil:
		switch m.System.Subtype {
		case claudecli.SystemInit:
			r.turns.turnStarted()
			r.reportSession(m.System.SessionID)
		case claudecli.SystemSessionStateChanged:
			r.turns.stateChanged(m.System.State)
		case claudecli.SystemAPIRetry:
			r.log.Info().Int("attempt", m.System.Attempt).Int("max", m.System.MaxRetries).
				Int("status", m.System.ErrorStatus).Str("error", m.System.Error).Msg("claude retrying the API")
		case claudecli.SystemCompactBoundary:
			r.turns.compacted()
			r.log.Info().Msg("conversation compacted")
		}
	case m.Result != nil:
		res := m.Result
		if r.turns.unknownSession(res) {
			r.log.Warn().Str("session", res.SessionID).Msg("claude does not know the session; starting a fresh one")
			_ = r.proc.CloseInput()
			return
		}
		ev := r.turns.result(res, r.now(), r.proc.LastAssistantUUID())
		r.reportSession(res.SessionID)
		// The daemon records the agent's memory once it has the result.
		keepReadable(r.claudeHome)
		r.emit(ev)
		r.log.Info().Bool("is_error", res.IsError).Int("turns", res.NumTurns).
			Int64("duration_ms", res.DurationMS).Float64("cost_usd", ev.CostUSD).Msg("turn finished")
	case m.Assistant != nil:
		if m.Assistant.Error != "" {
			r.log.Warn().Str("error", m.Assistant.Error).Msg("claude reported an API error")
		}
		for _, ev := range fetched(m.Assistant.Message.Content) {
			r.emit(ev)
		}
	}
}

// fetched returns a fetched event for each web page the blocks fetch and
// each web search they run: the host marks what the turn changes in
// memory with it.
func fetched(blocks []claudecli.ContentBlock) []ipc.Event {
	var out []ipc.Event
	for _, b := range blocks {
		if b.Type != "tool_use" || (b.Name != "WebFetch" && b.Name != "WebSearch") {
			continue
		}
		var in struct {
			URL   string `json:"url"`
			Query string `json:"query"`
		}
		_ = json.Unmarshal(b.Input, &in) // an input not understood still counts, without its address
		what := in.URL
		if b.Name == "WebSearch" {
			what = in.Query
		}
		if len(what) > ipc.MaxFetchedBytes {
			what = strings.ToValidUTF8(what[:ipc.MaxFetchedBytes-3], "") + "…"
		}
		out = append(out, ipc.Event{Type: ipc.EventFetched, Tool: b.Name, What: what})
	}
	return out
}

// exited handles the end of a claude process. It returns done=true with the
// run's result, or done=false after starting a replacement.
func (r *run) exited() (bool, error) {
	p := r.proc
	code := p.ExitCode()
	exitErr := p.Err()
	if r.inputClosed {
		r.log.Info().Int("exit_code", code).Msg("claude finished after input closed")
		return true, nil
	}
	if r.turns.unknownSes {
		// The CLI dropped everything written to it: start fresh and send it
		// all again.
		msgs := r.turns.unconfirmed
		r.resume, r.resumeAt = "", ""
		r.turns.freshSession()
		if err := r.start(msgs); err != nil {
			r.emit(ipc.Event{Type: ipc.EventError, Message: fmt.Sprintf("start fresh session: %v", err), Retryable: true})
			return true, fmt.Errorf("start fresh session: %w", err)
		}
		return false, nil
	}

	why := describeExit(code, exitErr)
	if tail := p.StderrTail(); len(tail) > 0 {
		r.log.Warn().Strs("stderr_tail", tail).Msg("claude's last stderr lines")
	}
	if r.closing || r.restarts >= 1 {
		msg := why + " again; giving up"
		if r.restarts == 0 {
			msg = why + " while closing"
		}
		r.log.Error().Int("exit_code", code).Msg("claude exited unexpectedly; not restarting")
		r.emit(ipc.Event{Type: ipc.EventError, Message: msg, Retryable: true})
		return true, fmt.Errorf("%w: %s", ErrClaudeDied, why)
	}
	r.restarts++
	// The turn in flight is sent again (and every message no result has
	// settled), to a claude resumed at the last finished turn, so the
	// transcript holds the message once. If that turn is what killed it,
	// the second exit ends the run and the host retries it.
	msgs := r.turns.unanswered()
	session := p.SessionID()
	if session == "" {
		session = r.turns.reported
	}
	if session == "" {
		session = r.resume
	}
	r.resume, r.resumeAt = session, r.turns.lastUUID
	if session == "" {
		r.resumeAt = ""
	}
	msg := why + "; restarted"
	if session != "" {
		msg += " with --resume " + session
	}
	if len(msgs) > 0 {
		msg += fmt.Sprintf("; the turn in flight was sent again (%d %s)", len(msgs), plural(len(msgs), "message"))
	} else {
		msg += "; no turn was in flight"
	}
	r.log.Warn().Int("exit_code", code).Str("session", session).Int("resent", len(msgs)).Msg("claude exited unexpectedly; restarting once")
	r.emit(ipc.Event{Type: ipc.EventError, Message: msg, Retryable: true})
	if err := r.start(msgs); err != nil {
		r.emit(ipc.Event{Type: ipc.EventError, Message: fmt.Sprintf("restart claude: %v", err), Retryable: true})
		return true, fmt.Errorf("%w: restart: %v", ErrClaudeDied, err)
	}
	return false, nil
}

// describeExit names why claude ended: its exit status, or the signal that
// killed it.
func describeExit(code int, err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "claude was killed by signal " + ws.Signal().String()
		}
	}
	if code < 0 && err != nil {
		return "claude ended: " + err.Error()
	}
	return fmt.Sprintf("claude exited with status %d", code)
}

// plural returns word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
