package ipchost

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/dirwatch"
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

// Messenger commits what an agent's turn makes besides the host's own
// changes (the router): its messages, and the cursor of its turn in flight
// with each of its other actions.
type Messenger interface {
	// SendMessage commits a message to the outbox and applies unit (nil:
	// none) inside the same transaction, right after the insert, with the
	// stored row. It returns once both are committed; errors say why
	// nothing was committed.
	SendMessage(ctx context.Context, unit store.Unit, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error)
	// HoldTurn holds still the turn in flight of folder's agent while one
	// of its actions other than a message commits (schedule_task,
	// update_task, pause/resume/cancel_task, register_group) and returns
	// the turn's part of the action's unit of work. The host applies it in
	// the transaction that commits the action and then releases it.
	HoldTurn(ctx context.Context, folder string) TurnHold
}

// TurnHold is the turn in flight of a group's agent held still while one
// of its actions commits. Apply, called inside the transaction that commits
// the action, stores the cursor of the messages handed to the turn (so a
// turn that acted is not run again and the agent does not act twice), or
// does nothing when no turn is in flight. Release lets the turn go on; it is
// called exactly once, after the transaction, with whether the action
// committed (and was not undone).
type TurnHold interface {
	Apply(ctx context.Context, tx *store.Tx) error
	Release(ctx context.Context, committed bool)
}

// Approver asks the owner about a tool call (internal/approvals): it
// blocks until the call is settled or ctx ends.
type Approver interface {
	Ask(ctx context.Context, folder, requestID string, args ipc.AskApprovalArgs) (ipc.ApprovalDecision, error)
	// Claim takes the announcement of the tool call (toolUseID, tool) by
	// folder's live container, waiting a short while for one that races
	// the request file; false when there is none. Each is taken once.
	Claim(ctx context.Context, folder, toolUseID, tool string) bool
}

// ApprovalHolder is a Messenger that can hold a group's turn in flight
// open while one of its tool calls waits for the owner (the router): the
// container's timeouts do not stop it meanwhile. HoldApproval does not
// block on the owner; release may be called more than once.
type ApprovalHolder interface {
	HoldApproval(folder string) (release func())
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
	// Sweep is how often directories are listed even without an inotify
	// event; 0 means ipc.DefaultSweep.
	Sweep time.Duration
	// Live, when set, names the groups with a live container: each sweep
	// lists their requests directories, and a few of the others' in turn
	// (dirwatch.Config.Hot), so idle groups cost next to nothing however
	// many there are. Nil: each sweep lists every group's.
	Live func() []string
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

	// Approver answers ask_approval requests (internal/approvals); nil:
	// every one is denied.
	Approver Approver
}

// Defaults of the task limits (BRIDGED_MAX_TASKS, BRIDGED_MAX_TASK_PROMPT).
const (
	DefaultMaxTasks      = 50
	DefaultMaxTaskPrompt = 16 << 10
)

// Host answers the agents' requests: what each request means is its own
// (Handle); the file protocol of the requests directories and the records
// of requests carried out are its embedded protocol; the watching, the
// per-group workers, their fairness and back-pressure are a directory
// engine (internal/dirwatch) that calls the protocol for each file. Create
// it with New, start it with Run.
type Host struct {
	protocol

	cfg     Config
	db      *store.DB
	msg     Messenger
	tasks   Waker
	refresh GroupRefresher
	log     zerolog.Logger
	now     func() time.Time

	// idle, when set (tests), is called when a group's worker ends for
	// lack of work, from that worker.
	idle func(folder store.Folder)

	syncMu sync.Mutex // serialises SyncGroups, so a stale list never wins

	refusals refusalLog // ask_approval requests refused, logged sparingly

	box *dirwatch.Engine[*trees] // the groups' requests directories, keyed by folder

	lanes channelLanes // the groups' requests over the IPC channel (Channel)
}

// protocol is the file protocol of the groups' IPC namespaces: it opens a
// group's namespace, reads and decodes a request file, answers it (from the
// record of its earlier handling, or by carrying it out), writes the
// response and removes or quarantines the file, and records each request
// that changes something as handled (see record).
type protocol struct {
	home *home.Home
	db   *store.DB
	log  zerolog.Logger
	// carryOut carries out one request with its unit of work (Host.carryOut).
	carryOut func(ctx context.Context, u *unit) ipc.Response
	// ask answers an ask_approval request (Host.askApproval).
	ask func(ctx context.Context, folder string, req ipc.Request) ipc.Response

	// handled, when set (tests), is called after each file was dealt with,
	// from the goroutine that dealt with it.
	handled func(folder store.Folder, name string)
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
	log = log.With().Str("component", "ipchost").Logger()
	h := &Host{
		protocol: protocol{home: hm, db: db, log: log},
		cfg:      cfg,
		db:       db,
		msg:      m,
		tasks:    tasks,
		refresh:  refresh,
		log:      log,
		now:      time.Now,
	}
	h.protocol.carryOut = h.carryOut
	h.ask = h.askApproval
	box, err := dirwatch.New(dirwatch.Config[*trees]{
		Open: func(_ context.Context, folder string) (*trees, error) { return h.openTrees(store.Folder(folder)) },
		Handle: func(ctx context.Context, folder string, t *trees, name string) (bool, dirwatch.Job) {
			return h.serve(ctx, store.Folder(folder), t, name)
		},
		Sweep:    cfg.Sweep,
		Hot:      cfg.Live,
		Lanes:    MaxInFlight - 1,
		Queue:    batchSize,
		Batch:    batchSize,
		Log:      log,
		KeyField: "group",
		Idle: func(folder string) {
			if h.idle != nil {
				h.idle(store.Folder(folder))
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("new ipc host: %w", err)
	}
	h.box = box
	return h, nil
}

// Run watches the requests directories of every registered group and answers
// what appears in them, files already there included, until ctx ends. It
// returns nil then, or an error if it cannot start. It may be called once.
//
// Each group has its own worker goroutine while it has files to look at,
// so one group's backlog never delays another's requests; the watcher and
// the sweep only start or wake workers (see internal/dirwatch).
func (h *Host) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := h.box.Start(ctx); err != nil {
		return fmt.Errorf("run ipc host: %w", err)
	}
	defer func() {
		cancel()
		h.box.Wait()
	}()
	if err := h.SyncGroups(ctx); err != nil {
		var dirErr *dirError
		if !errors.As(err, &dirErr) {
			return fmt.Errorf("run ipc host: %w", err)
		}
		h.log.Error().Err(err).Msg("some groups' requests are not watched")
	}
	watched, _ := h.box.Keys()
	h.log.Info().Int("groups", len(watched)).Msg("ipc host started")
	<-ctx.Done()
	return nil
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
	if n, err := h.db.Requests.Prune(ctx, HandledRetention); err != nil {
		return 0, fmt.Errorf("recover ipc: %w", err)
	} else if n > 0 {
		h.log.Debug().Int64("records", n).Msg("forgot old handled requests")
	}
	groups, err := h.db.Groups.List(ctx)
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
func (p *protocol) quarantineLeftovers(ctx context.Context, log zerolog.Logger, folder store.Folder) (int, error) {
	t, err := p.openTrees(folder)
	if err != nil {
		return 0, err
	}
	defer t.Close()
	n := 0
	for ctx.Err() == nil {
		names, more, err := t.req.List(batchSize)
		if err != nil {
			return n, err
		}
		moved := 0
		for _, name := range names {
			if p.quarantine(log.With().Str("file", short(name, 160)).Logger(), t, name) {
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
	groups, err := h.db.Groups.List(ctx)
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
	watched, running := h.box.Keys()
	if !running {
		return nil
	}
	for _, k := range watched {
		folder := store.Folder(k)
		if want[folder] {
			delete(want, folder) // watched already
			continue
		}
		h.box.Remove(k) // not waited for: this may be one of its own requests
		h.log.Info().Str("group", k).Msg("stopped watching a removed group's requests")
	}
	for folder := range want {
		t, err := h.openTrees(folder) // makes the directories if needed
		if err != nil {
			errs = append(errs, fmt.Errorf("watch group %s: %w", folder, err))
			continue
		}
		_ = t.Close()
		h.box.Add(string(folder))
		h.log.Debug().Str("group", string(folder)).Msg("watching requests")
	}
	if len(errs) > 0 {
		return fmt.Errorf("sync groups: %w", &dirError{errs})
	}
	return nil
}

// prepareGroup makes a newly registered group's directories through the
// home package: its workspace groups/<folder>, its Claude state
// data/sessions/<folder>/.claude, and its IPC namespace with requests/,
// responses/ and errors/. Their owner is set by the router before each run.
func (p *protocol) prepareGroup(folder string) error {
	for _, open := range []func(string) (*home.Tree, error){p.home.Group, p.home.Claude} {
		t, err := open(folder)
		if err != nil {
			return err
		}
		_ = t.Close()
	}
	t, err := p.openTrees(store.Folder(folder))
	if err != nil {
		return err
	}
	return t.Close()
}

// trees are a group's IPC namespace and its directories, open for one pass
// and the slow requests it handed on (the engine closes them after the
// last). As a dirwatch.Dir they are the requests directory.
type trees struct {
	ipc, req, resp, errs *home.Tree
}

// openTrees opens folder's IPC namespace through the home package, which
// moves aside and recreates any of the directories that is not a real
// directory, and records the incident.
func (p *protocol) openTrees(folder store.Folder) (*trees, error) {
	t := &trees{}
	var err error
	if t.ipc, err = p.home.IPC(string(folder)); err != nil {
		return nil, err
	}
	for _, d := range []struct {
		name string
		tree **home.Tree
	}{{ipc.RequestsDir, &t.req}, {ipc.ResponsesDir, &t.resp}, {ErrorsDir, &t.errs}} {
		if *d.tree, err = t.ipc.Dir(d.name); err != nil {
			_ = t.Close()
			return nil, err
		}
	}
	return t, nil
}

var _ dirwatch.Dir = (*trees)(nil)

// Path, Stat and List are the requests directory's.
func (t *trees) Path() string                       { return t.req.Path() }
func (t *trees) Stat() (fs.FileInfo, error)         { return t.req.Lstat(".") }
func (t *trees) List(n int) ([]string, bool, error) { return t.req.List(n) }

// Close closes the namespace and its directories.
func (t *trees) Close() error {
	for _, tr := range []*home.Tree{t.req, t.resp, t.errs, t.ipc} {
		if tr != nil {
			_ = tr.Close()
		}
	}
	return nil
}

// slow reports whether a request may take long without using the disk or
// the processor: a list_groups that refreshes the names from WhatsApp. Slow
// requests run on side goroutines, so they hold up neither the group's other
// requests nor each other. Every other request is quick and runs on the
// group's worker, one at a time in file-name order, so that an agent's
// messages and task changes take effect in the order it made them, and a
// group flooding its directory uses one goroutine's worth of the machine.
// The engine (internal/dirwatch) runs the side goroutines and bounds them.
func slow(req ipc.Request) bool {
	a, ok := req.Args.(ipc.ListGroupsArgs)
	return ok && req.Type == ipc.TypeListGroups && a.Refresh
}

// serve reads and decodes one request file of folder, then carries it out
// and answers it, or, for a slow request, returns the job that does, which
// the engine runs on a side goroutine. It reports whether the file was dealt
// with: answered and removed, moved to errors/, gone, or handed on.
func (p *protocol) serve(ctx context.Context, folder store.Folder, t *trees, name string) (done bool, job dirwatch.Job) {
	log := p.log.With().Str("group", string(folder)).Str("file", short(name, 160)).Logger()
	defer func() {
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("ipc request handling panicked")
			done, job = p.quarantine(log, t, name), nil
		}
		if job == nil && p.handled != nil {
			p.handled(folder, name)
		}
	}()
	stem, isJSON := strings.CutSuffix(name, ".json")
	if !isJSON || !ipc.ValidID(stem) {
		stem = ""
	}
	data, err := t.req.ReadFile(name, MaxRequestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil // gone meanwhile (the agent gave up on it)
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
		done = p.quarantine(log, t, name)
		if id != "" {
			p.respond(log, t, ipc.ErrorResponse(id, fmt.Errorf("malformed request: %w", err)))
		}
		return done, nil
	}

	log = log.With().Str("request", req.ID).Str("type", string(req.Type)).Logger()
	// A request carried out before (its effect committed with its record)
	// gets the recorded answer again, whatever its response file became.
	if changes(req.Type) {
		if done, ok := p.answerFromRecord(ctx, log, folder, t, name, req); ok {
			return done, nil
		}
	}
	// Only a regular file is an earlier answer: a link planted there is
	// replaced by the real answer, never taken for one.
	if fi, err := t.resp.Lstat(req.FileName()); err == nil && fi.Mode().IsRegular() {
		log.Warn().Msg("ipc request already answered; not carried out again")
		return p.remove(log, t, name), nil
	}
	if slow(req) {
		return true, func(ctx context.Context) { p.answerSlow(ctx, log, folder, t, name, req) }
	}
	if req.Type == ipc.TypeAskApproval {
		// It waits for the owner: on a side lane, so the group's other
		// requests go on, bounded by the approvals' own timeout.
		return true, func(ctx context.Context) { p.answerApproval(ctx, log, folder, t, name, req) }
	}
	// A request in flight when the daemon stops is finished, within bounds.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	return p.answer(hctx, log, folder, t, name, req), nil
}

// answerSlow carries out one slow request on a side goroutine.
func (p *protocol) answerSlow(ctx context.Context, log zerolog.Logger, folder store.Folder, t *trees, name string, req ipc.Request) {
	defer func() {
		if p.handled != nil {
			p.handled(folder, name)
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("ipc request handling panicked")
			p.quarantine(log, t, name)
		}
	}()
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	p.answer(hctx, log, folder, t, name, req)
}

// answerApproval answers one ask_approval request on a side goroutine once
// the owner (or the timeout) settled it. When the daemon stops first, the
// request is left unanswered: its file is quarantined at the next start
// (Recover) and the approval settled as denied there.
func (p *protocol) answerApproval(ctx context.Context, log zerolog.Logger, folder store.Folder, t *trees, name string, req ipc.Request) {
	defer func() {
		if p.handled != nil {
			p.handled(folder, name)
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("ipc request handling panicked")
			p.quarantine(log, t, name)
		}
	}()
	resp := p.ask(ctx, string(folder), req)
	if ctx.Err() != nil {
		log.Info().Msg("approval left open: bridged is stopping")
		return
	}
	log.Info().Bool("ok", resp.OK).Msg("ipc request answered")
	p.respond(log, t, resp)
	p.remove(log, t, name)
}

// answer carries out req, writes its response and removes its file. A
// request that changes something is recorded as handled in the transaction
// that makes its change: its unit of work says so (see unit).
func (p *protocol) answer(ctx context.Context, log zerolog.Logger, folder store.Folder, t *trees, name string, req ipc.Request) bool {
	start := time.Now()
	resp := p.carryOut(ctx, &unit{folder: folder, req: req, record: changes(req.Type)})
	ev := log.Info()
	if !resp.OK {
		ev = log.Warn().Str("error", short(resp.Error, 300))
	}
	ev.Bool("ok", resp.OK).Dur("took", time.Since(start)).Msg("ipc request answered")
	p.respond(log, t, resp)
	return p.remove(log, t, name)
}

// changes reports whether a request of type typ changes something, and so
// is recorded as handled: every type but the listings, which are safe to
// carry out again.
func changes(typ ipc.RequestType) bool {
	switch typ {
	case ipc.TypeListTasks, ipc.TypeListGroups, ipc.TypeAskApproval:
		// An approval is kept in its own table, once per request.
		return false
	}
	return true
}

// unit is the unit of work of one request: what commits together with the
// request's change, inside the one transaction that makes it. The host
// builds it and passes it to the code that commits the change: its own
// task and group transactions (commit), or the Messenger's SendMessage for
// a message (as a store.Unit, applied after the outbox row's insert). It
// holds
//   - the record of the request as handled (when record is set: every
//     request that changes something, carried out from its file);
//   - for an action other than a message, the turn in flight of the
//     group's agent, held by the Messenger, whose cursor commits with it;
//   - for a message with a file, the file's staged copy, kept under the
//     row's key, and the group's file caps, checked again.
//
// A request that changes nothing (a listing) has a unit that does nothing.
type unit struct {
	folder store.Folder
	req    ipc.Request
	// record says whether the request is recorded as handled; false for a
	// listing and for Handle called directly.
	record bool
	// turn is the turn in flight, held for an action; nil for a message.
	turn TurnHold
	// file is the file a send_message queues with its message; nil: none.
	file *outFile
}

// commit applies u inside tx, the transaction that makes the request's
// change, whose successful response carries data (or is data, an
// ipc.Response): the request is recorded as handled with that response and
// the held turn's cursor is stored, so the change, its record and the
// cursor commit together or not at all.
func (u *unit) commit(ctx context.Context, tx *store.Tx, data any) error {
	if u.record {
		resp, ok := data.(ipc.Response)
		if !ok {
			var err error
			if resp, err = ipc.OKResponse(u.req.ID, data); err != nil {
				return err
			}
		}
		b, err := json.Marshal(resp)
		if err != nil {
			return fmt.Errorf("encode response: %w", err)
		}
		if err := tx.Requests.Record(ctx, store.HandledRequest{Folder: u.folder, ID: u.req.ID, Type: string(u.req.Type), Response: b}); err != nil {
			return err
		}
	}
	if u.turn != nil {
		return u.turn.Apply(ctx, tx)
	}
	return nil
}

// Apply is a send_message's unit applied by the Messenger inside the
// transaction that enqueues its row it: the file's caps are checked again,
// the file is set on the row and its staged copy kept under the row's key,
// and the request is recorded with the answer the agent gets.
func (u *unit) Apply(ctx context.Context, tx *store.Tx, it store.OutboxItem) error {
	var info *ipc.FileInfo
	if f := u.file; f != nil {
		if err := f.commit(ctx, tx, it); err != nil {
			return err
		}
		info = &f.info
	}
	return u.commit(ctx, tx, ipc.SendResult{OutboxID: int64(it.ID), Chat: string(it.Chat), File: info})
}

// forget deletes the record of u's request inside tx, the transaction that
// undoes its change.
func (u *unit) forget(ctx context.Context, tx *store.Tx) error {
	if !u.record {
		return nil
	}
	return tx.Requests.Forget(ctx, u.folder, u.req.ID)
}

// answerFromRecord answers req from the record of its earlier handling, if
// there is one, and removes its file. ok reports whether there was a record.
func (p *protocol) answerFromRecord(ctx context.Context, log zerolog.Logger, folder store.Folder, t *trees, name string, req ipc.Request) (done, ok bool) {
	resp, found, err := p.recorded(ctx, log, folder, req.ID)
	if err != nil {
		// Carrying it out now could repeat it; the next pass tries again.
		log.Error().Err(err).Msg("look up handled ipc request; left for the next pass")
		return false, true
	}
	if !found {
		return false, false
	}
	p.respond(log, t, resp)
	return p.remove(log, t, name), true
}

// recorded returns the recorded answer of folder's request id when it was
// carried out before (found), whichever way it came (a file, the channel).
func (p *protocol) recorded(ctx context.Context, log zerolog.Logger, folder store.Folder, id string) (resp ipc.Response, found bool, err error) {
	rec, err := p.db.Requests.Get(ctx, folder, id)
	if errors.Is(err, store.ErrNotFound) {
		return ipc.Response{}, false, nil
	}
	if err != nil {
		return ipc.Response{}, false, err
	}
	resp, err = ipc.DecodeResponse(rec.Response)
	if err != nil {
		resp = ipc.ErrorResponse(id, errors.New("internal error: the recorded answer cannot be read"))
	}
	resp.ID = id
	log.Warn().Time("handled_at", rec.HandledAt).Bool("ok", resp.OK).
		Msg("ipc request carried out before; answered from the record, not carried out again")
	return resp, true, nil
}

// respond writes resp atomically to the group's responses directory. A link
// or anything else at its name is replaced, never written through.
func (p *protocol) respond(log zerolog.Logger, t *trees, resp ipc.Response) {
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
func (p *protocol) remove(log zerolog.Logger, t *trees, name string) bool {
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
func (p *protocol) quarantine(log zerolog.Logger, t *trees, name string) bool {
	err := t.ipc.Rename(ipc.RequestsDir+"/"+name, ErrorsDir+"/"+name)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return true
	}
	log.Error().Err(err).Msg("move bad ipc file to errors; deleting it")
	return p.remove(log, t, name)
}

// short cuts s to at most n bytes for a log field.
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// askApproval asks the approver about one tool call, if the request comes
// from the pipeline: only a group whose profile asks has a runner that
// asks, and only for a tool call that runner announced on its stdout
// (Approver.Claim). Anything else was planted in the group's IPC
// directory: it is refused at once with an error response, no approval is
// opened and the owner hears nothing; the refusals are logged at most once
// per refusalLogEvery per group.
func (h *Host) askApproval(ctx context.Context, folder string, req ipc.Request) ipc.Response {
	args, ok := req.Args.(ipc.AskApprovalArgs)
	if !ok {
		return ipc.ErrorResponse(req.ID, errors.New("not an ask_approval request"))
	}
	refuse := func(err error) ipc.Response {
		h.refusals.log(h.log, folder, args.Tool, err, h.now())
		return ipc.ErrorResponse(req.ID, err)
	}
	g, err := h.db.Groups.ByFolder(ctx, store.Folder(folder))
	switch {
	case err != nil:
		return refuse(fmt.Errorf("%w: group %s: %w", ipc.ErrApprovalRefused, folder, err))
	case g.Tools != store.ToolsAsk:
		return refuse(fmt.Errorf("%w: this group's profile is %s, which never asks the owner", ipc.ErrApprovalRefused, cmp.Or(g.Tools, store.ToolsFull)))
	case !ipc.ValidToolName(args.Tool) || !ipc.ValidToolUseID(args.ToolUseID):
		return refuse(fmt.Errorf("%w: the tool's name or call id is not an identifier", ipc.ErrApprovalRefused))
	}
	var d ipc.ApprovalDecision
	switch {
	case h.cfg.Approver == nil:
		d = ipc.ApprovalDecision{Message: "not approved: bridged has no approvals"}
	case !h.cfg.Approver.Claim(ctx, folder, args.ToolUseID, args.Tool):
		return refuse(fmt.Errorf("%w: the group's agent is not waiting on this tool call", ipc.ErrApprovalRefused))
	default:
		// The turn that asked waits on the owner, not on its agent: it is
		// held open until the answer or the approval's timeout.
		if hd, ok := h.msg.(ApprovalHolder); ok {
			release := hd.HoldApproval(folder)
			defer release()
		}
		if d, err = h.cfg.Approver.Ask(ctx, folder, req.ID, args); err != nil {
			if ctx.Err() != nil {
				return ipc.ErrorResponse(req.ID, ctx.Err())
			}
			if errors.Is(err, ipc.ErrApprovalRefused) {
				return refuse(err)
			}
			h.log.Error().Err(err).Str("group", folder).Msg("ask approval")
			d = ipc.ApprovalDecision{Message: "not approved: the owner could not be asked"}
		}
	}
	resp, err := ipc.OKResponse(req.ID, d)
	if err != nil {
		return ipc.ErrorResponse(req.ID, err)
	}
	return resp
}

// refusalLogEvery is how often, at most, the refused ask_approval requests
// of one group are logged: a flood of planted files makes one line per
// interval with a count, not one per file.
const refusalLogEvery = 10 * time.Second

// refusalLog logs refused ask_approval requests, at most once per
// refusalLogEvery per group. The zero value is ready.
type refusalLog struct {
	mu     sync.Mutex
	groups map[string]*refusals
}

type refusals struct {
	last   time.Time
	unsaid int // refused since the last line
}

func (r *refusalLog) log(log zerolog.Logger, folder, tool string, why error, now time.Time) {
	r.mu.Lock()
	if r.groups == nil {
		r.groups = map[string]*refusals{}
	}
	g := r.groups[folder]
	if g == nil {
		g = &refusals{}
		r.groups[folder] = g
	}
	g.unsaid++
	if !g.last.IsZero() && now.Sub(g.last) < refusalLogEvery {
		r.mu.Unlock()
		return
	}
	n := g.unsaid
	g.last, g.unsaid = now, 0
	r.mu.Unlock()
	log.Warn().Str("group", folder).Str("tool", short(strconv.Quote(tool), 80)).Str("error", why.Error()).Int("refused", n).
		Msg("ask_approval refused")
}
