// Package dirwatch is a directory engine: it watches a set of directories,
// each under a key, and calls a handler for every file that appears in them,
// with files already there when a directory is added included. It knows
// nothing of what a file means; the IPC host (internal/ipchost) uses it for
// the groups' requests directories, keyed by group folder.
//
// # Workers
//
// Each directory has its own worker goroutine while, and only while, it has
// something to look at: an inotify event on the directory, or a sweep every
// Config.Sweep (the safety net for lost events: of every directory, or with
// Config.Hot of the hot ones and a bounded rotation of the others),
// starts a worker if none runs, or has the running one look again when its
// pass is done. A worker ends when a pass finds nothing new and no event
// came meanwhile, so an idle directory costs no goroutine, and at most one
// worker of a directory runs at a time, also across a key removed and
// added again (the new worker waits for the old one's wind-down). The
// watcher and the sweep never block: one directory's backlog never delays
// another's files.
//
// A pass opens the directory (Config.Open) and lists at most a bounded
// batch of names (Config.Batch), so a directory of any size costs bounded
// memory; the handler gets them in the order Dir.List gives, one at a time,
// on the worker. A pass that removed files and saw more is followed by
// another; a pass that could not get rid of any file (a file that cannot be
// removed) is not repeated until the next event or sweep, so a worker never
// spins.
//
// Config.Open and the Handler get the directory's context; Config.Idle gets
// none: it only reports that a worker ended (a signal, for tests), and does
// no work a context would bound. Config.Ticker is a clock.
//
// # Side lanes and back-pressure
//
// The handler may hand the rest of a file's work to a side lane by returning
// a Job: it runs on a goroutine of its own while fewer than Config.Lanes run
// for the directory, else waits in the directory's queue (at most
// Config.Queue jobs), which the lanes work through in order. Only when the
// queue is full too does the worker wait, so slow jobs hold up the
// directory's other files only once that many are waiting. A file whose job
// is running or queued stays in the directory and is skipped by later
// passes; the directory stays open until the pass and its last job are done.
// When a directory is removed or the engine stops, running jobs finish
// (their context ends), queued ones are dropped, their files left for the
// next start.
//
// # Watches
//
// A directory is watched through one inotify instance for all, keyed by
// watch descriptor, never by path. The watch never follows a link
// (IN_DONT_FOLLOW, IN_ONLYDIR) and is renewed whenever the directory a pass
// opened is not the one watched (it was deleted, renamed or replaced), before
// it is listed, so nothing created in the new directory is missed.
package dirwatch

import (
	"context"
	"errors"
	"io/fs"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Defaults of Config's bounds.
const (
	DefaultLanes = 63
	DefaultQueue = 256
	DefaultBatch = 256
	// DefaultRotation is how many idle directories a sweep looks at
	// besides the hot ones (Config.Hot).
	DefaultRotation = 16
)

// Dir is a directory opened for one pass over it and for the jobs the pass
// hands on. The engine closes it when the pass and its last job are done.
type Dir interface {
	// Path is the directory's path, for its inotify watch.
	Path() string
	// Stat describes the directory itself, as opened: the engine renews the
	// watch when its device and inode are not the ones watched.
	Stat() (fs.FileInfo, error)
	// List returns up to limit names of files in the directory and whether
	// there are more. It must not block for long.
	List(limit int) (names []string, more bool, err error)
	// Close releases the directory.
	Close() error
}

// A Job is the rest of a file's work, run on a side lane (see Handler). Its
// context ends when the directory is removed or the engine stops.
type Job func(ctx context.Context)

// Handler deals with the file name of the directory of key, opened as d, on
// the directory's worker. It reports whether the file was dealt with (it
// left the directory, or is being dealt with by job): a pass that dealt with
// none of its files is not repeated. A non-nil job is run on a side lane,
// and the file is skipped by later passes until the job returns. Handler
// must not block for long: the directory's other files wait for it.
type Handler[D Dir] func(ctx context.Context, key string, d D, name string) (done bool, job Job)

// Config configures an Engine.
type Config[D Dir] struct {
	// Open opens the directory of key for one pass, with the pass's ctx
	// (it ends when the key is removed or the engine stops). Required.
	Open func(ctx context.Context, key string) (D, error)
	// Handle deals with each file. Required.
	Handle Handler[D]
	// Sweep is how often every directory is looked at even without an
	// inotify event. Required.
	Sweep time.Duration
	// Ticker makes the sweep's ticker: its channel and how to stop it. Nil
	// means time.NewTicker; tests pass a fake clock's.
	Ticker func(d time.Duration) (<-chan time.Time, func())
	// Lanes is the most jobs of one directory run at once, Queue how many
	// more wait, Batch how many new names a pass lists. Zero means
	// DefaultLanes, DefaultQueue and DefaultBatch.
	Lanes, Queue, Batch int
	// Log gets the engine's own warnings, with the key in the field
	// KeyField ("dir" if empty).
	Log      zerolog.Logger
	KeyField string
	// Idle, when set, is called when a directory's worker ends for lack of
	// work, from that worker.
	Idle func(key string)
	// Hot, when set, names the keys whose directories each sweep looks
	// at (the ones in use: for the IPC host, the groups with a live
	// container); the sweep looks at Rotation of the others besides, in
	// turn, so an idle directory is still looked at now and then and a
	// thousand idle directories cost a sweep what a few do. Nil: every
	// sweep looks at every directory. Hot is called from the sweep's
	// goroutine, without the engine's lock held.
	Hot func() []string
	// Rotation is how many of the directories Hot does not name a sweep
	// looks at; 0 means DefaultRotation.
	Rotation int

	// noWatch has the engine find files by the sweep only, without an
	// inotify instance: the tests of the workers run under a fake clock
	// (testing/synctest), which a goroutine reading inotify would keep
	// from ever settling.
	noWatch bool
}

// Engine watches directories and runs their workers. Create it with New,
// start it with Start, add directories with Add.
type Engine[D Dir] struct {
	cfg  Config[D]
	done chan struct{} // closed when Start's goroutine wound everything down

	mu       sync.Mutex
	started  bool
	ctx      context.Context // nil unless running
	w        *watcher[D]     // nil unless running
	dirs     map[string]*dir[D]
	ring     []string           // the keys watched, in the order the sweep's rotation takes them
	next     int                // the rotation's place in ring
	stopping map[string]*dir[D] // the last stopped worker of a removed key
	workers  sync.WaitGroup     // every worker started
}

// New returns an engine for cfg.
func New[D Dir](cfg Config[D]) (*Engine[D], error) {
	switch {
	case cfg.Open == nil:
		return nil, errors.New("new directory engine: no Open")
	case cfg.Handle == nil:
		return nil, errors.New("new directory engine: no Handle")
	case cfg.Sweep <= 0:
		return nil, errors.New("new directory engine: the sweep interval is not positive")
	case cfg.Lanes < 0 || cfg.Queue < 0 || cfg.Batch < 0 || cfg.Rotation < 0:
		return nil, errors.New("new directory engine: a negative bound")
	}
	if cfg.Rotation == 0 {
		cfg.Rotation = DefaultRotation
	}
	if cfg.Lanes == 0 {
		cfg.Lanes = DefaultLanes
	}
	if cfg.Queue == 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.KeyField == "" {
		cfg.KeyField = "dir"
	}
	if cfg.Ticker == nil {
		cfg.Ticker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	return &Engine[D]{
		cfg:      cfg,
		done:     make(chan struct{}),
		dirs:     make(map[string]*dir[D]),
		stopping: make(map[string]*dir[D]),
	}, nil
}

// dir is one watched directory: its worker, which runs only while the
// directory has something to look at (see signal and work), and what the
// worker knows of it.
type dir[D Dir] struct {
	key    string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when d is stopped and its worker and jobs are done
	prev   *dir[D]       // the worker of an earlier Add of the key, waited for

	// watchLost is set by the watcher when the watched directory went away.
	watchLost atomic.Bool

	// Owned by the running worker (one at a time: see running).
	wd  int32  // the inotify watch, -1 for none
	ino fileID // the directory it is on

	jobs  sync.WaitGroup // side lanes
	space chan struct{}  // capacity 1: the queue has room again

	mu       sync.Mutex
	pending  bool            // signalled since the running worker's last look
	running  bool            // a worker goroutine runs (or winds down a stopped d)
	stopped  bool            // removed, or the engine stops: no new worker
	inFlight map[string]bool // files whose job runs or is queued
	lanes    int             // side lanes running, at most Config.Lanes
	queue    []queued[D]     // jobs waiting for a lane
}

type fileID struct{ dev, ino uint64 }

// held is a directory opened for a pass, with the count of its users: the
// pass and each job it handed on.
type held[D Dir] struct {
	d    D
	refs atomic.Int32
}

func (h *held[D]) release() {
	if h.refs.Add(-1) == 0 {
		_ = h.d.Close()
	}
}

// queued is a job waiting for a side lane. It holds a reference on the
// directory it came from.
type queued[D Dir] struct {
	name string
	job  Job
	h    *held[D]
}

// Start starts watching: from now on Add takes directories. The engine runs
// until ctx ends; then it stops every worker, lets running jobs finish,
// and drops the watches; Wait waits for that. Start may be called once; it
// fails if the inotify instance cannot be made.
func (e *Engine[D]) Start(ctx context.Context) error {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return errors.New("already started")
	}
	e.started = true
	e.mu.Unlock()
	var w *watcher[D]
	if !e.cfg.noWatch {
		var err error
		if w, err = newWatcher[D](); err != nil {
			close(e.done)
			return err
		}
		go func() {
			if err := w.run(e.signal, e.Sweep); err != nil {
				e.cfg.Log.Error().Err(err).Msg("inotify watcher stopped; files are found by the sweep only")
			}
		}()
	}
	ctx, cancel := context.WithCancel(ctx)
	e.mu.Lock()
	e.w, e.ctx = w, ctx
	e.mu.Unlock()
	tick, stopTick := e.cfg.Ticker(e.cfg.Sweep)
	go func() {
		defer close(e.done)
		defer cancel()
		defer stopTick()
		for {
			select {
			case <-ctx.Done():
				e.shutdown(w)
				return
			case <-tick:
				e.sweepTick()
			}
		}
	}()
	return nil
}

// shutdown stops every directory and waits for their workers and jobs, then
// closes the watcher.
func (e *Engine[D]) shutdown(w *watcher[D]) {
	e.mu.Lock()
	e.ctx = nil
	for _, d := range e.dirs {
		e.stop(d)
	}
	clear(e.dirs)
	e.ring, e.next = nil, 0
	clear(e.stopping)
	e.mu.Unlock()
	e.workers.Wait()
	if w != nil {
		_ = w.close()
		<-w.done
	}
	e.mu.Lock()
	e.w = nil
	e.mu.Unlock()
}

// Wait waits until the engine Start started has stopped (its context ended)
// and every worker and job is done. It returns at once if Start failed;
// without Start it blocks forever.
func (e *Engine[D]) Wait() { <-e.done }

// Add watches the directory of key; a worker looks at it at once, for the
// files already there. It does nothing unless the engine runs, or if key is
// watched already. It never blocks on a worker.
func (e *Engine[D]) Add(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctx == nil || e.dirs[key] != nil {
		return
	}
	ctx, cancel := context.WithCancel(e.ctx)
	d := &dir[D]{
		key:      key,
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		wd:       -1,
		space:    make(chan struct{}, 1),
		inFlight: make(map[string]bool),
	}
	// A key removed and added again never has two workers at once.
	d.prev = e.stopping[key]
	delete(e.stopping, key)
	e.dirs[key] = d
	e.ring = append(e.ring, key)
	e.signal(d)
}

// Remove stops watching the directory of key: no worker starts for it after
// this, the running one ends after the file in hand, and running jobs are
// told to stop (their context ends). It does not wait for them, so a
// handler may remove its own key.
func (e *Engine[D]) Remove(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.dirs[key]
	if d == nil {
		return
	}
	delete(e.dirs, key)
	if i := slices.Index(e.ring, key); i >= 0 {
		e.ring = slices.Delete(e.ring, i, i+1)
		if e.next > i {
			e.next--
		}
	}
	e.stop(d)
	e.stopping[key] = d
}

// Keys returns the keys watched and whether the engine runs (before Start
// and once it stops, it watches none).
func (e *Engine[D]) Keys() (keys []string, running bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.dirs {
		keys = append(keys, k)
	}
	return keys, e.ctx != nil
}

// Workers returns how many watched directories have a worker running.
func (e *Engine[D]) Workers() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, d := range e.dirs {
		d.mu.Lock()
		if d.running {
			n++
		}
		d.mu.Unlock()
	}
	return n
}

// Sweep has every directory looked at, as if an event had come for each. It
// never blocks.
func (e *Engine[D]) Sweep() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.dirs {
		e.signal(d)
	}
}

// sweepTick is the periodic sweep: every directory without Config.Hot, else
// the hot ones and the next Config.Rotation of the rest.
func (e *Engine[D]) sweepTick() {
	if e.cfg.Hot == nil {
		e.Sweep()
		return
	}
	hot := e.cfg.Hot()
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := make(map[string]bool, len(hot))
	for _, k := range hot {
		if d := e.dirs[k]; d != nil && !seen[k] {
			seen[k] = true
			e.signal(d)
		}
	}
	n := min(e.cfg.Rotation, len(e.ring))
	for i := range n {
		if k := e.ring[(e.next+i)%len(e.ring)]; !seen[k] {
			e.signal(e.dirs[k])
		}
	}
	if len(e.ring) > 0 {
		e.next = (e.next + n) % len(e.ring)
	}
}

// signal has d's worker look at its directory: the running one looks again
// when its pass is done, or a new one starts. It never blocks.
func (e *Engine[D]) signal(d *dir[D]) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	d.pending = true
	if !d.running {
		e.launch(d)
	}
}

// launch starts a worker for d, which has none; d.mu is held. The WaitGroup
// is added to under d.mu before d is stopped, so never after shutdown's
// Wait began.
func (e *Engine[D]) launch(d *dir[D]) {
	d.running = true
	e.workers.Add(1)
	go e.work(d)
}

// stop ends d's watching: no worker starts after it, the running one ends
// after the file in hand, and done is closed once it and the jobs are done.
func (e *Engine[D]) stop(d *dir[D]) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	d.stopped = true
	d.cancel()
	if !d.running {
		e.launch(d) // it finds d stopped and only winds it down
	}
}

// work is a directory's worker: it handles what is in the directory, a
// bounded batch at a time, until nothing is left and no signal came
// meanwhile, then ends. Once d is stopped it waits for the jobs, drops the
// watch and closes done.
func (e *Engine[D]) work(d *dir[D]) {
	defer e.workers.Done()
	ctx := d.ctx
	if d.prev != nil {
		<-d.prev.done
		d.prev = nil
	}
	for {
		d.mu.Lock()
		if ctx.Err() != nil {
			d.mu.Unlock()
			break
		}
		if !d.pending {
			d.running = false
			d.mu.Unlock()
			if e.cfg.Idle != nil {
				e.cfg.Idle(d.key)
			}
			return
		}
		d.pending = false
		d.mu.Unlock()
		for ctx.Err() == nil && e.pass(ctx, d) {
		}
	}
	// Stopped: no worker starts again (stop set stopped before cancelling),
	// so this one winds d down.
	d.jobs.Wait()
	if d.wd >= 0 {
		if w := e.watcher(); w != nil {
			w.remove(d.wd, d)
		}
	}
	close(d.done)
}

func (e *Engine[D]) watcher() *watcher[D] {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.w
}

// pass handles one batch of d's files. It reports whether more files are
// waiting and this pass dealt with some (a directory whose files cannot be
// removed is not spun on: the next event or sweep tries again).
func (e *Engine[D]) pass(ctx context.Context, d *dir[D]) (again bool) {
	log := e.cfg.Log.With().Str(e.cfg.KeyField, d.key).Logger()
	defer func() {
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("directory worker pass panicked")
			again = false
		}
	}()
	od, err := e.cfg.Open(ctx, d.key)
	if err != nil {
		log.Warn().Err(err).Msg("open directory")
		return false
	}
	h := &held[D]{d: od}
	h.refs.Store(1)
	defer h.release()
	e.ensureWatch(log, d, od)
	// Files whose job runs or waits (at most Lanes+Queue) are still in the
	// directory: list past them, so that a full batch of new names comes
	// back whenever there are that many.
	names, more, err := od.List(e.cfg.Batch + e.cfg.Lanes + 1 + e.cfg.Queue)
	if err != nil {
		log.Warn().Err(err).Msg("list directory")
		return false
	}
	progress := false
	for _, name := range names {
		if ctx.Err() != nil {
			return false
		}
		d.mu.Lock()
		busy := d.inFlight[name]
		d.mu.Unlock()
		if busy {
			continue
		}
		done, job := e.cfg.Handle(ctx, d.key, od, name)
		if job != nil {
			done = e.dispatch(ctx, d, queued[D]{name: name, job: job, h: h})
		}
		if done {
			progress = true
		}
	}
	return more && progress
}

// ensureWatch (re)watches d when the directory watched is no longer the one
// the pass just opened: it was deleted or renamed, or replaced. The watch is
// added before the directory is listed, so nothing created in the new
// directory is missed.
func (e *Engine[D]) ensureWatch(log zerolog.Logger, d *dir[D], od D) {
	w := e.watcher()
	if w == nil {
		return
	}
	fi, err := od.Stat()
	if err != nil {
		log.Warn().Err(err).Msg("inspect directory")
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	id := fileID{dev: uint64(st.Dev), ino: st.Ino}
	lost := d.watchLost.Swap(false)
	if d.wd >= 0 && id == d.ino && !lost {
		return
	}
	if d.wd >= 0 {
		w.remove(d.wd, d)
		d.wd = -1
	}
	wd, err := w.add(od.Path(), d)
	if err != nil {
		log.Warn().Err(err).Msg("watch directory; new files are found by the sweep until the next try")
		return
	}
	d.wd, d.ino = wd, id
}

// dispatch hands a job to a side lane: a new one while fewer than Lanes run,
// else the queue, which the lanes work through. Only when the queue is full
// too does the worker wait. It reports false if ctx ended first.
func (e *Engine[D]) dispatch(ctx context.Context, d *dir[D], q queued[D]) bool {
	for {
		d.mu.Lock()
		switch {
		case d.lanes < e.cfg.Lanes:
			d.lanes++
			d.inFlight[q.name] = true
			d.mu.Unlock()
			q.h.refs.Add(1)
			d.jobs.Add(1)
			go e.lane(ctx, d, q)
			return true
		case len(d.queue) < e.cfg.Queue:
			d.queue = append(d.queue, q)
			d.inFlight[q.name] = true
			d.mu.Unlock()
			q.h.refs.Add(1)
			return true
		}
		d.mu.Unlock()
		select {
		case <-d.space:
		case <-ctx.Done():
			return false
		}
	}
}

// lane runs q, then the queued jobs one after the other, until the queue is
// empty. When ctx ended, queued jobs are dropped: their files stay in the
// directory for the next start.
func (e *Engine[D]) lane(ctx context.Context, d *dir[D], q queued[D]) {
	defer d.jobs.Done()
	for {
		e.run(ctx, d, q)
		d.mu.Lock()
		delete(d.inFlight, q.name)
		if len(d.queue) == 0 || ctx.Err() != nil {
			dropped := d.queue
			d.queue = nil
			for _, q := range dropped {
				delete(d.inFlight, q.name)
			}
			d.lanes--
			d.mu.Unlock()
			for _, q := range dropped {
				q.h.release()
			}
			return
		}
		q = d.queue[0]
		d.queue[0] = queued[D]{}
		d.queue = d.queue[1:]
		d.mu.Unlock()
		select {
		case d.space <- struct{}{}:
		default:
		}
	}
}

// run runs one job and releases its directory; a panic is logged, never
// allowed to take the lane's count with it.
func (e *Engine[D]) run(ctx context.Context, d *dir[D], q queued[D]) {
	defer q.h.release()
	defer func() {
		if r := recover(); r != nil {
			e.cfg.Log.Error().Str(e.cfg.KeyField, d.key).Str("file", q.name).Interface("panic", r).
				Bytes("stack", debug.Stack()).Msg("directory job panicked")
		}
	}()
	q.job(ctx)
}
