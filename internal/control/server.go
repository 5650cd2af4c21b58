package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
)

// Local is the local channel as the server uses it.
type Local interface {
	// Post stores a message from sender in chat through the router and
	// returns its id once committed.
	Post(ctx context.Context, chat, sender, text string) (store.MessageID, error)
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

// Waker is told that tasks changed (the scheduler recomputes its sleep).
// It does not block.
type Waker interface {
	Wake()
}

// DefaultMaxWait is the longest a long-poll may wait.
const DefaultMaxWait = 60 * time.Second

// maxBody caps request bodies.
const maxBody = 1 << 20

// maxText caps a posted message's text.
const maxText = 64 << 10

// shutdownGrace bounds how long Run waits for requests in flight.
const shutdownGrace = 5 * time.Second

// Options configure a Server.
type Options struct {
	Socket   string // <home>/bridged.sock
	Admin    *Admin
	Local    Local             // nil: the chat endpoints answer 503
	Status   StatusSource      // nil: no live part in /v1/status
	Channels []channel.Channel // for status and metrics
	Groups   GroupSyncer       // nil: nobody to tell
	Tasks    Waker             // nil: nobody to tell
	Version  string
	Instance string
	Log      zerolog.Logger
	MaxWait  time.Duration // 0: DefaultMaxWait
}

// Server is the control API on a unix socket (mode 0600).
type Server struct {
	opts     Options
	log      zerolog.Logger
	ln       net.Listener
	fi       os.FileInfo // the socket file we created
	srv      *http.Server
	started  time.Time
	stopping chan struct{}
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

// Close releases the socket of a server whose Run was never called.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.removeSocket()
	return err
}

func (s *Server) removeSocket() {
	if fi, err := os.Lstat(s.opts.Socket); err == nil && os.SameFile(fi, s.fi) {
		if err := os.Remove(s.opts.Socket); err != nil {
			s.log.Warn().Err(err).Msg("remove control socket")
		}
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

// Handler is the API's HTTP handler (exported for tests).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/groups", s.listGroups)
	mux.HandleFunc("POST /v1/groups", s.addGroup)
	mux.HandleFunc("DELETE /v1/groups/{folder}", s.removeGroup)
	mux.HandleFunc("PATCH /v1/groups/{folder}", s.updateGroup)
	mux.HandleFunc("GET /v1/chats", s.listChats)
	mux.HandleFunc("GET /v1/tasks", s.listTasks)
	mux.HandleFunc("POST /v1/tasks/{id}/{action}", s.taskAction)
	mux.HandleFunc("GET /v1/tasks/{id}/runs", s.taskRuns)
	mux.HandleFunc("POST /v1/chats/{chat}/messages", s.postMessage)
	mux.HandleFunc("GET /v1/chats/{chat}/messages", s.getMessages)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return s.middleware(mux)
}

// statusRecorder remembers the status code for the access log.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error().Str("method", r.Method).Str("path", r.URL.Path).Interface("panic", p).Msg("control handler panicked")
				writeError(rec, http.StatusInternalServerError, errors.New("internal error"))
			}
			s.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Int("status", rec.code).
				Dur("duration", time.Since(start)).Msg("control request")
		}()
		next.ServeHTTP(rec, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, errorBody{Error: err.Error()})
}

// codeOf maps an error class to an HTTP status.
func codeOf(err error) int {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrExists), errors.Is(err, store.ErrMainExists), errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, ErrInvalid), errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrInvalidFolder),
		errors.Is(err, schedule.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotRunning):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := codeOf(err)
	if code == http.StatusInternalServerError {
		s.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("control request failed")
	}
	writeError(w, code, err)
}

// decode reads a JSON body into v, rejecting unknown fields and trailing data.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: request body: %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: request body: more than one JSON value", ErrInvalid)
	}
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Status assembles the full status: the store's part and the live part.
func (s *Server) Status(ctx context.Context) (Status, error) {
	st, err := s.opts.Admin.Status(ctx)
	if err != nil {
		return Status{}, err
	}
	st.Running = true
	st.Daemon = &Daemon{PID: os.Getpid(), Version: s.opts.Version, Instance: s.opts.Instance, Started: s.started}
	for _, c := range s.opts.Channels {
		cs := c.Status()
		st.Channels = append(st.Channels, ChannelStatus{Name: c.Name(), State: string(cs.State), Detail: cs.Detail, Since: cs.Since})
	}
	if s.opts.Status != nil {
		live := s.opts.Status.Live()
		st.Containers = live.Containers
		st.Queue = live.Queue
		st.APIUsage = live.APIUsage
		seen := make(map[Failure]bool, len(st.Failures))
		for _, f := range st.Failures {
			seen[Failure{Kind: f.Kind, Where: f.Where, Error: f.Error}] = true
		}
		for _, f := range live.Failures {
			// A failed task run is in the store's run log too.
			if !seen[Failure{Kind: f.Kind, Where: f.Where, Error: f.Error}] {
				st.Failures = append(st.Failures, f)
			}
		}
		st.Failures = sortFailures(st.Failures)
	}
	return st, nil
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.Status(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) syncGroups(ctx context.Context) {
	if s.opts.Groups != nil {
		if err := s.opts.Groups.SyncGroups(ctx); err != nil {
			s.log.Warn().Err(err).Msg("sync groups after change")
		}
	}
}

func (s *Server) wakeTasks() {
	if s.opts.Tasks != nil {
		s.opts.Tasks.Wake()
	}
}

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) {
	gs, err := s.opts.Admin.Groups(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, gs)
}

func (s *Server) addGroup(w http.ResponseWriter, r *http.Request) {
	var req GroupAdd
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	g, err := s.opts.Admin.AddGroup(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info().Str("group", g.Folder).Str("chat", g.Chat).Bool("main", g.IsMain).Msg("group registered")
	s.syncGroups(r.Context())
	writeJSON(w, http.StatusCreated, g)
}

func (s *Server) removeGroup(w http.ResponseWriter, r *http.Request) {
	folder := r.PathValue("folder")
	if err := s.opts.Admin.RemoveGroup(r.Context(), folder); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info().Str("group", folder).Msg("group removed")
	s.syncGroups(r.Context())
	s.wakeTasks()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) updateGroup(w http.ResponseWriter, r *http.Request) {
	var p GroupPatch
	if err := decode(w, r, &p); err != nil {
		s.fail(w, r, err)
		return
	}
	g, err := s.opts.Admin.UpdateGroup(r.Context(), r.PathValue("folder"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info().Str("group", g.Folder).Msg("group updated")
	s.syncGroups(r.Context())
	writeJSON(w, http.StatusOK, g)
}

func (s *Server) listChats(w http.ResponseWriter, r *http.Request) {
	cs, err := s.opts.Admin.Chats(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, cs)
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	ts, err := s.opts.Admin.Tasks(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ts)
}

func (s *Server) taskAction(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	ctx := r.Context()
	var (
		t   Task
		err error
	)
	switch action {
	case "pause":
		t, err = s.opts.Admin.PauseTask(ctx, id)
	case "resume":
		t, err = s.opts.Admin.ResumeTask(ctx, id)
	case "cancel":
		err = s.opts.Admin.CancelTask(ctx, id)
	default:
		writeError(w, http.StatusNotFound, fmt.Errorf("unknown task action %q: want pause, resume or cancel", action))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info().Str("task", id).Str("action", action).Msg("task changed")
	s.wakeTasks()
	if action == "cancel" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) taskRuns(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a whole number", v))
			return
		}
		limit = n
	}
	runs, err := s.opts.Admin.TaskRuns(r.Context(), r.PathValue("id"), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, runs)
}

// localChat checks that the path's chat is a registered local chat.
func (s *Server) localChat(ctx context.Context, chat string) error {
	if !IsLocalChat(chat) {
		return fmt.Errorf("%w: chat %q is not a local chat (local:<name>)", ErrInvalid, chat)
	}
	if _, err := s.opts.Admin.DB.GetGroupByChat(ctx, store.ChatID(chat)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no group is registered for chat %s: %w", chat, store.ErrNotFound)
		}
		return err
	}
	if s.opts.Local == nil {
		return fmt.Errorf("%w: the local channel is not available", ErrNotRunning)
	}
	return nil
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	chat := r.PathValue("chat")
	var req PostMessage
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	switch {
	case strings.TrimSpace(req.Text) == "":
		s.fail(w, r, fmt.Errorf("%w: the text is empty", ErrInvalid))
		return
	case len(req.Text) > maxText:
		s.fail(w, r, fmt.Errorf("%w: the text is longer than %d bytes", ErrInvalid, maxText))
		return
	}
	if err := s.localChat(r.Context(), chat); err != nil {
		s.fail(w, r, err)
		return
	}
	id, err := s.opts.Local.Post(r.Context(), chat, req.Sender, req.Text)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, Posted{ID: int64(id)})
}

// getMessages answers with the chat's messages after ?after=ID. With
// ?wait=D (at most MaxWait) and nothing to return yet, it waits until a
// message is stored, D passes, or the server stops; then it answers with what
// there is (maybe nothing).
func (s *Server) getMessages(w http.ResponseWriter, r *http.Request) {
	chat := r.PathValue("chat")
	q := r.URL.Query()
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.fail(w, r, fmt.Errorf("%w: after=%q: want a message id", ErrInvalid, v))
			return
		}
		after = n
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			s.fail(w, r, fmt.Errorf("%w: wait=%q: want a Go duration such as 30s", ErrInvalid, v))
			return
		}
		wait = min(d, s.opts.MaxWait)
	}
	ctx := r.Context()
	if err := s.localChat(ctx, chat); err != nil {
		s.fail(w, r, err)
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	expired := wait == 0
	for {
		changed := s.opts.Local.Wait(ctx)
		msgs, err := s.opts.Admin.Messages(ctx, chat, after)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if len(msgs) > 0 || expired {
			writeJSON(w, http.StatusOK, Messages{Messages: msgs})
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			expired = true
		case <-s.stopping:
			expired = true
		case <-ctx.Done():
			return
		}
	}
}
