package claudecli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Errors returned by a Process.
var (
	// ErrInputClosed: CloseInput (or Stop) was called; nothing more can be
	// written.
	ErrInputClosed = errors.New("claude input closed")
	// ErrExited: the process exited before the operation completed.
	ErrExited = errors.New("claude exited")
)

// Defaults.
const (
	// MaxLineBytes bounds one stdout line; longer lines are dropped and logged.
	MaxLineBytes = 64 << 20
	// DefaultStopWait is how long Stop waits after each escalation step when
	// Options does not say.
	DefaultStopWait = 10 * time.Second
	// pipeDrainWait is how long readers may keep reading after the process
	// exited (a grandchild may hold the pipe open).
	pipeDrainWait   = 2 * time.Second
	stderrTailLines = 20
)

// Options configures Start.
type Options struct {
	// Path is the executable ("claude" is looked up on PATH by exec).
	Path string
	// Args is the argv after the executable (Config.Args).
	Args []string
	// Dir is the working directory.
	Dir string
	// Env is the child's complete environment; nothing is inherited. Strip
	// CLAUDECODE, NODE_OPTIONS and the like before passing it.
	Env []string
	// AppendSystemPrompt is sent in initialize when non-empty.
	AppendSystemPrompt string
	// Hooks are registered in initialize, callback ids hook_0, hook_1, … in
	// this order.
	Hooks []Hook
	// CanUseTool decides can_use_tool requests; nil allows everything with
	// the original input echoed (AllowAll).
	CanUseTool CanUseToolFunc
	// Logger receives the process's logs (stderr lines, protocol problems).
	Logger zerolog.Logger
	// Stderr, when set, also receives the CLI's stderr verbatim.
	Stderr io.Writer
	// StopWait is the wait after each Stop step when the Start context ends
	// (DefaultStopWait if zero).
	StopWait time.Duration
}

// Process is a running claude CLI. The caller must read Messages until it is
// closed; the channel closes after the process has exited.
type Process struct {
	cmd      *exec.Cmd
	log      zerolog.Logger
	stdin    io.WriteCloser
	stdout   *os.File
	stderr   *os.File
	msgs     chan Message
	done     chan struct{}
	hooks    map[string]HookFunc
	canUse   CanUseToolFunc
	stopWait time.Duration
	tee      io.Writer

	wmu         sync.Mutex
	inputClosed bool

	hctx    context.Context
	hcancel context.CancelFunc
	wg      sync.WaitGroup

	mu         sync.Mutex
	pending    map[string]chan ControlResponse
	inflight   map[string]context.CancelFunc
	seq        int
	sessionID  string
	lastUUID   string
	stderrTail []string
	waitErr    error

	initDone chan struct{}
	initResp json.RawMessage
	initErr  error
}

// Start runs the CLI, writes the initialize request as its first stdin line
// and returns without waiting for the answer (as the SDK does). When ctx ends
// the process is stopped with Stop. Start fails only if the process cannot
// be started.
func Start(ctx context.Context, opts Options) (*Process, error) {
	if opts.Path == "" {
		return nil, errors.New("start claude: no executable")
	}
	cmd := exec.Command(opts.Path, opts.Args...)
	cmd.Dir = opts.Dir
	cmd.Env = append([]string{}, opts.Env...) // never nil: nil would inherit
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start claude: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start claude: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("start claude: %w", err)
	}
	cmd.Stdout = outW
	cmd.Stderr = errW
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, fmt.Errorf("start claude: %w", err)
	}
	outW.Close()
	errW.Close()

	stopWait := opts.StopWait
	if stopWait <= 0 {
		stopWait = DefaultStopWait
	}
	p := &Process{
		cmd:      cmd,
		log:      opts.Logger.With().Int("pid", cmd.Process.Pid).Logger(),
		stdin:    stdin,
		stdout:   outR,
		stderr:   errR,
		msgs:     make(chan Message, 64),
		done:     make(chan struct{}),
		hooks:    make(map[string]HookFunc),
		canUse:   opts.CanUseTool,
		stopWait: stopWait,
		tee:      opts.Stderr,
		pending:  make(map[string]chan ControlResponse),
		inflight: make(map[string]context.CancelFunc),
		initDone: make(chan struct{}),
	}
	if p.canUse == nil {
		p.canUse = AllowAll
	}
	p.hctx, p.hcancel = context.WithCancel(context.Background())

	init := initializeRequest{Subtype: ControlInitialize, AppendSystemPrompt: opts.AppendSystemPrompt}
	for i, h := range opts.Hooks {
		id := fmt.Sprintf("hook_%d", i)
		p.hooks[id] = h.Func
		if init.Hooks == nil {
			init.Hooks = make(map[HookEvent][]hookMatcher)
		}
		init.Hooks[h.Event] = append(init.Hooks[h.Event], hookMatcher{
			Matcher:         h.Matcher,
			HookCallbackIDs: []string{id},
			Timeout:         int(h.Timeout / time.Second),
		})
	}

	// Both helpers are counted before supervise can reach wg.Wait.
	p.wg.Add(2)
	stdoutDone := make(chan struct{})
	stderrDone := make(chan struct{})
	go p.readStdout(stdoutDone)
	go p.readStderr(stderrDone)
	go p.supervise(stdoutDone, stderrDone)

	initCh, err := p.sendRequest(init.Subtype, init)
	go p.awaitInit(initCh, err)
	go func() {
		defer p.wg.Done()
		select {
		case <-ctx.Done():
			if err := p.Stop(p.stopWait, p.stopWait); err != nil {
				p.log.Debug().Err(err).Msg("claude stopped")
			}
		case <-p.done:
		}
	}()
	return p, nil
}

// Pid is the process id (and process group id) of the CLI.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Messages delivers every stdout message except the control protocol, which
// the Process handles itself. It is closed once the process has exited.
func (p *Process) Messages() <-chan Message { return p.msgs }

// Err waits until the process has exited and its output was read, and
// returns its exit error (nil for exit status 0).
func (p *Process) Err() error {
	<-p.done
	return p.waitErr
}

// ExitCode waits like Err and returns the exit status (-1 if killed by a
// signal).
func (p *Process) ExitCode() int {
	<-p.done
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// StderrTail returns the last lines the CLI wrote to stderr.
func (p *Process) StderrTail() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.stderrTail...)
}

// SessionID returns the latest session id seen on stdout.
func (p *Process) SessionID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sessionID
}

// LastAssistantUUID returns the uuid of the last top-level assistant message
// (the point to resume at with --resume-session-at).
func (p *Process) LastAssistantUUID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastUUID
}

// SendUser writes a user message with string content, exactly as the SDK
// does. It does not block on the CLI beyond the pipe write.
func (p *Process) SendUser(text string) error {
	return p.writeLine(userLine{
		Type:    "user",
		Message: userPayload{Role: "user", Content: text},
	})
}

// CloseInput closes the CLI's stdin: "no more input". The CLI finishes the
// turn in flight, prints its result and exits. Control requests arriving
// after this cannot be answered, so close when the CLI is idle.
func (p *Process) CloseInput() error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.inputClosed {
		return nil
	}
	p.inputClosed = true
	if err := p.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("close claude stdin: %w", err)
	}
	return nil
}

// Stop ends the process: it closes stdin and waits up to eofWait, then sends
// SIGTERM to the process group and waits up to termWait, then sends SIGKILL.
// It returns the exit error.
func (p *Process) Stop(eofWait, termWait time.Duration) error {
	if err := p.CloseInput(); err != nil {
		p.log.Debug().Err(err).Msg("close stdin on stop")
	}
	if p.waitFor(eofWait) {
		return p.waitErr
	}
	p.log.Info().Dur("waited", eofWait).Msg("claude still running after stdin closed; sending SIGTERM")
	p.signal(syscall.SIGTERM)
	if p.waitFor(termWait) {
		return p.waitErr
	}
	p.log.Warn().Dur("waited", termWait).Msg("claude ignored SIGTERM; sending SIGKILL")
	p.signal(syscall.SIGKILL)
	<-p.done
	return p.waitErr
}

func (p *Process) signal(sig syscall.Signal) {
	pid := p.cmd.Process.Pid
	select {
	case <-p.done:
		return
	default:
	}
	if err := syscall.Kill(-pid, sig); err != nil {
		// Fall back to the process alone (group already gone).
		_ = p.cmd.Process.Signal(sig)
	}
}

func (p *Process) waitFor(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// writeLine marshals v as one JSON line and writes it under the write lock.
// Marshalling guarantees a well-formed line: the CLI dies on a bad one.
func (p *Process) writeLine(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode appends '\n'
		return fmt.Errorf("encode claude input: %w", err)
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.inputClosed {
		return ErrInputClosed
	}
	select {
	case <-p.done:
		return ErrExited
	default:
	}
	if _, err := p.stdin.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write claude input: %w", err)
	}
	return nil
}

// supervise waits for the process, lets the readers finish, and closes the
// message channel and Done.
func (p *Process) supervise(stdoutDone, stderrDone chan struct{}) {
	err := p.cmd.Wait()
	for _, r := range []struct {
		done chan struct{}
		f    *os.File
	}{{stdoutDone, p.stdout}, {stderrDone, p.stderr}} {
		t := time.NewTimer(pipeDrainWait)
		select {
		case <-r.done:
		case <-t.C:
			// A leftover child holds the pipe open: stop reading.
			r.f.Close()
			<-r.done
		}
		t.Stop()
	}
	p.mu.Lock()
	p.waitErr = err
	p.mu.Unlock()
	p.hcancel()
	close(p.done)
	p.wg.Wait()
	close(p.msgs)
}

func (p *Process) readStderr(done chan struct{}) {
	defer close(done)
	defer p.stderr.Close()
	sc := bufio.NewScanner(p.stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p.tee != nil {
			fmt.Fprintln(p.tee, line)
		}
		p.mu.Lock()
		p.stderrTail = append(p.stderrTail, line)
		if len(p.stderrTail) > stderrTailLines {
			p.stderrTail = p.stderrTail[len(p.stderrTail)-stderrTailLines:]
		}
		p.mu.Unlock()
		p.log.Info().Str("line", line).Msg("claude stderr")
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one '\n'-terminated line of at most max bytes. A longer line
// is consumed and reported as errLineTooLong.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		frag, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(frag) > max {
				tooLong = true
				line = nil
			} else {
				line = append(line, frag...)
			}
		}
		switch {
		case err == nil:
			if tooLong {
				return nil, errLineTooLong
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			if tooLong {
				return nil, errLineTooLong
			}
			if len(line) > 0 && errors.Is(err, io.EOF) {
				return line, nil
			}
			return nil, err
		}
	}
}

func (p *Process) readStdout(done chan struct{}) {
	defer close(done)
	defer p.stdout.Close()
	r := bufio.NewReaderSize(p.stdout, 256<<10)
	for {
		line, err := readLine(r, MaxLineBytes)
		if errors.Is(err, errLineTooLong) {
			p.log.Warn().Int("max_bytes", MaxLineBytes).Msg("claude stdout line too long; dropped")
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				p.log.Warn().Err(err).Msg("read claude stdout")
			}
			return
		}
		p.dispatch(line)
	}
}
