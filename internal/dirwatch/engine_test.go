package dirwatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
)

// The tests of the workers run in a synctest bubble: its clock is fake (the
// sweep's ticker fires when the test sleeps a sweep, at once), and
// synctest.Wait returns once every goroutine of the engine is blocked, so
// "nothing more happens" is checked exactly, without waiting on the wall
// clock. The directories are in memory and found by the sweep only (no
// inotify, see noWatch); watch_test.go covers the watches.

const sweep = 3 * time.Second

// memFS holds directories in memory, a set of file names per key.
type memFS struct {
	t  *testing.T
	mu sync.Mutex
	// files by key and name; a missing key cannot be opened.
	files  map[string]map[string]bool
	open   int      // directories open
	limits []int    // what each List asked for
	opened []string // the keys Open was called for
}

func newMemFS(t *testing.T) *memFS { return &memFS{t: t, files: map[string]map[string]bool{}} }

// add puts files into key's directory, making it if needed.
func (m *memFS) add(key string, names ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files[key] == nil {
		m.files[key] = map[string]bool{}
	}
	for _, n := range names {
		m.files[key][n] = true
	}
}

// remove removes a file; it reports whether it was there.
func (m *memFS) remove(key, name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	ok := m.files[key][name]
	delete(m.files[key], name)
	return ok
}

func (m *memFS) count(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.files[key])
}

func (m *memFS) openDirs() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.open
}

func (m *memFS) Open(_ context.Context, key string) (*memDir, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opened = append(m.opened, key)
	if m.files[key] == nil {
		return nil, fmt.Errorf("open %s: %w", key, fs.ErrNotExist)
	}
	m.open++
	return &memDir{fs: m, key: key}, nil
}

// memDir is one opened directory of a memFS.
type memDir struct {
	fs     *memFS
	key    string
	closed bool // under fs.mu
}

func (d *memDir) Path() string               { return "/nonexistent/" + d.key }
func (d *memDir) Stat() (fs.FileInfo, error) { return nil, errors.New("in memory") }

func (d *memDir) List(limit int) ([]string, bool, error) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	if d.closed {
		d.fs.t.Errorf("%s listed after it was closed", d.key)
	}
	d.fs.limits = append(d.fs.limits, limit)
	var names []string
	for n := range d.fs.files[d.key] {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) > limit {
		return names[:limit], true, nil
	}
	return names, false, nil
}

func (d *memDir) Close() error {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	if d.closed {
		d.fs.t.Errorf("%s closed twice", d.key)
	}
	d.closed = true
	d.fs.open--
	return nil
}

// rig is an engine over a memFS whose handler removes each file and
// records it, unless the test's handle says otherwise.
type rig struct {
	t      *testing.T
	fs     *memFS
	e      *Engine[*memDir]
	cancel context.CancelFunc

	mu      sync.Mutex
	handled []string       // key/name, in order
	idle    map[string]int // workers ended, by key
	active  map[string]int // handler calls in progress, by key
	most    int            // the most handler calls of one key at once
}

// newRig starts an engine in the test's bubble; tweak adjusts its config,
// handle (if not nil) decides each file after the rig counted the call.
func newRig(t *testing.T, tweak func(*Config[*memDir]), handle Handler[*memDir]) *rig {
	t.Helper()
	r := &rig{t: t, fs: newMemFS(t), idle: map[string]int{}, active: map[string]int{}}
	cfg := Config[*memDir]{
		Open:  r.fs.Open,
		Sweep: sweep,
		Log:   zerolog.New(zerolog.NewTestWriter(t)),
		Idle: func(key string) {
			r.mu.Lock()
			r.idle[key]++
			r.mu.Unlock()
		},
		noWatch: true,
	}
	cfg.Handle = func(ctx context.Context, key string, d *memDir, name string) (bool, Job) {
		r.mu.Lock()
		r.active[key]++
		r.most = max(r.most, r.active[key])
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.active[key]--
			r.mu.Unlock()
		}()
		if handle != nil {
			return handle(ctx, key, d, name)
		}
		r.done(key, name)
		return r.fs.remove(key, name), nil
	}
	if tweak != nil {
		tweak(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r.e, r.cancel = e, cancel
	t.Cleanup(func() { // also after a failure, so the bubble's goroutines end
		cancel()
		e.Wait()
	})
	return r
}

// done records that key's file name was dealt with.
func (r *rig) done(key, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handled = append(r.handled, key+"/"+name)
}

func (r *rig) handledFiles() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.handled)
}

func (r *rig) wasHandled(key, name string) bool {
	return slices.Contains(r.handledFiles(), key+"/"+name)
}

// mostAtOnce is the most handler calls of one key that were in progress at
// once.
func (r *rig) mostAtOnce() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.most
}

func (r *rig) idleCount(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.idle[key]
}

// stop stops the engine, waits for it, and checks that every directory it
// opened was closed.
func (r *rig) stop() {
	r.t.Helper()
	r.cancel()
	r.e.Wait()
	if n := r.fs.openDirs(); n != 0 {
		r.t.Errorf("%d directories still open after the engine stopped; want 0", n)
	}
}

// Files already in a directory when it is added are handled at once; a file
// written later is found by the next sweep.
func TestFilesHandledOnAddAndOnTheSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil, nil)
		r.fs.add("a", "1.json", "2.json")
		r.e.Add("a")
		synctest.Wait()
		if got := r.handledFiles(); !slices.Equal(got, []string{"a/1.json", "a/2.json"}) {
			t.Fatalf("handled %v; want a's two files, in name order", got)
		}
		r.fs.add("a", "3.json")
		synctest.Wait()
		if r.wasHandled("a", "3.json") {
			t.Fatal("a file was handled without an event or a sweep")
		}
		time.Sleep(sweep)
		synctest.Wait()
		if !r.wasHandled("a", "3.json") {
			t.Fatal("the sweep did not find the new file")
		}
		r.stop()
	})
}

// An idle directory holds no worker: a worker runs while its directory has
// something to look at and ends when a pass finds nothing.
func TestIdleDirectoriesHoldNoWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil, nil)
		for i := range 30 {
			key := fmt.Sprintf("d%02d", i)
			r.fs.add(key)
		}
		r.fs.add("d07", "x.json")
		for i := range 30 {
			r.e.Add(fmt.Sprintf("d%02d", i))
		}
		synctest.Wait()
		if n := r.e.Workers(); n != 0 {
			t.Fatalf("%d workers run with every directory looked at; want 0", n)
		}
		if n := r.idleCount("d29"); n != 1 {
			t.Errorf("d29's worker ended %d times; want 1", n)
		}
		if !r.wasHandled("d07", "x.json") {
			t.Error("d07's file was not handled")
		}
		// The sweep starts a worker per directory, and each ends again.
		time.Sleep(sweep)
		synctest.Wait()
		if n := r.e.Workers(); n != 0 {
			t.Fatalf("%d workers run after a sweep found nothing; want 0", n)
		}
		if n := r.idleCount("d29"); n != 2 {
			t.Errorf("d29's worker ended %d times; want 2", n)
		}
		if keys, running := r.e.Keys(); len(keys) != 30 || !running {
			t.Errorf("Keys = %d keys, running %v; want 30, true", len(keys), running)
		}
		r.stop()
		if keys, running := r.e.Keys(); len(keys) != 0 || running {
			t.Errorf("after the stop Keys = %v, running %v; want none, false", keys, running)
		}
	})
}

// However often a directory is signalled while its worker is busy, one
// worker handles its files, one at a time; the signals make it look again
// once, not start another.
func TestOneWorkerPerDirectory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var r *rig
		r = newRig(t, nil, func(ctx context.Context, key string, d *memDir, name string) (bool, Job) {
			<-gate
			r.done(key, name)
			return r.fs.remove(key, name), nil
		})
		r.fs.add("a", "1.json", "2.json", "3.json")
		r.e.Add("a")
		for range 5 {
			r.e.Sweep()
			time.Sleep(sweep) // the ticker's sweeps too
		}
		synctest.Wait()
		if n := r.e.Workers(); n != 1 {
			t.Errorf("%d workers run; want 1", n)
		}
		close(gate)
		synctest.Wait()
		if r.mostAtOnce() != 1 {
			t.Errorf("%d files of one directory handled at once; want 1", r.mostAtOnce())
		}
		if got := r.handledFiles(); len(got) != 3 {
			t.Errorf("handled %v; want each file once", got)
		}
		r.stop()
	})
}

// A key removed while its worker is busy and added again gets a new worker
// only once the old one is done: never two at once.
func TestReAddedKeyWaitsForTheOldWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var r *rig
		r = newRig(t, nil, func(ctx context.Context, key string, d *memDir, name string) (bool, Job) {
			if name == "1.json" {
				<-gate
			}
			r.done(key, name)
			return r.fs.remove(key, name), nil
		})
		r.fs.add("a", "1.json", "2.json")
		r.e.Add("a")
		synctest.Wait() // the worker holds 1.json
		r.e.Remove("a")
		r.e.Add("a")
		synctest.Wait()
		if got := r.handledFiles(); len(got) != 0 {
			t.Fatalf("handled %v while the old worker still held 1.json; want nothing", got)
		}
		close(gate)
		synctest.Wait()
		if got := r.handledFiles(); !slices.Equal(got, []string{"a/1.json", "a/2.json"}) {
			t.Errorf("handled %v; want 1.json by the old worker, then 2.json by the new", got)
		}
		if r.mostAtOnce() != 1 {
			t.Errorf("%d handler calls of one key at once; want 1", r.mostAtOnce())
		}
		// The removed registration's worker ended without a pass of its
		// own after 1.json (its context ended): the new one took 2.json.
		r.stop()
	})
}

// A directory whose handler is stuck holds up none of the others.
func TestBusyDirectoryHoldsUpNoOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var r *rig
		r = newRig(t, nil, func(ctx context.Context, key string, d *memDir, name string) (bool, Job) {
			if key == "flood" {
				<-gate
			}
			r.done(key, name)
			return r.fs.remove(key, name), nil
		})
		for i := range 1000 {
			r.fs.add("flood", fmt.Sprintf("%04d.json", i))
		}
		r.fs.add("quiet")
		r.e.Add("flood")
		r.e.Add("quiet")
		synctest.Wait()
		r.fs.add("quiet", "q.json")
		time.Sleep(sweep)
		synctest.Wait()
		if !r.wasHandled("quiet", "q.json") {
			t.Fatal("quiet's file waited for flood's")
		}
		close(gate)
		synctest.Wait()
		if n := r.fs.count("flood"); n != 0 {
			t.Errorf("%d of flood's files left; want 0 (passes follow each other while files remain)", n)
		}
		r.stop()
	})
}

// A pass lists a bounded batch (past the files whose jobs run or wait), and
// passes follow each other until the directory is empty.
func TestPassesListBoundedBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(c *Config[*memDir]) { c.Batch, c.Lanes, c.Queue = 10, 2, 3 }, nil)
		for i := range 95 {
			r.fs.add("a", fmt.Sprintf("%03d.json", i))
		}
		r.e.Add("a")
		synctest.Wait()
		if n := len(r.handledFiles()); n != 95 {
			t.Errorf("%d files handled; want 95", n)
		}
		r.fs.mu.Lock()
		limits := slices.Clone(r.fs.limits)
		r.fs.mu.Unlock()
		for _, l := range limits {
			if l != 10+2+1+3 {
				t.Fatalf("List asked for %d names; want 16 (a batch past the files in flight)", l)
			}
		}
		if len(limits) != 6 {
			t.Errorf("%d passes for 95 files in lists of 16; want 6", len(limits))
		}
		r.stop()
	})
}

// A file that cannot be dealt with (it stays in the directory) is not spun
// on: the worker ends after one pass and tries again at the next sweep.
func TestUndeletableFilesAreNotSpunOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		r := newRig(t, func(c *Config[*memDir]) { c.Batch, c.Lanes, c.Queue = 4, 1, 1 },
			func(ctx context.Context, key string, d *memDir, name string) (bool, Job) {
				calls.Add(1)
				return false, nil
			})
		for i := range 20 {
			r.fs.add("a", fmt.Sprintf("%02d.json", i))
		}
		r.e.Add("a")
		synctest.Wait()
		if n, w := calls.Load(), r.e.Workers(); n != 7 || w != 0 {
			t.Fatalf("%d handler calls, %d workers; want one pass of 7 (4+1+1+1) and no worker left", n, w)
		}
		time.Sleep(sweep)
		synctest.Wait()
		if n := calls.Load(); n != 14 {
			t.Errorf("%d handler calls after a sweep; want 14", n)
		}
		r.stop()
	})
}

// Jobs run on side lanes, at most Lanes at once, then wait in a queue of
// at most Queue; while there is room, the directory's other files are not
// held up. Only a full queue makes the worker wait.
func TestJobsBoundedAndBackPressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var mu sync.Mutex
		running, most, ran := 0, 0, 0
		var r *rig
		r = newRig(t, func(c *Config[*memDir]) { c.Lanes, c.Queue = 2, 3 },
			func(ctx context.Context, key string, d *memDir, name string) (bool, Job) {
				if name[0] != 's' {
					r.done(key, name)
					return r.fs.remove(key, name), nil
				}
				return true, func(ctx context.Context) {
					mu.Lock()
					running++
					most = max(most, running)
					mu.Unlock()
					<-gate
					mu.Lock()
					running--
					ran++
					mu.Unlock()
					r.done(key, name)
					r.fs.remove(key, name)
				}
			})
		// 5 slow files fill the lanes and the queue; the quick one after
		// them is not held up.
		r.fs.add("a", "s1", "s2", "s3", "s4", "s5", "t-quick")
		r.e.Add("a")
		synctest.Wait()
		if !r.wasHandled("a", "t-quick") {
			t.Fatal("a quick file waited for the slow jobs while the queue had room")
		}
		if n := locked(&mu, &running); n != 2 {
			t.Errorf("%d jobs running; want 2 (the lanes)", n)
		}
		// A sweep meanwhile does not start the files in flight again.
		time.Sleep(sweep)
		synctest.Wait()
		// One more slow file finds the queue full: the worker waits, and the
		// quick file after it waits with it.
		r.fs.add("a", "s6", "u-quick")
		time.Sleep(sweep)
		synctest.Wait()
		if r.wasHandled("a", "u-quick") {
			t.Error("a file behind a full queue was handled; want the worker to wait for room")
		}
		if n := r.e.Workers(); n != 1 {
			t.Errorf("%d workers; want 1, waiting for room in the queue", n)
		}
		close(gate)
		synctest.Wait()
		if n := locked(&mu, &ran); !r.wasHandled("a", "u-quick") || n != 6 {
			t.Errorf("handled %v, %d jobs ran; want all six jobs and both quick files", r.handledFiles(), n)
		}
		if n := locked(&mu, &most); n != 2 {
			t.Errorf("%d jobs at once; want at most (and at some point) 2", n)
		}
		if n := r.fs.count("a"); n != 0 {
			t.Errorf("%d files left; want 0", n)
		}
		r.stop()
	})
}

// locked reads *n under mu.
func locked(mu *sync.Mutex, n *int) int {
	mu.Lock()
	defer mu.Unlock()
	return *n
}

// Removing a directory ends its running jobs' context and drops its queued
// ones, whose files stay for the next start; the directory is closed once
// the last job is done.
func TestRemoveDropsQueuedJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		ran := 0
		r := newRig(t, func(c *Config[*memDir]) { c.Lanes, c.Queue = 1, 3 },
			func(ctx context.Context, key string, d *memDir, name string) (bool, Job) {
				return true, func(ctx context.Context) {
					<-ctx.Done()
					mu.Lock()
					ran++
					mu.Unlock()
				}
			})
		r.fs.add("a", "s1", "s2", "s3", "s4")
		r.e.Add("a")
		synctest.Wait()
		if n := r.fs.openDirs(); n != 1 {
			t.Errorf("%d directories open with jobs in flight; want 1", n)
		}
		r.e.Remove("a")
		synctest.Wait()
		if n := locked(&mu, &ran); n != 1 {
			t.Errorf("%d jobs ran; want 1 (the running one, told to stop; the queued dropped)", n)
		}
		if n := r.fs.openDirs(); n != 0 {
			t.Errorf("%d directories open after the last job; want 0", n)
		}
		if n := r.fs.count("a"); n != 4 {
			t.Errorf("%d files left; want all 4", n)
		}
		r.stop()
	})
}

// A panicking handler or job is logged; the engine carries on, and a lane
// whose job panicked is free again.
func TestPanicsAreContained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r *rig
		r = newRig(t, func(c *Config[*memDir]) { c.Lanes = 1 },
			func(ctx context.Context, key string, d *memDir, name string) (bool, Job) {
				switch name {
				case "bad-handler":
					r.fs.remove(key, name)
					panic("handler")
				case "bad-job":
					return true, func(context.Context) {
						r.fs.remove(key, name)
						panic("job")
					}
				}
				r.done(key, name)
				return r.fs.remove(key, name), nil
			})
		r.fs.add("a", "bad-handler", "bad-job")
		r.e.Add("a")
		synctest.Wait()
		r.fs.add("a", "good")
		r.e.Sweep()
		synctest.Wait()
		if !r.wasHandled("a", "good") {
			t.Error("a file after the panics was not handled")
		}
		r.e.inspect("a", func(d *dir[*memDir]) {
			if d.lanes != 0 || len(d.inFlight) != 0 {
				t.Errorf("%d lanes busy, %d files in flight after the panicking job; want 0", d.lanes, len(d.inFlight))
			}
		})
		r.stop()
	})
}

// inspect calls f with key's directory state, under its lock.
func (e *Engine[D]) inspect(key string, f func(*dir[D])) {
	e.mu.Lock()
	d := e.dirs[key]
	e.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

// A directory that cannot be opened is tried again at the next sweep.
func TestUnopenableDirectoryTriedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, nil, nil)
		r.e.Add("late")
		synctest.Wait()
		r.fs.add("late", "x.json")
		time.Sleep(sweep)
		synctest.Wait()
		if !r.wasHandled("late", "x.json") {
			t.Error("a directory made after it was added was never looked at again")
		}
		r.stop()
	})
}

func TestNewValidates(t *testing.T) {
	open := func(context.Context, string) (*memDir, error) { return nil, nil }
	handle := func(context.Context, string, *memDir, string) (bool, Job) { return true, nil }
	for name, cfg := range map[string]Config[*memDir]{
		"no open":        {Handle: handle, Sweep: time.Second},
		"no handle":      {Open: open, Sweep: time.Second},
		"no sweep":       {Open: open, Handle: handle},
		"negative lanes": {Open: open, Handle: handle, Sweep: time.Second, Lanes: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded; want an error", name)
		}
	}
}

// Add, Remove and Sweep before Start and after the stop do nothing; Start
// runs once.
func TestLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newMemFS(t)
		fs.add("a", "x")
		e, err := New(Config[*memDir]{Open: fs.Open, Sweep: sweep, noWatch: true,
			Handle: func(context.Context, string, *memDir, string) (bool, Job) {
				t.Error("a file was handled by an engine not running")
				return false, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		e.Add("a")
		e.Sweep()
		e.Remove("a")
		synctest.Wait()
		if keys, running := e.Keys(); len(keys) != 0 || running {
			t.Errorf("before Start Keys = %v, %v; want none, false", keys, running)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err == nil {
			t.Error("a second Start succeeded; want an error")
		}
		cancel()
		e.Wait()
		e.Add("a")
		e.Sweep()
		synctest.Wait()
		fs.mu.Lock()
		defer fs.mu.Unlock()
		if len(fs.opened) != 0 {
			t.Errorf("opened %v; want nothing", fs.opened)
		}
	})
}

// With Config.Hot, a sweep looks at the hot directories and Rotation of
// the others, in turn: many idle directories cost a sweep what a few do,
// and each is still looked at once a round.
func TestSweepLooksAtHotDirectoriesAndARotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hot []string
		var hotMu sync.Mutex
		r := newRig(t, func(c *Config[*memDir]) {
			c.Rotation = 4
			c.Hot = func() []string {
				hotMu.Lock()
				defer hotMu.Unlock()
				return slices.Clone(hot)
			}
		}, nil)
		const n = 20
		for i := range n {
			r.fs.add(fmt.Sprintf("d%02d", i))
			r.e.Add(fmt.Sprintf("d%02d", i))
		}
		synctest.Wait()
		hotMu.Lock()
		hot = []string{"d13", "gone"}
		hotMu.Unlock()
		looked := func() map[string]int {
			m := map[string]int{}
			for i := range n {
				k := fmt.Sprintf("d%02d", i)
				m[k] = r.idleCount(k) - 1 // the first look was the Add's
			}
			return m
		}
		// A file in the hot directory is found by the next sweep; one in
		// an idle directory waits for its turn in the rotation.
		r.fs.add("d13", "x.json")
		r.fs.add("d19", "y.json")
		time.Sleep(sweep)
		synctest.Wait()
		if !r.wasHandled("d13", "x.json") {
			t.Fatal("the sweep did not look at the hot directory")
		}
		got := looked()
		total := 0
		for _, c := range got {
			total += c
		}
		if total != 5 || got["d13"] != 1 {
			t.Fatalf("one sweep looked at %d directories (%v); want the hot one and 4 others", total, got)
		}
		if r.wasHandled("d19", "y.json") {
			t.Fatal("an idle directory out of its turn was looked at")
		}
		// A round of the rotation (20/4 sweeps) looks at every directory.
		time.Sleep(4 * sweep)
		synctest.Wait()
		if !r.wasHandled("d19", "y.json") {
			t.Fatal("a round of the rotation did not reach every directory")
		}
		for k, c := range looked() {
			if c < 1 {
				t.Errorf("%s was not looked at in a round", k)
			}
		}
		// Removing a directory keeps the rotation going over the rest.
		r.e.Remove("d00")
		time.Sleep(5 * sweep)
		synctest.Wait()
		r.stop()
	})
}
