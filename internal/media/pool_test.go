package media

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

const testWait = 10 * time.Second

// fakeFetcher writes body for every media, after release[name] is closed
// when there is one; err fails every fetch.
type fakeFetcher struct {
	mu      sync.Mutex
	body    []byte
	err     error
	release map[string]chan struct{}
	started chan string // names, as fetches start
	calls   int
}

func (f *fakeFetcher) Fetch(ctx context.Context, m store.Media, dst *os.File, limit int64) error {
	f.mu.Lock()
	f.calls++
	wait := f.release[m.Name]
	body, err := f.body, f.err
	f.mu.Unlock()
	if f.started != nil {
		f.started <- m.Name
	}
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	if int64(len(body)) > limit {
		return fmt.Errorf("fake: %w", ErrTooLarge)
	}
	_, werr := dst.Write(body)
	return werr
}

type fakeTranscriber struct {
	text string
	err  error
	got  chan []byte
}

func (f *fakeTranscriber) Transcribe(ctx context.Context, name string, audio []byte) (string, error) {
	if f.got != nil {
		f.got <- audio
	}
	return f.text, f.err
}

type env struct {
	t       *testing.T
	dir     string
	db      *store.DB
	home    *home.Home
	fetch   *fakeFetcher
	settled chan store.ChatID
	n       int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	db := storetest.OpenHome(t, dir)
	for _, g := range []store.Group{
		{Chat: "c:one", Name: "One", Folder: "one", Trigger: "@Andy", IsMain: true},
		{Chat: "c:two", Name: "Two", Folder: "two", Trigger: "@Andy"},
	} {
		if _, err := db.Groups.Add(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"one", "two"} {
		if err := os.MkdirAll(filepath.Join(dir, "groups", f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &env{t: t, dir: dir, db: db, home: hm, fetch: &fakeFetcher{body: []byte("data")}, settled: make(chan store.ChatID, 100)}
}

// message stores a message of chat with pending media named name.
func (e *env) message(chat store.ChatID, name string, voice bool, size int64) store.Media {
	e.t.Helper()
	ctx := context.Background()
	e.n++
	m := store.Media{Chat: chat, Source: "fake", Ref: []byte(`{}`), Label: "image", Name: name, Size: size, Voice: voice, Head: "look\n"}
	if voice {
		m.Label = "voice note"
	}
	err := e.db.Tx(ctx, func(tx *store.Tx) error {
		id, _, err := tx.Messages.Insert(ctx, store.Message{Chat: chat, ExternalID: fmt.Sprint("m", e.n), Sender: "u", Text: "look\n[" + m.Label + ": downloading]"})
		if err != nil {
			return err
		}
		m.MessageID = id
		return tx.Media.Insert(ctx, m)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) pool(mod func(*Config, *Deps)) *Pool {
	e.t.Helper()
	cfg := Config{}
	d := Deps{Store: e.db, Home: e.home, Fetchers: map[string]Fetcher{"fake": e.fetch},
		Settled: func(c store.ChatID) { e.settled <- c }, Log: zerolog.Nop()}
	if mod != nil {
		mod(&cfg, &d)
	}
	p, err := New(cfg, d)
	if err != nil {
		e.t.Fatal(err)
	}
	p.wait = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	return p
}

// run runs p until the test ends.
func (e *env) run(p *Pool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(testWait):
			e.t.Errorf("pool did not stop within %s", testWait)
		}
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *env) nextSettled() store.ChatID {
	e.t.Helper()
	select {
	case c := <-e.settled:
		return c
	case <-time.After(testWait):
		e.t.Fatalf("no media settled within %s", testWait)
		return ""
	}
}

func (e *env) text(id store.MessageID) string {
	e.t.Helper()
	var err error
	for _, chat := range []store.ChatID{"c:one", "c:two"} {
		ms, err2 := e.db.Messages.After(context.Background(), chat, id-1, 1)
		if err2 == nil && len(ms) == 1 && ms[0].ID == id {
			return ms[0].Text
		}
		err = err2
	}
	e.t.Fatalf("message %d not found: %v", id, err)
	return ""
}

// One slow file delays only its own chat: another chat's media settles
// while it is fetched, and the slow chat's next media waits its turn.
func TestSlowFileDelaysOnlyItsChat(t *testing.T) {
	e := newEnv(t)
	slow := make(chan struct{})
	e.fetch.release = map[string]chan struct{}{"slow.jpg": slow}
	e.fetch.started = make(chan string, 10)
	p := e.pool(nil)
	e.run(p)

	first := e.message("c:one", "slow.jpg", false, 4)
	p.d.Queue.Add(first)
	if got := <-e.fetch.started; got != "slow.jpg" {
		t.Fatalf("first fetch = %s", got)
	}
	second := e.message("c:one", "next.jpg", false, 4)
	p.d.Queue.Add(second)
	other := e.message("c:two", "other.jpg", false, 4)
	p.d.Queue.Add(other)
	if c := e.nextSettled(); c != "c:two" {
		t.Fatalf("settled first = %s; want the other chat while the slow file is fetched", c)
	}
	if got := e.text(other.MessageID); got != "look\n[image: inbox/other.jpg]" {
		t.Fatalf("other chat's text = %q", got)
	}
	if got := e.text(second.MessageID); got != "look\n[image: downloading]" {
		t.Fatalf("the slow chat's next media = %q; want it still waiting its turn", got)
	}
	close(slow)
	for range 2 {
		if c := e.nextSettled(); c != "c:one" {
			t.Fatalf("settled %s; want c:one", c)
		}
	}
	for _, name := range []string{"slow.jpg", "next.jpg"} {
		if b, err := os.ReadFile(filepath.Join(e.dir, "groups", "one", "inbox", name)); err != nil || string(b) != "data" {
			t.Fatalf("inbox/%s = %q, %v", name, b, err)
		}
	}
	if got := e.text(second.MessageID); got != "look\n[image: inbox/next.jpg]" {
		t.Fatalf("second text = %q", got)
	}
}

// Media left pending by a daemon that died are fetched at the next start; a
// file saved before the crash is fetched again, not trusted; a media whose
// fetch started too often is given up on.
func TestPendingMediaResumeAtStart(t *testing.T) {
	e := newEnv(t)
	m := e.message("c:one", "a.jpg", false, 4)
	inbox := filepath.Join(e.dir, "groups", "one", "inbox")
	if err := os.MkdirAll(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inbox, "a.jpg"), []byte("planted by the agent"), 0o644); err != nil {
		t.Fatal(err)
	}
	doomed := e.message("c:two", "b.jpg", false, 4)
	for range DefaultMaxStarts {
		if _, err := e.db.Media.Start(context.Background(), doomed.MessageID); err != nil {
			t.Fatal(err)
		}
	}
	e.run(e.pool(nil)) // nothing added: both come from the store
	e.nextSettled()
	e.nextSettled()
	if b, _ := os.ReadFile(filepath.Join(inbox, "a.jpg")); string(b) != "data" {
		t.Fatalf("inbox/a.jpg = %q; want the fetched file", b)
	}
	if got := e.text(m.MessageID); got != "look\n[image: inbox/a.jpg]" {
		t.Fatalf("resumed text = %q", got)
	}
	if got := e.text(doomed.MessageID); got != "look\n[image: download failed: gave up after 3 tries]" {
		t.Fatalf("text after too many starts = %q", got)
	}
}

// A shutdown leaves the media in flight pending, for the next start.
func TestShutdownLeavesMediaPending(t *testing.T) {
	e := newEnv(t)
	e.fetch.release = map[string]chan struct{}{"a.jpg": make(chan struct{})}
	e.fetch.started = make(chan string, 1)
	p := e.pool(nil)
	stop := e.run(p)
	m := e.message("c:one", "a.jpg", false, 4)
	p.d.Queue.Add(m)
	<-e.fetch.started
	stop()
	got, err := e.db.Media.Get(context.Background(), m.MessageID)
	if err != nil || got.State != store.MediaPending {
		t.Fatalf("media after shutdown = %+v, %v; want pending", got, err)
	}
	if names, _ := os.ReadDir(filepath.Join(e.dir, "groups", "one", "inbox")); len(names) != 0 {
		t.Fatalf("inbox after an interrupted fetch holds %v; want nothing", names)
	}
}

func TestFailuresSayWhy(t *testing.T) {
	tests := []struct {
		name  string
		size  int64
		body  string
		err   error
		want  string
		calls int
	}{
		{"announced too large", 30 << 20, "x", nil, "[image: not downloaded, 30.0 MB is over the 20.0 MB limit]", 0},
		{"grows too large", 0, strings.Repeat("x", 64), nil, "[image: not downloaded, it is over the 32 B limit]", 1},
		{"fetch fails every time", 4, "", errors.New("media server said 404"), "[image: download failed: media server said 404]", 3},
		{"disk below the floor", 4, "x", nil, "[image: not downloaded, the disk of the bridged host is almost full; the owner is told]", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.fetch.body, e.fetch.err = []byte(tt.body), tt.err
			p := e.pool(func(c *Config, _ *Deps) {
				if tt.size == 0 {
					c.MaxBytes = 32
				}
				if tt.name == "disk below the floor" {
					c.Floor = home.Floor{Dir: e.dir, Min: 1 << 30, Free: func(string) (uint64, error) { return 10 << 20, nil }}
				}
			})
			e.run(p)
			m := e.message("c:one", "a.jpg", false, tt.size)
			p.d.Queue.Add(m)
			e.nextSettled()
			if got := e.text(m.MessageID); got != "look\n"+tt.want {
				t.Fatalf("text = %q; want %q", got, "look\n"+tt.want)
			}
			if got, _ := e.db.Media.Get(context.Background(), m.MessageID); got.State != store.MediaFailed {
				t.Fatalf("state = %s; want failed", got.State)
			}
			if e.fetch.calls != tt.calls {
				t.Fatalf("fetches = %d; want %d", e.fetch.calls, tt.calls)
			}
			if names, _ := os.ReadDir(filepath.Join(e.dir, "groups", "one", "inbox")); len(names) != 0 {
				t.Fatalf("inbox holds %v; want nothing", names)
			}
		})
	}
}

func TestVoiceNotesAreTranscribed(t *testing.T) {
	for _, tt := range []struct {
		name string
		tr   *fakeTranscriber
		want string
	}{
		{"transcript", &fakeTranscriber{text: " hello there "}, `[voice note, inbox/v.ogg] "hello there"`},
		{"endpoint fails", &fakeTranscriber{err: errors.New("transcription endpoint answered 500 Internal Server Error")},
			"[voice note, inbox/v.ogg] (transcript missing: transcription endpoint answered 500 Internal Server Error)"},
		{"empty transcript", &fakeTranscriber{}, "[voice note, inbox/v.ogg] (transcript missing: the transcript is empty)"},
		{"transcription off", nil, "[voice note: inbox/v.ogg]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.fetch.body = []byte("not really ogg")
			p := e.pool(func(_ *Config, d *Deps) {
				if tt.tr != nil {
					tt.tr.got = make(chan []byte, 1)
					d.Transcriber = tt.tr
				}
			})
			e.run(p)
			m := e.message("c:one", "v.ogg", true, 0)
			p.d.Queue.Add(m)
			e.nextSettled()
			if got := e.text(m.MessageID); got != "look\n"+tt.want {
				t.Fatalf("text = %q; want %q", got, "look\n"+tt.want)
			}
			if tt.tr != nil {
				if audio := <-tt.tr.got; string(audio) != "not really ogg" {
					t.Fatalf("transcribed %q; want the fetched recording", audio)
				}
			}
		})
	}
}

// The agent owns inbox/: a link planted at the file's name, or inbox/
// itself made a link, is never written through.
func TestPlantedLinksAreNotFollowed(t *testing.T) {
	e := newEnv(t)
	outside := filepath.Join(e.dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	inbox := filepath.Join(e.dir, "groups", "one", "inbox")
	if err := os.MkdirAll(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(inbox, "a.jpg")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.dir, "groups", "two", "inbox")); err != nil {
		t.Fatal(err)
	}
	p := e.pool(nil)
	e.run(p)
	p.d.Queue.Add(e.message("c:one", "a.jpg", false, 4))
	p.d.Queue.Add(e.message("c:two", "victim", false, 4))
	e.nextSettled()
	e.nextSettled()
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("outside file = %q; want it untouched", b)
	}
	if fi, err := os.Lstat(filepath.Join(inbox, "a.jpg")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("inbox/a.jpg = %v, %v; want the fetched file in place of the link", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(e.dir, "groups", "two", "inbox", "victim")); string(b) != "data" {
		t.Fatalf("two's inbox/victim = %q; want the fetched file in a real inbox/", b)
	}
}

func TestUploadsFetchAndCleanUp(t *testing.T) {
	e := newEnv(t)
	sp := e.home.Uploads()
	st, err := sp.Stage("note.ogg", "audio/ogg", "audio", strings.NewReader("recording"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	key := home.UploadKey()
	if err := st.Keep(key); err != nil {
		t.Fatal(err)
	}
	p := e.pool(func(_ *Config, d *Deps) { d.Fetchers = map[string]Fetcher{SourceUpload: Uploads{Spool: sp}} })
	e.run(p)
	m := e.message("c:one", "note.ogg", false, 9)
	m.Source, m.Ref = SourceUpload, []byte(`{"key":"`+key+`"}`) // what the control API stores
	p.d.Queue.Add(m)
	e.nextSettled()
	if b, _ := os.ReadFile(filepath.Join(e.dir, "groups", "one", "inbox", "note.ogg")); string(b) != "recording" {
		t.Fatalf("inbox/note.ogg = %q", b)
	}
	if _, ok, _ := sp.Get(key); ok {
		t.Fatalf("upload %s still spooled after it settled", key)
	}
}

func TestOggDuration(t *testing.T) {
	page := func(granule uint64, body []byte) []byte {
		b := make([]byte, 27, 27+len(body))
		copy(b, "OggS")
		binary.LittleEndian.PutUint64(b[6:], granule)
		return append(b, body...)
	}
	head := make([]byte, 19)
	copy(head, "OpusHead")
	binary.LittleEndian.PutUint16(head[10:], 312)
	ogg := append(page(0, append([]byte{0}, head...)), page(42*48000+312, []byte("audio"))...)
	if d := oggDuration(ogg); d != 42*time.Second {
		t.Fatalf("opus duration = %s; want 42s", d)
	}
	if d := oggDuration([]byte("RIFF....WAVE")); d != 0 {
		t.Fatalf("duration of a non-ogg = %s; want 0", d)
	}
	if got := VoicePlaceholder(75*time.Second, "inbox/a.ogg", "hi", nil); got != `[voice note 1:15, inbox/a.ogg] "hi"` {
		t.Fatalf("placeholder = %s", got)
	}
}

// At start, uploads no pending media names and older than an hour (a post
// whose message was never committed) are removed; one a pending media
// names is fetched, then removed.
func TestUploadsLeftBehindArePruned(t *testing.T) {
	e := newEnv(t)
	sp := e.home.Uploads()
	keep := func(body string) string {
		st, err := sp.Stage("f.txt", "text/plain", "document", strings.NewReader(body), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		key := home.UploadKey()
		if err := st.Keep(key); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-2 * time.Hour)
		if err := os.Chtimes(filepath.Join(e.dir, "data", "uploads", key), old, old); err != nil {
			t.Fatal(err)
		}
		return key
	}
	orphan, named, fresh := keep("orphan"), keep("named"), ""
	{
		st, err := sp.Stage("g.txt", "text/plain", "document", strings.NewReader("fresh"), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		fresh = home.UploadKey()
		if err := st.Keep(fresh); err != nil {
			t.Fatal(err)
		}
	}
	m := e.message("c:one", "f.txt", false, 5)
	// The stored row names the upload, as the control API writes it.
	m.Source, m.Ref = SourceUpload, []byte(`{"key":"`+named+`"}`)
	up := Uploads{Spool: sp}
	up.Prune([]store.Media{m})
	if _, ok, _ := sp.Get(orphan); ok {
		t.Errorf("orphan upload %s kept; want it removed", orphan)
	}
	if _, ok, _ := sp.Get(named); !ok {
		t.Errorf("upload %s a pending media names was removed", named)
	}
	if _, ok, _ := sp.Get(fresh); !ok {
		t.Errorf("fresh upload %s (a post maybe committing now) was removed", fresh)
	}
}

// A fetch that hangs is given up after Config.Timeout, once: the chat's
// later messages have waited long enough.
func TestHungFetchIsNotRetried(t *testing.T) {
	e := newEnv(t)
	e.fetch.release = map[string]chan struct{}{"a.jpg": make(chan struct{})} // never released
	p := e.pool(func(c *Config, _ *Deps) { c.Timeout = 50 * time.Millisecond })
	e.run(p)
	m := e.message("c:one", "a.jpg", false, 4)
	p.d.Queue.Add(m)
	e.nextSettled()
	if got := e.text(m.MessageID); got != "look\n[image: download failed: no file within 50ms]" {
		t.Fatalf("text = %q", got)
	}
	if e.fetch.calls != 1 {
		t.Fatalf("fetches = %d; want 1", e.fetch.calls)
	}
}

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{"../../etc/passwd": "_.._etc_passwd", ".hidden": "hidden", "é x.txt": "__x.txt", "": "file", "...": "file"} {
		if got := SafeName(in); got != want {
			t.Errorf("SafeName(%q) = %q; want %q", in, got, want)
		}
	}
	long := SafeName("20261125-abc-" + strings.Repeat("x", 300) + ".ogg")
	if len(long) != 120 || !strings.HasPrefix(long, "20261125-abc-") || !strings.HasSuffix(long, ".ogg") {
		t.Errorf("SafeName of a long name = %q (%d bytes); want 120 bytes, its start and extension kept", long, len(long))
	}
}
