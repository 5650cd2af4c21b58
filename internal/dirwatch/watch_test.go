package dirwatch

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// These tests use real directories and inotify; the sweep's ticker is a
// channel the test fires, so a file is found by its event or by a tick the
// test sends, never by the clock.

// osDir is a real directory, opened by path.
type osDir struct{ path string }

func (d osDir) Path() string               { return d.path }
func (d osDir) Stat() (fs.FileInfo, error) { return os.Lstat(d.path) }
func (d osDir) Close() error               { return nil }

func (d osDir) List(limit int) ([]string, bool, error) {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return nil, false, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	if len(names) > limit {
		return names[:limit], true, nil
	}
	return names, false, nil
}

// watchRig runs an engine over real directories under root, keyed by
// their names; handled gets each file removed, idle each worker's end.
type watchRig struct {
	root    string
	e       *Engine[osDir]
	tick    chan time.Time
	handled chan string
	idle    chan string
}

func newWatchRig(t *testing.T) *watchRig {
	t.Helper()
	r := &watchRig{
		root:    t.TempDir(),
		tick:    make(chan time.Time),
		handled: make(chan string, 100),
		idle:    make(chan string, 100),
	}
	e, err := New(Config[osDir]{
		Open: func(_ context.Context, key string) (osDir, error) {
			d := osDir{filepath.Join(r.root, key)}
			if _, err := os.Stat(d.path); err != nil {
				return osDir{}, err
			}
			return d, nil
		},
		Handle: func(ctx context.Context, key string, d osDir, name string) (bool, Job) {
			err := os.Remove(filepath.Join(d.path, name))
			r.handled <- key + "/" + name
			return err == nil, nil
		},
		Sweep:  time.Hour,
		Ticker: func(time.Duration) (<-chan time.Time, func()) { return r.tick, func() {} },
		Log:    zerolog.New(zerolog.NewTestWriter(t)),
		Idle:   func(key string) { r.idle <- key },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		e.Wait()
	})
	r.e = e
	return r
}

func (r *watchRig) mkdir(t *testing.T, key string) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(r.root, key), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (r *watchRig) write(t *testing.T, key, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(r.root, key, name), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits for want on ch, with a deadline generous for a busy machine.
func waitFor(t *testing.T, ch <-chan string, want, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("%s: %s not seen within 10s", what, want)
		}
	}
}

// A file written into a watched directory is handled at once, with no
// sweep: the inotify event starts the directory's worker.
func TestNewFileHandledOnItsEvent(t *testing.T) {
	r := newWatchRig(t)
	r.mkdir(t, "a")
	r.e.Add("a")
	waitFor(t, r.idle, "a", "the first look")
	r.write(t, "a", "1.json")
	waitFor(t, r.handled, "a/1.json", "the file written after the watch")
}

// A watched directory deleted or renamed and made again is watched again
// at the next pass that opens it: its new files come by event again.
func TestReplacedDirectoryWatchedAgain(t *testing.T) {
	r := newWatchRig(t)
	r.mkdir(t, "a")
	r.e.Add("a")
	waitFor(t, r.idle, "a", "the first look")
	path := filepath.Join(r.root, "a")
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	r.mkdir(t, "a")
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	r.tick <- time.Now() // a sweep: a pass opens the new directory
	deadline := time.After(10 * time.Second)
	for watched := false; !watched; {
		select {
		case <-r.idle:
		case <-deadline:
			t.Fatal("the new directory was not watched within 10s")
		}
		r.e.inspect("a", func(d *dir[osDir]) { watched = d.wd >= 0 && d.ino.ino == ino })
	}
	r.write(t, "a", "2.json")
	waitFor(t, r.handled, "a/2.json", "the file written into the new directory")
	// The old directory, now elsewhere, is not watched for a.
	if err := os.WriteFile(path+".old/3.json", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.write(t, "a", "4.json")
	waitFor(t, r.handled, "a/4.json", "a later file")
}

// A key whose path leads to another key's directory is not watched: by a
// link, which the watch never follows, or by another path to the same
// directory, whose watch is the first key's. The first key keeps its
// events.
func TestAnotherKeysDirectoryIsNotWatched(t *testing.T) {
	r := newWatchRig(t)
	r.mkdir(t, "a")
	if err := os.Symlink("a", filepath.Join(r.root, "link")); err != nil {
		t.Fatal(err)
	}
	r.e.Add("a")
	waitFor(t, r.idle, "a", "a's first look")
	for _, key := range []string{"link", "a/."} {
		r.e.Add(key)
		waitFor(t, r.idle, key, key+"'s first look")
		r.e.inspect(key, func(d *dir[osDir]) {
			if d.wd >= 0 {
				t.Errorf("%s, a's directory, was watched for %s; want it refused", key, key)
			}
		})
	}
	r.write(t, "a", "1.json")
	waitFor(t, r.handled, "a/1.json", "a's file")
}
