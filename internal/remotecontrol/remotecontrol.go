// Package remotecontrol answers `/remote-control` in the main chat: it
// starts a host-level `claude remote-control` session and sends the link it
// prints back into the chat, so the owner can drive Claude Code on this
// machine from claude.ai/code or the Claude app. One session at a time;
// `/remote-control stop` (or `/remote-control-end`) ends it, and its own end
// is told in the chat.
//
// Only the owner's own messages (FromMe, not IsBot) in the main chat start
// or stop it, and only when the owner turned it on (BRIDGED_REMOTE_CONTROL);
// anyone else, or the owner while it is off, is told why in the chat. The
// command is taken out before storage: it never reaches an agent.
//
// The CLI runs on the host with the login of the user bridged runs as
// (`claude auth login`): bridged hands it no credential, and its own Claude
// credentials are removed from the CLI's environment. It runs in a
// directory of its own that no container mounts, so nothing an agent
// writes is read by it as project settings or memory.
package remotecontrol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/termsafe"
)

// Poster commits bridged's own messages to a chat's outbox (the daemon's
// outbox poster). It does not block for long; an error means nothing was
// committed.
type Poster interface {
	SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error)
}

// Groups finds the main group (store.GroupQuery). It returns store.ErrNotFound
// when there is none.
type Groups interface {
	Main(ctx context.Context) (store.Group, error)
}

// Setting is the variable that turns remote control on.
const Setting = "BRIDGED_REMOTE_CONTROL"

// DefaultURLTimeout is how long the CLI may take to print its link.
const DefaultURLTimeout = 30 * time.Second

// stopGrace is how long a stopped CLI has between SIGTERM and SIGKILL.
const stopGrace = 5 * time.Second

// refuseEvery spaces the refusals told to members who are not the owner:
// one at most in this long, so nobody floods the owner's main chat.
const refuseEvery = time.Minute

// SessionName is the name the session shows under at claude.ai/code.
const SessionName = "bridged"

// Config is what a Service needs.
type Config struct {
	// Enabled is BRIDGED_REMOTE_CONTROL: off, every command is refused
	// with how to turn it on.
	Enabled bool
	// CLI is the claude CLI run on the host (a path, or a name looked up
	// in PATH).
	CLI string
	// Dir is the session's working directory, made (0700) when missing.
	Dir string
	// Env is the environment the CLI starts from (the daemon's): what
	// Environ leaves of it is the CLI's.
	Env []string
	// URLTimeout bounds the wait for the link (DefaultURLTimeout when 0).
	URLTimeout time.Duration
	Groups     Groups
	Post       Poster
	Log        zerolog.Logger
	Now        func() time.Time // nil: time.Now
}

// Service runs at most one remote-control session. It is safe for
// concurrent use; Close ends it.
type Service struct {
	cfg    Config
	log    zerolog.Logger
	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards the fields below; it is never held across a post or a
	// wait for the CLI.
	mu        sync.Mutex
	sess      *session // nil: none starting or running
	refusedAt time.Time
}

// session is one CLI process, from its start to its end.
type session struct {
	url     string        // "" until the link was printed
	stop    chan struct{} // closed when the owner (or Close) ends it
	stopped bool          // stop is closed
}

// New builds a Service.
func New(cfg Config) (*Service, error) {
	switch {
	case cfg.Groups == nil:
		return nil, errors.New("new remote control: no groups")
	case cfg.Post == nil:
		return nil, errors.New("new remote control: no poster")
	case cfg.Enabled && (CheckCLI(cfg.CLI) != nil || cfg.Dir == ""):
		return nil, errors.New("new remote control: no CLI or working directory")
	}
	if cfg.URLTimeout <= 0 {
		cfg.URLTimeout = DefaultURLTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{cfg: cfg, log: cfg.Log.With().Str("component", "remote-control").Logger(), ctx: ctx, cancel: cancel}
	if cfg.Enabled {
		s.log.Info().Str("cli", cfg.CLI).Msg("remote control is on: the owner's /remote-control in the main chat starts a claude session on this machine")
	}
	return s, nil
}

// Close ends the session, if any, and waits for it to be gone. Nothing is
// posted: bridged is stopping.
func (s *Service) Close() {
	s.cancel()
	s.mu.Lock()
	if s.sess != nil {
		s.sess.end()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (se *session) end() {
	if !se.stopped {
		se.stopped = true
		close(se.stop)
	}
}

// Command is a remote-control command read from a message.
type Command int

// The commands.
const (
	Start Command = iota + 1
	Stop
	Usage // `/remote-control` with words it does not take
)

// Parse reads a remote-control command from a message's own text:
// `/remote-control`, `/remote-control stop` (or end, off) and NanoClaw's
// `/remote-control-end`. Case and surrounding space do not matter.
func Parse(text string) (Command, bool) {
	words := strings.Fields(strings.ToLower(text))
	if len(words) == 0 {
		return 0, false
	}
	switch words[0] {
	case "/remote-control-end":
		if len(words) == 1 {
			return Stop, true
		}
		return Usage, true
	case "/remote-control":
	default:
		return 0, false
	}
	switch {
	case len(words) == 1:
		return Start, true
	case len(words) == 2 && (words[1] == "stop" || words[1] == "end" || words[1] == "off"):
		return Stop, true
	}
	return Usage, true
}

// The replies.
const (
	replyOff = "Remote control is off. To turn it on, the owner sets " + Setting + "=true in bridged's env file (or environment) and restarts bridged; " +
		"the machine's `claude` CLI must be logged in to a claude.ai account (`claude auth login`)."
	replyNotOwner = "Only the owner can use /remote-control, from their own messages in this chat."
	replyUsage    = "Usage: /remote-control starts a session and sends its link; /remote-control stop ends it."
	replyStarting = "Remote control is starting; its link follows."
	replyNone     = "Remote control is not running."
	replyEnded    = "Remote control session ended."
	replyGone     = "Remote control session ended: the claude CLI exited."
)

// Take answers a remote-control command in the inbound message m: it
// reports true when m must not be stored (it was a command in the main
// chat, answered or refused there). Anything else, and a command outside
// the main chat, is an ordinary message. It does not block for long: a
// session starts in the background.
func (s *Service) Take(ctx context.Context, m channel.Message) bool {
	if m.Reaction != nil || m.IsBot {
		return false
	}
	cmd, ok := Parse(m.OwnText())
	if !ok {
		return false
	}
	main, err := s.cfg.Groups.Main(ctx)
	if err != nil || string(main.Chat) != m.Chat {
		return false
	}
	log := s.log.With().Str("chat", m.Chat).Logger()
	if !m.FromMe {
		s.mu.Lock()
		now := s.cfg.Now()
		quiet := !s.refusedAt.IsZero() && now.Sub(s.refusedAt) < refuseEvery
		if !quiet {
			s.refusedAt = now
		}
		s.mu.Unlock()
		log.Warn().Str("sender", m.Sender).Msg("remote control refused: not the owner")
		if !quiet {
			s.reply(ctx, m.Chat, replyNotOwner)
		}
		return true
	}
	if cmd == Usage {
		s.reply(ctx, m.Chat, replyUsage)
		return true
	}
	if !s.cfg.Enabled {
		log.Info().Msg("remote control refused: turned off")
		s.reply(ctx, m.Chat, replyOff)
		return true
	}
	if cmd == Stop {
		// A session already told to stop counts as none: its run may have
		// posted its end and not yet let go of s.sess, and the owner's
		// second stop must still get an answer.
		s.mu.Lock()
		se := s.sess
		running := se != nil && !se.stopped
		if running {
			se.end() // its run posts the end once the CLI is gone
		}
		s.mu.Unlock()
		if !running {
			s.reply(ctx, m.Chat, replyNone)
		}
		return true
	}
	s.mu.Lock()
	if se := s.sess; se != nil {
		url := se.url
		s.mu.Unlock()
		if url == "" {
			s.reply(ctx, m.Chat, replyStarting)
		} else {
			s.reply(ctx, m.Chat, "Remote control is already running: "+url)
		}
		return true
	}
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		return true // stopping: nothing starts
	}
	se := &session{stop: make(chan struct{})}
	s.sess = se
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				log.Error().Interface("panic", p).Msg("remote control session panicked")
			}
			s.release(se)
		}()
		s.run(se, m.Chat, log)
	}()
	return true
}

// run starts the CLI for se, posts its link to chat, and waits for its end
// (the owner's stop, Close, or its own), which it posts too.
func (s *Service) run(se *session, chat string, log zerolog.Logger) {
	if err := os.MkdirAll(s.cfg.Dir, 0o700); err != nil {
		log.Error().Err(err).Msg("cannot make the remote control directory")
		s.endReply(se, chat, "Remote control failed: its working directory cannot be made.")
		return
	}
	found := make(chan string, 1)
	out := &linkWatcher{found: found}
	errTail := &tail{max: 2048}
	cmd := exec.Command(s.cfg.CLI, "remote-control", "--name", SessionName)
	cmd.Dir = s.cfg.Dir
	cmd.Env = Environ(s.cfg.Env)
	// Enable Remote Control? (y/n): the owner asked for it.
	cmd.Stdin = strings.NewReader("y\n")
	cmd.Stdout, cmd.Stderr = out, errTail
	cmd.SysProcAttr = procAttr()
	cmd.WaitDelay = stopGrace
	if err := cmd.Start(); err != nil {
		log.Warn().Err(err).Str("cli", s.cfg.CLI).Msg("cannot start the claude CLI for remote control")
		why := "it cannot be started"
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			why = fmt.Sprintf("the claude CLI (%s) is not found on this machine; install Claude Code, log in with `claude auth login`, or set BRIDGED_REMOTE_CONTROL_CLI to its path", s.cfg.CLI)
		}
		s.endReply(se, chat, "Remote control failed: "+why+".")
		return
	}
	pid := cmd.Process.Pid
	log = log.With().Int("pid", pid).Logger()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ended := func() error { // the CLI's end, after SIGTERM then SIGKILL to its group
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(stopGrace):
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return <-exited
	}
	timer := time.NewTimer(s.cfg.URLTimeout)
	defer timer.Stop()
	select {
	case url := <-found:
		s.mu.Lock()
		se.url = url
		s.mu.Unlock()
		log.Info().Msg("remote control session started")
		s.reply(s.ctx, chat, "Remote control: "+url+"\nSend /remote-control stop to end it.")
	case err := <-exited:
		log.Warn().Err(err).Msg("the claude CLI exited before it printed a remote control link")
		s.endReply(se, chat, "Remote control failed: the claude CLI exited before it printed a link"+errTail.why()+".")
		return
	case <-timer.C:
		_ = ended()
		log.Warn().Msg("no remote control link in time; the claude CLI was stopped")
		s.endReply(se, chat, fmt.Sprintf("Remote control failed: the claude CLI printed no link within %s%s.", s.cfg.URLTimeout, errTail.why()))
		return
	case <-se.stop:
		_ = ended()
		log.Info().Msg("remote control stopped before its link")
		if s.ctx.Err() == nil {
			s.endReply(se, chat, replyEnded)
		}
		return
	}
	select {
	case err := <-exited:
		log.Info().Err(err).Msg("remote control session ended by itself")
		s.endReply(se, chat, replyGone)
	case <-se.stop:
		_ = ended()
		log.Info().Msg("remote control session stopped")
		if s.ctx.Err() == nil {
			s.endReply(se, chat, replyEnded)
		}
	}
}

// endReply lets go of se, then posts text, the session's last word, to
// chat: once the owner reads it, the next command finds no session.
func (s *Service) endReply(se *session, chat, text string) {
	s.release(se)
	s.reply(s.ctx, chat, text)
}

// release lets go of se if it is still the session.
func (s *Service) release(se *session) {
	s.mu.Lock()
	if s.sess == se {
		s.sess = nil
	}
	s.mu.Unlock()
}

// reply posts text to chat as a notice of bridged's.
func (s *Service) reply(ctx context.Context, chat, text string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := s.cfg.Post.SendMessage(ctx, chat, text, store.OriginNotice, ""); err != nil {
		s.log.Warn().Err(err).Str("chat", chat).Msg("remote control reply not posted")
	}
}

// linkRE is the session link the CLI prints ("Session URL:
// https://claude.ai/code?bridge=env_…"): URL characters only, so a colour
// escape around it is left out.
var linkRE = regexp.MustCompile(`https://claude\.ai/code[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*`)

// linkWatcher is the CLI's stdout: it sends the first link on found and
// keeps only the last few kilobytes it needs to find one split across
// writes.
type linkWatcher struct {
	mu    sync.Mutex
	buf   []byte
	found chan<- string
	sent  bool
}

func (w *linkWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	// A link ends at a character that is not a URL's; one still at the
	// end of what came may go on in the next write.
	if loc := linkRE.FindIndex(w.buf); loc != nil && loc[1] < len(w.buf) {
		w.sent = true
		w.found <- string(w.buf[loc[0]:loc[1]])
		w.buf = nil
		return len(p), nil
	}
	if len(w.buf) > 8192 {
		w.buf = w.buf[len(w.buf)-4096:]
	}
	return len(p), nil
}

// tail keeps the last max bytes written: the CLI's stderr, for a failure's
// reason.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// why is ": <the last line the CLI wrote on stderr>", made safe and short,
// or "" when it wrote none.
func (t *tail) why() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	last := strings.TrimRight(strings.TrimSpace(termsafe.Line(lines[len(lines)-1])), ".")
	if last == "" {
		return ""
	}
	if r := []rune(last); len(r) > 300 {
		last = string(r[:300]) + "…"
	}
	return ": " + last
}

// Environ is the CLI's environment: env without bridged's own settings and
// without any Claude credential or endpoint (ANTHROPIC_*, CLAUDE_CODE_OAUTH_*),
// so the CLI uses the claude.ai login of the user it runs as
// (remote control takes no API key nor long-lived token) and no secret of
// bridged's reaches it.
func Environ(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		u := strings.ToUpper(k)
		if strings.HasPrefix(u, "BRIDGED_") || strings.HasPrefix(u, "ANTHROPIC_") || strings.HasPrefix(u, "CLAUDE_CODE_OAUTH_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

var _ io.Writer = (*linkWatcher)(nil)
