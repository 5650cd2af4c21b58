package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/media"
	"github.com/bridged-app/bridged/internal/store"
)

// Local is the local channel as the server uses it.
type Local interface {
	// Post stores a message from sender in chat through the router and
	// returns its id once committed; with media (files in the uploads
	// spool), one message per file, the first captioned with text. The ids
	// are those committed, in order, also when an error stops the rest.
	Post(ctx context.Context, chat, sender, text string, media ...channel.Media) ([]store.MessageID, error)
	// PostAs is Post from another member of the chat, named name: not the
	// owner, so the group's allow list decides whether it may wake the
	// agent (store.ErrNotAllowed when the group drops it).
	PostAs(ctx context.Context, chat, name, text string, media ...channel.Media) ([]store.MessageID, error)
	// Wait returns a channel closed when the next message is stored in any
	// local chat after the call. It does not block.
	Wait(ctx context.Context) <-chan struct{}
}

// StatusSource reports the daemon's live state (containers, queue, runs that
// failed for good). It must not block.
type StatusSource interface {
	Live() Live
}

// GroupSyncer learns about changed groups (the IPC host watches the
// directories of registered groups). It may block briefly.
type GroupSyncer interface {
	SyncGroups(ctx context.Context) error
}

// SessionEnder is a GroupSyncer that also ends a group's Claude session in
// the running daemon (the router's EndSession), so that its next turn
// starts a new one: a live container of the group is closed at once if
// idle, else when its turn ends. It returns what the owner is told of the
// container (AppliesNext when none runs) and does not wait for it; a group
// that is not registered is store.ErrNotFound.
type SessionEnder interface {
	EndSession(ctx context.Context, folder string) (string, error)
}

// SettingsApplier is a GroupSyncer that also brings a changed group's
// settings to its running agent (the router's ApplySettings): its
// container, when started with other settings, is closed at once if idle,
// else when its turn ends. It returns what the owner is told of it
// (AppliesNext when nothing runs) and does not wait for the container.
type SettingsApplier interface {
	ApplySettings(ctx context.Context, folder string) (string, error)
}

// AppliesNext is how a change reaches a group's agent when none runs: from
// the next message.
const AppliesNext = "applies from the next message"

// Waker is told that tasks changed (the scheduler recomputes its sleep).
// It does not block.
type Waker interface {
	Wake()
}

// DefaultMaxWait is the longest a long-poll may wait.
const DefaultMaxWait = 60 * time.Second

// shutdownGrace bounds how long Run waits for requests in flight.
const shutdownGrace = 5 * time.Second

// Options configure a Server.
type Options struct {
	Socket string // <home>/bridged.sock
	// Dashboard, when set, builds the web dashboard served under
	// /dashboard/; nil: none (its routes answer 404).
	Dashboard NewDashboard
	Admin     *Admin
	Local     Local             // nil: the chat endpoints answer 503
	Turns     Turns             // nil: the turn endpoint answers 503
	Holds     Holds             // nil: a held turn is not told before the wait ends
	Status    StatusSource      // nil: no live part in /v1/status
	Channels  []channel.Channel // for status and metrics
	Groups    GroupSyncer       // nil: nobody to tell
	Tasks     Waker             // nil: nobody to tell
	Config    ConfigSource      // nil: GET /v1/config answers 503
	// Approvals settles the approval requests; nil: its endpoints answer
	// 503.
	Approvals Approvals
	Version   string
	Instance  string
	Log       zerolog.Logger
	MaxWait   time.Duration // 0: DefaultMaxWait
	// Uploads is the spool files attached to posted messages are kept in
	// until the media worker takes them (home.Home.Uploads); nil: posting
	// files answers 503.
	Uploads *home.Spool
	// MaxUpload is the largest attached file (0: DefaultMaxUpload).
	MaxUpload int64
}

// DefaultMaxUpload is the largest attached file when Options.MaxUpload is
// not set: the media worker's own default limit.
const DefaultMaxUpload = media.DefaultMaxBytes

// Server is the control API on a unix socket (mode 0600).
type Server struct {
	opts     Options
	log      zerolog.Logger
	ln       net.Listener
	fi       os.FileInfo // the socket file we created
	srv      *http.Server
	started  time.Time
	stopping chan struct{}
	dash     dashboardHolder

	// fresh holds the connections that have not sent a request yet; Run
	// closes them when it stops (see Run).
	freshMu sync.Mutex
	fresh   map[net.Conn]struct{}
}

// Listen creates the socket and the server; Run serves it. A socket file left
// by a daemon that died is replaced; when another daemon answers on it,
// Listen fails with ErrAlreadyRunning and leaves it alone.
func Listen(opts Options) (*Server, error) {
	if opts.Admin == nil || opts.Admin.DB == nil {
		return nil, errors.New("control server: no store")
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.MaxUpload <= 0 {
		opts.MaxUpload = DefaultMaxUpload
	}
	ln, fi, err := listenUnix(opts.Socket)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:     opts,
		log:      opts.Log.With().Str("component", "control").Logger(),
		ln:       ln,
		fi:       fi,
		started:  time.Now(),
		stopping: make(chan struct{}),
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState:         s.connState,
	}
	if opts.Dashboard != nil {
		d, err := opts.Dashboard(s)
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		s.dash.Store(&d)
	}
	return s, nil
}

// CheckNotRunning returns an error wrapping ErrAlreadyRunning when a daemon
// answers on the socket at path, nil otherwise. The daemon calls it before
// anything else so that a second daemon on the same home stops early; Listen
// checks again.
func CheckNotRunning(path string) error {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return nil
	}
	c.Close()
	return fmt.Errorf("%w: it answers on %s", ErrAlreadyRunning, path)
}

// listenUnix listens on path with mode 0600 from the first moment: it binds a
// temporary name in the same directory, restricts it, then renames it.
func listenUnix(path string) (net.Listener, os.FileInfo, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, nil, fmt.Errorf("control socket %s exists and is not a socket", path)
		}
		if err := CheckNotRunning(path); err != nil {
			return nil, nil, err
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("remove stale control socket: %w", err)
		}
	}
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".bs%d", os.Getpid()))
	if len(tmp) > 107 || len(path) > 107 {
		return nil, nil, fmt.Errorf("control socket path %s is too long for a unix socket (107 bytes at most): choose a shorter home directory", path)
	}
	_ = os.Remove(tmp)
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on control socket: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, os.FileInfo, error) {
		ln.Close()
		os.Remove(tmp)
		return nil, nil, fmt.Errorf("listen on control socket: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	return ln, fi, nil
}

func (s *Server) removeSocket() {
	if fi, err := os.Lstat(s.opts.Socket); err == nil && os.SameFile(fi, s.fi) {
		if err := os.Remove(s.opts.Socket); err != nil {
			s.log.Warn().Err(err).Msg("remove control socket")
		}
	}
}

// Close releases a server that will not be Run (the daemon's start-up failed
// after Listen): it closes the socket and removes its file, so no client
// connects to a daemon that is not there. It must not be called with Run.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.removeSocket()
	return err
}

// connState keeps the set of connections that have sent no request.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	s.freshMu.Lock()
	defer s.freshMu.Unlock()
	if st == http.StateNew {
		if s.fresh == nil {
			s.fresh = map[net.Conn]struct{}{}
		}
		s.fresh[c] = struct{}{}
		return
	}
	delete(s.fresh, c)
}

// closeFresh closes the connections that have sent no request.
func (s *Server) closeFresh() {
	s.freshMu.Lock()
	defer s.freshMu.Unlock()
	for c := range s.fresh {
		_ = c.Close()
		delete(s.fresh, c)
	}
}

// Run serves until ctx ends, then ends long-polls, waits briefly for requests
// in flight and removes the socket.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	s.log.Info().Str("socket", s.opts.Socket).Msg("control api listening")
	select {
	case err := <-errc:
		s.removeSocket()
		return fmt.Errorf("control server: %w", err)
	case <-ctx.Done():
	}
	close(s.stopping)
	// A connection that has sent no request yet is not a request in
	// flight, but http.Server.Shutdown waits up to 5 s for it (as long as
	// the grace): a client that had just connected would fail the stop.
	// Such connections are closed first; the requests in flight finish.
	s.closeFresh()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	<-errc
	s.removeSocket()
	if err != nil {
		return fmt.Errorf("control server shutdown: %w", err)
	}
	return nil
}
