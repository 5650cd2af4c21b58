package ipchost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// MaxRequestBytes bounds a request file; larger files are refused unread.
// Texts are at most ipc.MaxTextBytes, which JSON escaping can grow sixfold.
const MaxRequestBytes = 1 << 20

// requestTimeout bounds the work for one request, below the 30 s the MCP
// tool waits for its answer.
const requestTimeout = 20 * time.Second

// ErrorsDir is the directory under data/ipc where unreadable files go.
const ErrorsDir = "errors"

// Messenger commits a message to the outbox (the router). It returns once
// the row is committed; errors say why nothing was committed.
type Messenger interface {
	SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error)
}

// Waker is told that tasks changed (the scheduler). Wake must not block.
type Waker interface{ Wake() }

// GroupRefresher refreshes chat names from the network (WhatsApp). It blocks
// until done or ctx ends.
type GroupRefresher interface {
	RefreshGroups(ctx context.Context) error
}

// Config configures a Host.
type Config struct {
	Home          string         // bridged home: data/ipc and groups live under it
	Timezone      *time.Location // schedules and answers use it; nil means UTC
	AssistantName string         // the default trigger of registered groups is "@" + this
	// ContainerUID and ContainerGID own a registered group's directories
	// when the daemon runs as root (see container.PrepareGroupDirs). Both 0
	// means container.ContainerUser(): an agent never runs as root.
	ContainerUID, ContainerGID int
	// Sweep is how often every directory is listed even without an
	// inotify event; 0 means ipc.DefaultSweep.
	Sweep time.Duration
}

// Host answers the agents' requests. Create it with New, start it with Run.
type Host struct {
	cfg     Config
	paths   container.Paths
	db      *store.DB
	msg     Messenger
	tasks   Waker
	refresh GroupRefresher
	log     zerolog.Logger
	now     func() time.Time

	// handled, when set (tests), is called after each file was dealt with.
	handled func(folder store.Folder, name string)

	syncMu sync.Mutex // serialises SyncGroups, so a stale list never wins

	mu      sync.Mutex
	w       *ipc.Watcher            // nil unless Run is running
	watched map[string]store.Folder // requests dir → its group
	ran     bool
}

// New returns a host for the groups registered in db. m is required; tasks
// and refresh may be nil (no scheduler to wake, no name refresh).
func New(cfg Config, db *store.DB, m Messenger, tasks Waker, refresh GroupRefresher, log zerolog.Logger) (*Host, error) {
	switch {
	case cfg.Home == "":
		return nil, errors.New("new ipc host: no home directory")
	case db == nil:
		return nil, errors.New("new ipc host: no database")
	case m == nil:
		return nil, errors.New("new ipc host: no messenger")
	case cfg.Sweep < 0:
		return nil, errors.New("new ipc host: negative sweep interval")
	}
	if cfg.Timezone == nil {
		cfg.Timezone = time.UTC
	}
	if cfg.AssistantName == "" {
		cfg.AssistantName = "Andy"
	}
	if cfg.ContainerUID == 0 && cfg.ContainerGID == 0 {
		cfg.ContainerUID, cfg.ContainerGID = container.ContainerUser()
	}
	return &Host{
		cfg:     cfg,
		paths:   container.Paths{Home: cfg.Home},
		db:      db,
		msg:     m,
		tasks:   tasks,
		refresh: refresh,
		log:     log.With().Str("component", "ipchost").Logger(),
		now:     time.Now,
		watched: make(map[string]store.Folder),
	}, nil
}

// Run watches the requests directories of every registered group and answers
// what appears in them, files already there included, until ctx ends. It
// returns nil then, or an error if it cannot start. It may be called once.
func (h *Host) Run(ctx context.Context) error {
	h.mu.Lock()
	if h.ran {
		h.mu.Unlock()
		return errors.New("run ipc host: already started")
	}
	h.ran = true
	h.mu.Unlock()
	w, err := ipc.NewWatcher(h.cfg.Sweep)
	if err != nil {
		return fmt.Errorf("run ipc host: %w", err)
	}
	h.mu.Lock()
	h.w = w
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.w = nil
		clear(h.watched)
		h.mu.Unlock()
	}()

	if err := h.SyncGroups(ctx); err != nil {
		var dirErr *dirError
		if !errors.As(err, &dirErr) {
			w.Close()
			return fmt.Errorf("run ipc host: %w", err)
		}
		h.log.Error().Err(err).Msg("some groups' requests are not watched")
	}
	h.log.Info().Int("groups", h.watchedCount()).Msg("ipc host started")
	return w.Run(ctx, func(dir string) { h.scan(ctx, dir) })
}

func (h *Host) watchedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watched)
}

// dirError reports groups whose directory could not be watched.
type dirError struct{ errs []error }

func (e *dirError) Error() string   { return errors.Join(e.errs...).Error() }
func (e *dirError) Unwrap() []error { return e.errs }

// SyncGroups re-reads the registered groups: it starts watching the requests
// directory of each new group (creating the group's directories if needed)
// and stops watching those of removed groups. Before Run, and after it
// returned, it does nothing but read. Safe for concurrent use.
func (h *Host) SyncGroups(ctx context.Context) error {
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	groups, err := h.db.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("sync groups: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil {
		return nil
	}
	want := make(map[string]store.Folder, len(groups))
	var errs []error
	for _, g := range groups {
		folder := string(g.Folder)
		if err := container.CheckFolder(folder); err != nil {
			errs = append(errs, fmt.Errorf("watch group %s: %w", folder, err))
			continue
		}
		want[h.layout(g.Folder).Requests()] = g.Folder
	}
	for dir, folder := range h.watched {
		if _, ok := want[dir]; ok {
			continue
		}
		delete(h.watched, dir)
		if err := h.w.Remove(dir); err != nil {
			h.log.Debug().Err(err).Str("group", string(folder)).Msg("unwatch requests")
		}
		h.log.Info().Str("group", string(folder)).Msg("stopped watching a removed group's requests")
	}
	for dir, folder := range want {
		if _, ok := h.watched[dir]; ok {
			continue
		}
		if _, err := os.Stat(dir); err != nil {
			// The group's directories with their owners, as before a run.
			// Should that fail (a file vanishing under the walk), the IPC
			// directories alone are enough to watch; the next run's
			// preparation fixes the rest.
			if perr := container.PrepareGroupDirs(h.paths, string(folder), h.cfg.ContainerUID, h.cfg.ContainerGID); perr != nil {
				if err := h.layout(folder).Ensure(); err != nil {
					errs = append(errs, fmt.Errorf("watch group %s: %w", folder, err))
					continue
				}
				h.log.Warn().Err(perr).Str("group", string(folder)).Msg("prepare group directories")
			}
		}
		if err := h.w.Add(dir); err != nil {
			errs = append(errs, fmt.Errorf("watch group %s: %w", folder, err))
			continue
		}
		h.watched[dir] = folder
		h.log.Debug().Str("group", string(folder)).Msg("watching requests")
	}
	if len(errs) > 0 {
		return fmt.Errorf("sync groups: %w", &dirError{errs})
	}
	return nil
}

// scan handles every request file in dir, oldest first.
func (h *Host) scan(ctx context.Context, dir string) {
	h.mu.Lock()
	folder, ok := h.watched[dir]
	h.mu.Unlock()
	if !ok {
		return
	}
	names, err := ipc.List(dir)
	if err != nil {
		h.log.Warn().Err(err).Str("group", string(folder)).Msg("list requests")
		return
	}
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		h.handleFile(ctx, folder, dir, name)
		if h.handled != nil {
			h.handled(folder, name)
		}
	}
}

// handleFile reads, decodes, carries out and answers one request file.
func (h *Host) handleFile(ctx context.Context, folder store.Folder, dir, name string) {
	log := h.log.With().Str("group", string(folder)).Str("file", short(name, 160)).Logger()
	path := filepath.Join(dir, name)
	defer func() {
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("ipc request handling panicked")
			h.quarantine(log, folder, path, name)
		}
	}()
	// A request in flight when the daemon stops is finished, within bounds.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()

	stem, isJSON := strings.CutSuffix(name, ".json")
	if !isJSON || !ipc.ValidID(stem) {
		stem = ""
	}
	data, err := readRequest(path)
	if errors.Is(err, os.ErrNotExist) {
		return // gone meanwhile (the agent gave up on it)
	}
	var req ipc.Request
	if err == nil {
		req, err = ipc.DecodeRequest(data)
	}
	if err != nil {
		id := req.ID
		if !ipc.ValidID(id) {
			id = stem
		}
		log.Warn().Str("request", id).Str("error", short(err.Error(), 300)).Msg("malformed ipc request")
		h.quarantine(log, folder, path, name)
		if id != "" {
			h.respond(log, folder, ipc.ErrorResponse(id, fmt.Errorf("malformed request: %w", err)))
		}
		return
	}

	log = log.With().Str("request", req.ID).Str("type", string(req.Type)).Logger()
	respPath := filepath.Join(h.layout(folder).Responses(), req.FileName())
	if _, err := os.Lstat(respPath); err == nil {
		log.Warn().Msg("ipc request already answered; not carried out again")
		h.remove(log, path)
		return
	}
	start := time.Now()
	resp := h.Handle(ctx, string(folder), req)
	ev := log.Info()
	if !resp.OK {
		ev = log.Warn().Str("error", short(resp.Error, 300))
	}
	ev.Bool("ok", resp.OK).Dur("took", time.Since(start)).Msg("ipc request answered")
	h.respond(log, folder, resp)
	h.remove(log, path)
}

func (h *Host) layout(folder store.Folder) ipc.Layout {
	return ipc.Layout{Root: h.paths.IPCDir(string(folder))}
}

// respond writes resp atomically to the group's responses directory.
func (h *Host) respond(log zerolog.Logger, folder store.Folder, resp ipc.Response) {
	if err := resp.Validate(); err != nil {
		log.Error().Err(err).Msg("invalid ipc response")
		return
	}
	if err := ipc.WriteJSON(h.layout(folder).Responses(), resp.ID+".json", resp); err != nil {
		log.Error().Err(err).Msg("write ipc response")
	}
}

func (h *Host) remove(log zerolog.Logger, path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Error().Err(err).Msg("remove ipc request")
	}
}

// quarantine moves a file that cannot be handled to data/ipc/errors/, or
// deletes it if even that fails, so it is never handled twice.
func (h *Host) quarantine(log zerolog.Logger, folder store.Folder, path, name string) {
	dir := h.paths.IPCDir(ErrorsDir)
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		err = os.Rename(path, filepath.Join(dir, string(folder)+"-"+name))
	}
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return
	}
	log.Error().Err(err).Msg("move bad ipc file to errors; deleting it")
	h.remove(log, path)
}

// short cuts s to at most n bytes for a log field.
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
