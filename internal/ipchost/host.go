package ipchost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// MaxRequestBytes bounds a request file; larger files are refused unread.
// Texts are at most ipc.MaxTextBytes, which JSON escaping can grow sixfold.
const MaxRequestBytes = 1 << 20

// requestTimeout bounds the work for one request, below the 30 s the MCP
// tool waits for its answer.
const requestTimeout = 20 * time.Second

// ErrorsDir is the directory of a group's IPC namespace (data/ipc/<folder>/
// errors) where its files that cannot be handled go.
const ErrorsDir = "errors"

// MaxInFlight is the most requests of one group handled at the same time:
// up to MaxInFlight-1 slow ones (see slow) on side goroutines and one other
// on the group's worker. The rest wait, in the group's requests directory
// or, decoded, in a queue of at most batchSize slow requests.
const MaxInFlight = 64

// batchSize is how many new request names a worker lists at a time: a
// directory of any size costs bounded memory and time per pass.
const batchSize = 256

// HandledRetention is how long a carried-out request is remembered (see
// Recover): far longer than any container lives, so a request is never
// carried out twice.
const HandledRetention = 7 * 24 * time.Hour

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
	// Home is the bridged home directory. It is used only when Trees is
	// nil, to make one.
	Home string
	// Trees is the door into the agent-writable trees of the home: every
	// file operation in a group's IPC namespace goes through it. Nil means
	// home.New(Home, the host's logger).
	Trees         *home.Home
	Timezone      *time.Location // schedules and answers use it; nil means UTC
	AssistantName string         // the default trigger of registered groups is "@" + this
	// ContainerUID and ContainerGID are ignored: the owner of a group's
	// directories is set by the router before each run.
	ContainerUID, ContainerGID int
	// Sweep is how often every directory is listed even without an
	// inotify event; 0 means ipc.DefaultSweep.
	Sweep time.Duration
	// Files caps the files each group stages for sending; zero fields
	// take the defaults.
	Files FileLimits
	// Floor is the free space the home's disk keeps: below it no file is
	// staged. The zero Floor has none.
	Floor home.Floor

	// MaxTasks is the most tasks a group may have that are not done
	// (active, running or paused): schedule_task past it is refused, and
	// nothing is stored. 0 means DefaultMaxTasks.
	MaxTasks int
	// MaxTaskPrompt is the largest task prompt, in bytes, that
	// schedule_task and update_task take. 0 means DefaultMaxTaskPrompt.
	MaxTaskPrompt int
}

// Defaults of the task limits (BRIDGED_MAX_TASKS, BRIDGED_MAX_TASK_PROMPT).
const (
	DefaultMaxTasks      = 50
	DefaultMaxTaskPrompt = 16 << 10
)

// Host answers the agents' requests. Create it with New, start it with Run.
type Host struct {
	cfg     Config
	home    *home.Home
	db      *store.DB
	msg     Messenger
	tasks   Waker
	refresh GroupRefresher
	log     zerolog.Logger
	now     func() time.Time

	// handled, when set (tests), is called after each file was dealt with,
	// from the goroutine that dealt with it.
	handled func(folder store.Folder, name string)
	// idle, when set (tests), is called when a group's worker ends for
	// lack of work, from that worker.
	idle func(folder store.Folder)

	syncMu sync.Mutex // serialises SyncGroups, so a stale list never wins

	mu       sync.Mutex
	ran      bool
	runCtx   context.Context // nil unless Run is running
	w        *dirWatcher     // nil unless Run is running
	groups   map[store.Folder]*group
	stopping map[store.Folder]*group // the last stopped worker of a removed group
	workers  sync.WaitGroup          // every worker Run started
}

// New returns a host for the groups registered in db. m is required; tasks
// and refresh may be nil (no scheduler to wake, no name refresh).
func New(cfg Config, db *store.DB, m Messenger, tasks Waker, refresh GroupRefresher, log zerolog.Logger) (*Host, error) {
	switch {
	case cfg.Home == "" && cfg.Trees == nil:
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
	if cfg.MaxTasks <= 0 {
		cfg.MaxTasks = DefaultMaxTasks
	}
	if cfg.MaxTaskPrompt <= 0 {
		cfg.MaxTaskPrompt = DefaultMaxTaskPrompt
	}
	if cfg.Sweep == 0 {
		cfg.Sweep = ipc.DefaultSweep
	}
	if cfg.Files.PerMinute <= 0 {
		cfg.Files.PerMinute = DefaultFilesPerMinute
	}
	if cfg.Files.BytesPerDay <= 0 {
		cfg.Files.BytesPerDay = DefaultFileBytesPerDay
	}
	hm := cfg.Trees
	if hm == nil {
		var err error
		if hm, err = home.New(cfg.Home, log); err != nil {
			return nil, fmt.Errorf("new ipc host: %w", err)
		}
	}
	return &Host{
		cfg:      cfg,
		home:     hm,
		db:       db,
		msg:      m,
		tasks:    tasks,
		refresh:  refresh,
		log:      log.With().Str("component", "ipchost").Logger(),
		now:      time.Now,
		groups:   make(map[store.Folder]*group),
		stopping: make(map[store.Folder]*group),
	}, nil
}

// group is one watched group: its worker, which runs only while the group
// has something to look at (see signal and work), and what the worker knows
// of its requests directory.
type group struct {
	folder store.Folder
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the group is stopped and its worker and handlers are done
	prev   *group        // the worker of an earlier registration, waited for

	// watchLost is set by the watcher when the watched directory went away.
	watchLost atomic.Bool

	// Owned by the running worker (one at a time: see running).
	wd  int32  // the inotify watch, -1 for none
	ino fileID // the directory it is on

	handlers sync.WaitGroup // side goroutines (carrying out slow requests)
	space    chan struct{}  // capacity 1: the slow queue has room again

	mu       sync.Mutex
	pending  bool            // signalled since the running worker's last look
	running  bool            // a worker goroutine runs (or finishes a stopped group)
	stopped  bool            // the group was removed or the host stops: no new worker
	inFlight map[string]bool // request files on a side goroutine or queued for one
	sides    int             // side goroutines, at most MaxInFlight-1: the worker is the last one
	queue    []pendingSlow   // slow requests waiting for a side goroutine
}

// pendingSlow is a decoded slow request waiting for a side goroutine. It
// holds a reference on the trees it came from.
type pendingSlow struct {
	name string
	req  ipc.Request
	t    *trees
	log  zerolog.Logger
}

type fileID struct{ dev, ino uint64 }

// signal has g's worker look at its directory: the running one looks again
// when its pass is done, or a new one starts. It never blocks.
func (h *Host) signal(g *group) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	g.pending = true
	if !g.running {
		h.launch(g)
	}
}

// launch starts a worker for g, which has none; g.mu is held. The WaitGroup
// is added to under g.mu before g is stopped, so never after Run's Wait began.
func (h *Host) launch(g *group) {
	g.running = true
	h.workers.Add(1)
	go h.work(g)
}

// stop ends g's watching: no worker starts after it, the running one ends
// after the file in hand, and done is closed once it and the handlers are
// done.
func (h *Host) stop(g *group) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	g.stopped = true
	g.cancel()
	if !g.running {
		h.launch(g) // it finds g stopped and only winds it down
	}
}

// Run watches the requests directories of every registered group and answers
// what appears in them, files already there included, until ctx ends. It
// returns nil then, or an error if it cannot start. It may be called once.
//
// Each group has its own worker goroutine while it has files to look at,
// so one group's backlog never delays another's requests; the watcher and
// the sweep only start or wake workers.
func (h *Host) Run(ctx context.Context) error {
	h.mu.Lock()
	if h.ran {
		h.mu.Unlock()
		return errors.New("run ipc host: already started")
	}
	h.ran = true
	h.mu.Unlock()
	w, err := newDirWatcher()
	if err != nil {
		return fmt.Errorf("run ipc host: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.mu.Lock()
	h.w, h.runCtx = w, ctx
	h.mu.Unlock()
	go func() {
		if err := w.run(h.signal, h.sweep); err != nil {
			h.log.Error().Err(err).Msg("inotify watcher stopped; requests are found by the sweep only")
		}
	}()
	defer func() {
		h.mu.Lock()
		h.runCtx = nil
		for _, g := range h.groups {
			h.stop(g)
		}
		clear(h.groups)
		clear(h.stopping)
		h.mu.Unlock()
		h.workers.Wait()
		_ = w.close()
		<-w.done
		h.mu.Lock()
		h.w = nil
		h.mu.Unlock()
	}()

	if err := h.SyncGroups(ctx); err != nil {
		var dirErr *dirError
		if !errors.As(err, &dirErr) {
			return fmt.Errorf("run ipc host: %w", err)
		}
		h.log.Error().Err(err).Msg("some groups' requests are not watched")
	}
	h.log.Info().Int("groups", h.watchedCount()).Msg("ipc host started")
	t := time.NewTicker(h.cfg.Sweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			h.sweep()
		}
	}
}

// Recover readies the IPC namespaces for a daemon start. Call it once, before
// Run, after the containers a previous bridged left running were stopped and
// before any container of this daemon starts (DESIGN §11: exactly once).
//
// It forgets requests handled more than HandledRetention ago, and moves every
// request file left in a registered group's requests/ to the group's errors/,
// unanswered and not carried out. Such a file was written by a container of
// the previous daemon, which is gone: its turn was cut off before its result
// was committed, so the turn's messages are still after the group's cursor
// and run again, and what the request asked for happens once, in the new
// run; carrying it out too would do it twice. (A request of an interrupted
// task run is dropped with its run, which is recorded as interrupted.) One
// line per group says how many files were moved. It returns the total.
func (h *Host) Recover(ctx context.Context) (int, error) {
	if n, err := h.db.PruneHandledRequests(ctx, HandledRetention); err != nil {
		return 0, fmt.Errorf("recover ipc: %w", err)
	} else if n > 0 {
		h.log.Debug().Int64("records", n).Msg("forgot old handled requests")
	}
	groups, err := h.db.ListGroups(ctx)
	if err != nil {
		return 0, fmt.Errorf("recover ipc: %w", err)
	}
	total := 0
	for _, g := range groups {
		if home.CheckFolder(string(g.Folder)) != nil {
			continue
		}
		log := h.log.With().Str("group", string(g.Folder)).Logger()
		n, err := h.quarantineLeftovers(ctx, log, g.Folder)
		total += n
		if err != nil {
			log.Error().Err(err).Int("moved", n).Msg("cannot quarantine the requests a previous bridged left; the rest are carried out")
		}
		if n > 0 {
			log.Warn().Int("requests", n).Str("moved_to", ErrorsDir).
				Msg("requests left by the previous bridged's container quarantined, not carried out; the cut-off turn runs again")
		}
	}
	return total, nil
}

// quarantineLeftovers moves every request file of folder to its errors/, a
// bounded batch at a time, and returns how many it moved.
func (h *Host) quarantineLeftovers(ctx context.Context, log zerolog.Logger, folder store.Folder) (int, error) {
	t, err := h.openTrees(folder)
	if err != nil {
		return 0, err
	}
	defer t.release()
	n := 0
	for ctx.Err() == nil {
		names, more, err := t.req.List(batchSize)
		if err != nil {
			return n, err
		}
		moved := 0
		for _, name := range names {
			if h.quarantine(log.With().Str("file", short(name, 160)).Logger(), t, name) {
				moved++
			}
		}
		n += moved
		if !more || moved == 0 {
			break
		}
	}
	return n, ctx.Err()
}

// sweep wakes every worker: the safety net for lost events.
func (h *Host) sweep() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range h.groups {
		h.signal(g)
	}
}

func (h *Host) watchedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.groups)
}

// dirError reports groups whose directory could not be watched.
type dirError struct{ errs []error }

func (e *dirError) Error() string   { return errors.Join(e.errs...).Error() }
func (e *dirError) Unwrap() []error { return e.errs }

// SyncGroups re-reads the registered groups: it starts a worker for each new
// group (making its IPC directories if needed) and stops the workers of
// removed groups. Before Run, and after it returned, it does nothing but
// read. Safe for concurrent use, also from a request's handler.
func (h *Host) SyncGroups(ctx context.Context) error {
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	groups, err := h.db.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("sync groups: %w", err)
	}
	var errs []error
	want := make(map[store.Folder]bool, len(groups))
	for _, g := range groups {
		if err := home.CheckFolder(string(g.Folder)); err != nil {
			errs = append(errs, fmt.Errorf("watch group %s: %w", g.Folder, err))
			continue
		}
		want[g.Folder] = true
	}
	h.mu.Lock()
	if h.runCtx == nil {
		h.mu.Unlock()
		return nil
	}
	for folder, g := range h.groups {
		if want[folder] {
			delete(want, folder) // watched already
			continue
		}
		delete(h.groups, folder)
		h.stop(g) // not waited for: this may be one of its own requests
		h.stopping[folder] = g
		h.log.Info().Str("group", string(folder)).Msg("stopped watching a removed group's requests")
	}
	h.mu.Unlock()
	// The new groups' directories are made without holding h.mu, which the
	// watcher takes to wake every worker. syncMu keeps h.groups' set of
	// folders as it was meanwhile.
	for folder := range want {
		t, err := h.openTrees(folder) // makes the directories if needed
		if err != nil {
			errs = append(errs, fmt.Errorf("watch group %s: %w", folder, err))
			delete(want, folder)
			continue
		}
		t.release()
	}
	h.mu.Lock()
	if h.runCtx != nil {
		for folder := range want {
			h.startWorker(folder)
			h.log.Debug().Str("group", string(folder)).Msg("watching requests")
		}
	}
	h.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("sync groups: %w", &dirError{errs})
	}
	return nil
}

// prepareGroup makes a newly registered group's directories through the
// home package: its workspace groups/<folder>, its Claude state
// data/sessions/<folder>/.claude, and its IPC namespace with requests/,
// responses/ and errors/. Their owner is set by the router before each run.
func (h *Host) prepareGroup(folder string) error {
	for _, open := range []func(string) (*home.Tree, error){h.home.Group, h.home.Claude} {
		t, err := open(folder)
		if err != nil {
			return err
		}
		_ = t.Close()
	}
	t, err := h.openTrees(store.Folder(folder))
	if err != nil {
		return err
	}
	t.release()
	return nil
}

// startWorker starts folder's worker; h.mu is held.
func (h *Host) startWorker(folder store.Folder) {
	ctx, cancel := context.WithCancel(h.runCtx)
	g := &group{
		folder:   folder,
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		wd:       -1,
		space:    make(chan struct{}, 1),
		inFlight: make(map[string]bool),
	}
	// A group removed and registered again never has two workers at once.
	g.prev = h.stopping[folder]
	delete(h.stopping, folder)
	h.groups[folder] = g
	h.signal(g) // files already there
}

// work is a group's worker: it handles what is in the group's requests
// directory, a bounded batch at a time, until nothing is left and no signal
// came meanwhile, then ends. Once the group is stopped it waits for the
// handlers, drops the watch and closes done.
func (h *Host) work(g *group) {
	defer h.workers.Done()
	ctx := g.ctx
	if g.prev != nil {
		<-g.prev.done
		g.prev = nil
	}
	for {
		g.mu.Lock()
		if ctx.Err() != nil {
			g.mu.Unlock()
			break
		}
		if !g.pending {
			g.running = false
			g.mu.Unlock()
			if h.idle != nil {
				h.idle(g.folder)
			}
			return
		}
		g.pending = false
		g.mu.Unlock()
		for ctx.Err() == nil && h.pass(ctx, g) {
		}
	}
	// Stopped: no worker starts again (stop set stopped before cancelling),
	// so this one winds the group down.
	g.handlers.Wait()
	if g.wd >= 0 {
		h.watcher().remove(g.wd, g)
	}
	close(g.done)
}

func (h *Host) watcher() *dirWatcher {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.w
}

// trees are a group's IPC namespace and its directories, open for one pass
// and the handlers it started; closed when the last user releases them.
type trees struct {
	ipc, req, resp, errs *home.Tree
	refs                 atomic.Int32
}

// openTrees opens folder's IPC namespace through the home package, which
// moves aside and recreates any of the directories that is not a real
// directory, and records the incident.
func (h *Host) openTrees(folder store.Folder) (*trees, error) {
	t := &trees{}
	t.refs.Store(1)
	var err error
	if t.ipc, err = h.home.IPC(string(folder)); err != nil {
		return nil, err
	}
	for _, d := range []struct {
		name string
		tree **home.Tree
	}{{ipc.RequestsDir, &t.req}, {ipc.ResponsesDir, &t.resp}, {ErrorsDir, &t.errs}} {
		if *d.tree, err = t.ipc.Dir(d.name); err != nil {
			t.close()
			return nil, err
		}
	}
	return t, nil
}

func (t *trees) retain() { t.refs.Add(1) }

func (t *trees) release() {
	if t.refs.Add(-1) == 0 {
		t.close()
	}
}

func (t *trees) close() {
	for _, tr := range []*home.Tree{t.req, t.resp, t.errs, t.ipc} {
		if tr != nil {
			_ = tr.Close()
		}
	}
}

// pass handles one batch of g's request files, oldest first. It reports
// whether more files are waiting and this pass got rid of some (a directory
// whose files cannot be removed is not spun on: the next event or sweep
// tries again).
func (h *Host) pass(ctx context.Context, g *group) (again bool) {
	log := h.log.With().Str("group", string(g.folder)).Logger()
	defer func() {
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("ipc worker pass panicked")
			again = false
		}
	}()
	t, err := h.openTrees(g.folder)
	if err != nil {
		log.Warn().Err(err).Msg("open the group's ipc directories")
		return false
	}
	defer t.release()
	h.ensureWatch(log, g, t.req)
	// Files on side goroutines or queued for one (at most MaxInFlight-1
	// plus a batch) are still in the directory: list past them, so that a full
	// batch of new names comes back whenever there are that many.
	names, more, err := t.req.List(batchSize + MaxInFlight + batchSize)
	if err != nil {
		log.Warn().Err(err).Msg("list requests")
		return false
	}
	progress := false
	for _, name := range names {
		if ctx.Err() != nil {
			return false
		}
		g.mu.Lock()
		busy := g.inFlight[name]
		g.mu.Unlock()
		if busy {
			continue
		}
		if h.handleFile(ctx, g, t, name) {
			progress = true
		}
	}
	return more && progress
}

// ensureWatch (re)watches the requests directory when the one watched is no
// longer the one the home package just opened: the agent deleted or renamed
// it, or replaced it by a link, which the home package moved aside. The watch
// is added before the directory is listed, so nothing created in the new
// directory is missed.
func (h *Host) ensureWatch(log zerolog.Logger, g *group, req *home.Tree) {
	fi, err := req.Lstat(".")
	if err != nil {
		log.Warn().Err(err).Msg("inspect requests directory")
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	id := fileID{dev: uint64(st.Dev), ino: st.Ino}
	lost := g.watchLost.Swap(false)
	if g.wd >= 0 && id == g.ino && !lost {
		return
	}
	w := h.watcher()
	if w == nil {
		return
	}
	if g.wd >= 0 {
		w.remove(g.wd, g)
		g.wd = -1
	}
	wd, err := w.add(req.Path(), g)
	if err != nil {
		log.Warn().Err(err).Msg("watch requests; new ones are found by the sweep until the next try")
		return
	}
	g.wd, g.ino = wd, id
}

// slow reports whether a request may take long without using the disk or
// the processor: a list_groups that refreshes the names from WhatsApp. Slow
// requests run on side goroutines, so they hold up neither the group's other
// requests nor each other. Every other request is quick and runs on the
// group's worker, one at a time in file-name order, so that an agent's
// messages and task changes take effect in the order it made them, and a
// group flooding its directory uses one goroutine's worth of the machine.
func slow(req ipc.Request) bool {
	a, ok := req.Args.(ipc.ListGroupsArgs)
	return ok && req.Type == ipc.TypeListGroups && a.Refresh
}

// handleFile reads and decodes one request file, then carries it out and
// answers it, or, for a slow request, hands it to a side goroutine (see
// dispatch). It reports whether the file was dealt with: answered and
// removed, moved to errors/, gone, or handed on.
func (h *Host) handleFile(ctx context.Context, g *group, t *trees, name string) (done bool) {
	log := h.log.With().Str("group", string(g.folder)).Str("file", short(name, 160)).Logger()
	handedOn := false
	defer func() {
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("ipc request handling panicked")
			done = h.quarantine(log, t, name)
		}
		if !handedOn && h.handled != nil {
			h.handled(g.folder, name)
		}
	}()
	stem, isJSON := strings.CutSuffix(name, ".json")
	if !isJSON || !ipc.ValidID(stem) {
		stem = ""
	}
	data, err := t.req.ReadFile(name, MaxRequestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return true // gone meanwhile (the agent gave up on it)
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
		done = h.quarantine(log, t, name)
		if id != "" {
			h.respond(log, t, ipc.ErrorResponse(id, fmt.Errorf("malformed request: %w", err)))
		}
		return done
	}

	log = log.With().Str("request", req.ID).Str("type", string(req.Type)).Logger()
	// A request carried out before (its effect committed with its record)
	// gets the recorded answer again, whatever its response file became.
	if changes(req.Type) {
		if done, ok := h.answerFromRecord(ctx, log, g, t, name, req); ok {
			return done
		}
	}
	// Only a regular file is an earlier answer: a link planted there is
	// replaced by the real answer, never taken for one.
	if fi, err := t.resp.Lstat(req.FileName()); err == nil && fi.Mode().IsRegular() {
		log.Warn().Msg("ipc request already answered; not carried out again")
		return h.remove(log, t, name)
	}
	if slow(req) {
		handedOn = h.dispatch(ctx, g, pendingSlow{name: name, req: req, t: t, log: log})
		return handedOn
	}
	// A request in flight when the daemon stops is finished, within bounds.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	return h.answer(hctx, log, g, t, name, req)
}

// dispatch hands a slow request to a side goroutine: a new one while fewer
// than MaxInFlight-1 run, else the queue, which the side goroutines work
// through. Only when the queue is full too (batchSize requests) does the
// worker wait, so slow requests hold up the group's others only once
// hundreds are waiting. It reports false if ctx ended first.
func (h *Host) dispatch(ctx context.Context, g *group, p pendingSlow) bool {
	for {
		g.mu.Lock()
		switch {
		case g.sides < MaxInFlight-1:
			g.sides++
			g.inFlight[p.name] = true
			g.mu.Unlock()
			p.t.retain()
			g.handlers.Add(1)
			go h.side(ctx, g, p)
			return true
		case len(g.queue) < batchSize:
			g.queue = append(g.queue, p)
			g.inFlight[p.name] = true
			g.mu.Unlock()
			p.t.retain()
			return true
		}
		g.mu.Unlock()
		select {
		case <-g.space:
		case <-ctx.Done():
			return false
		}
	}
}

// side carries out p, then the queued slow requests one after the other,
// until the queue is empty. When ctx ended, queued requests are left in the
// directory for the next run.
func (h *Host) side(ctx context.Context, g *group, p pendingSlow) {
	defer g.handlers.Done()
	for {
		h.answerSlow(ctx, g, p)
		g.mu.Lock()
		delete(g.inFlight, p.name)
		if len(g.queue) == 0 || ctx.Err() != nil {
			dropped := g.queue
			g.queue = nil
			for _, q := range dropped {
				delete(g.inFlight, q.name)
			}
			g.sides--
			g.mu.Unlock()
			for _, q := range dropped {
				q.t.release()
			}
			return
		}
		p = g.queue[0]
		g.queue[0] = pendingSlow{}
		g.queue = g.queue[1:]
		g.mu.Unlock()
		select {
		case g.space <- struct{}{}:
		default:
		}
	}
}

// answerSlow carries out one slow request on a side goroutine.
func (h *Host) answerSlow(ctx context.Context, g *group, p pendingSlow) {
	defer p.t.release()
	defer func() {
		if h.handled != nil {
			h.handled(g.folder, p.name)
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			p.log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("ipc request handling panicked")
			h.quarantine(p.log, p.t, p.name)
		}
	}()
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	h.answer(hctx, p.log, g, p.t, p.name, p.req)
}

// answer carries out req, writes its response and removes its file. A
// request that changes something is recorded as handled in the transaction
// that makes its change (see record).
func (h *Host) answer(ctx context.Context, log zerolog.Logger, g *group, t *trees, name string, req ipc.Request) bool {
	start := time.Now()
	rec := &pendingRecord{folder: g.folder, req: req}
	if changes(req.Type) {
		ctx = context.WithValue(ctx, recordKey{}, rec)
		if req.Type == ipc.TypeSendMessage {
			// The router commits the message in its own transaction.
			ctx = store.OnEnqueue(ctx, func(tx *store.Tx, it store.OutboxItem) error {
				return h.record(ctx, tx, ipc.SendResult{OutboxID: int64(it.ID), Chat: string(it.Chat), File: rec.file})
			})
		}
	}
	resp := h.Handle(ctx, string(g.folder), req)
	if resp.OK && changes(req.Type) && !rec.recorded.Load() {
		// The change was committed without its record (a Messenger that
		// does not enqueue through the store with the request's context):
		// record it now, so at least a later replay is not carried out.
		log.Warn().Msg("ipc request's change committed without its record; recording it now")
		if err := h.db.Tx(ctx, func(tx *store.Tx) error { return h.record(ctx, tx, resp) }); err != nil {
			log.Error().Err(err).Msg("record handled ipc request")
		}
	}
	ev := log.Info()
	if !resp.OK {
		ev = log.Warn().Str("error", short(resp.Error, 300))
	}
	ev.Bool("ok", resp.OK).Dur("took", time.Since(start)).Msg("ipc request answered")
	h.respond(log, t, resp)
	return h.remove(log, t, name)
}

// changes reports whether a request of type typ changes something, and so
// is recorded as handled: every type but the listings, which are safe to
// carry out again.
func changes(typ ipc.RequestType) bool {
	switch typ {
	case ipc.TypeListTasks, ipc.TypeListGroups:
		return false
	}
	return true
}

// recordKey is the context key of the request being carried out.
type recordKey struct{}

// pendingRecord is the request being carried out, for record.
type pendingRecord struct {
	folder   store.Folder
	req      ipc.Request
	recorded atomic.Bool // a record was written (in a transaction that may yet fail)
	// file is the file a send_message queues with its message, set
	// before the message is committed, so the record answers like the
	// first response.
	file *ipc.FileInfo
}

// record records the request being carried out under ctx as handled, with
// the successful response carrying data (or data itself, an ipc.Response),
// inside tx: the transaction that makes the request's change, so the change
// and its record commit together or not at all. Without a request in ctx
// (Handle called directly) it does nothing.
func (h *Host) record(ctx context.Context, tx *store.Tx, data any) error {
	rec, _ := ctx.Value(recordKey{}).(*pendingRecord)
	if rec == nil {
		return nil
	}
	resp, ok := data.(ipc.Response)
	if !ok {
		var err error
		if resp, err = ipc.OKResponse(rec.req.ID, data); err != nil {
			return err
		}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	if err := tx.RecordRequest(ctx, store.HandledRequest{Folder: rec.folder, ID: rec.req.ID, Type: string(rec.req.Type), Response: b}); err != nil {
		return err
	}
	rec.recorded.Store(true)
	return nil
}

// forget deletes the record of the request being carried out under ctx,
// inside tx, the transaction that undoes its change.
func (h *Host) forget(ctx context.Context, tx *store.Tx) error {
	rec, _ := ctx.Value(recordKey{}).(*pendingRecord)
	if rec == nil {
		return nil
	}
	return tx.ForgetRequest(ctx, rec.folder, rec.req.ID)
}

// answerFromRecord answers req from the record of its earlier handling, if
// there is one, and removes its file. ok reports whether there was a record.
func (h *Host) answerFromRecord(ctx context.Context, log zerolog.Logger, g *group, t *trees, name string, req ipc.Request) (done, ok bool) {
	rec, err := h.db.HandledRequest(ctx, g.folder, req.ID)
	if errors.Is(err, store.ErrNotFound) {
		return false, false
	}
	if err != nil {
		// Carrying it out now could repeat it; the next pass tries again.
		log.Error().Err(err).Msg("look up handled ipc request; left for the next pass")
		return false, true
	}
	resp, err := ipc.DecodeResponse(rec.Response)
	if err != nil {
		resp = ipc.ErrorResponse(req.ID, errors.New("internal error: the recorded answer cannot be read"))
	}
	resp.ID = req.ID
	log.Warn().Time("handled_at", rec.HandledAt).Bool("ok", resp.OK).
		Msg("ipc request carried out before; answered from the record, not carried out again")
	h.respond(log, t, resp)
	return h.remove(log, t, name), true
}

// respond writes resp atomically to the group's responses directory. A link
// or anything else at its name is replaced, never written through.
func (h *Host) respond(log zerolog.Logger, t *trees, resp ipc.Response) {
	if err := resp.Validate(); err != nil {
		log.Error().Err(err).Msg("invalid ipc response")
		return
	}
	data, err := json.Marshal(resp)
	if err == nil {
		err = t.resp.WriteFile(resp.ID+".json", data, 0o644)
	}
	if err != nil {
		log.Error().Err(err).Msg("write ipc response")
	}
}

// remove removes a request file; it reports whether it is gone.
func (h *Host) remove(log zerolog.Logger, t *trees, name string) bool {
	if err := t.req.Remove(name); err != nil {
		log.Error().Err(err).Msg("remove ipc request")
		return false
	}
	return true
}

// quarantine moves a file that cannot be handled to the group's own errors/
// (inside its IPC namespace, so never across a file system), or deletes it
// if even that fails, so it is never handled twice. It reports whether the
// file left requests/.
func (h *Host) quarantine(log zerolog.Logger, t *trees, name string) bool {
	err := t.ipc.Rename(ipc.RequestsDir+"/"+name, ErrorsDir+"/"+name)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return true
	}
	log.Error().Err(err).Msg("move bad ipc file to errors; deleting it")
	return h.remove(log, t, name)
}

// short cuts s to at most n bytes for a log field.
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
