package alerts

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/channeltest"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

const (
	mainChat = store.ChatID("local:main")
	famChat  = store.ChatID("local:fam")
)

// fakePoster records what is posted and how often the router was asked
// to look again.
type fakePoster struct {
	mu      sync.Mutex
	posts   []post
	rescans int
}

type post struct {
	chat store.ChatID
	text string
}

func (p *fakePoster) SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if origin != store.OriginNotice {
		panic("alerts post notices only")
	}
	p.posts = append(p.posts, post{store.ChatID(chat), text})
	return store.OutboxItem{}, nil
}

func (p *fakePoster) Rescan() {
	p.mu.Lock()
	p.rescans++
	p.mu.Unlock()
}

// take returns the posts since the last take.
func (p *fakePoster) take() []post {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.posts
	p.posts = nil
	return out
}

// clock is a fake time that tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

type env struct {
	t     *testing.T
	db    *store.DB
	state string
	clk   *clock
	fam   store.Group
}

func newEnv(t *testing.T, budget float64) *env {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	db := storetest.Open(t)
	if _, err := db.Groups.Add(ctx, store.Group{Chat: mainChat, Folder: "main", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	fam, err := db.Groups.Add(ctx, store.Group{Chat: famChat, Folder: "fam", ContainerConfig: store.ContainerConfig{BudgetDailyUSD: budget}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, db: db, state: filepath.Join(dir, "alerts.json"), clk: &clock{t: time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)}, fam: fam}
}

// open builds Alerts over the env's store and state file, as a daemon
// start does.
func (e *env) open(cfg Config) (*Alerts, *fakePoster) {
	e.t.Helper()
	cfg.DB, cfg.State, cfg.Home = e.db, e.state, e.t.TempDir()
	if cfg.Now == nil {
		cfg.Now = e.clk.now
	}
	if cfg.FreeBytes == nil {
		cfg.FreeBytes = func(string) (uint64, error) { return 50 << 30, nil }
	}
	p := &fakePoster{}
	cfg.Poster = p
	a, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return a, p
}

// spend records an API response of fam's agent metered at usd now and
// tells a.
func (e *env) spend(a *Alerts, usd float64) {
	e.t.Helper()
	if err := e.db.Usage.AddAPI(context.Background(), store.APIUsage{Folder: "fam", CostUSD: usd, At: e.clk.now()}); err != nil {
		e.t.Fatal(err)
	}
	a.Spent(context.Background(), e.fam)
}

func wantPosts(t *testing.T, got []post, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d posts %q; want %d", len(got), got, len(want))
	}
	for i, w := range want {
		chat, text, _ := strings.Cut(w, " ")
		if string(got[i].chat) != chat || !strings.Contains(got[i].text, text) {
			t.Errorf("post %d: got %s %q; want %s containing %q", i, got[i].chat, got[i].text, chat, text)
		}
	}
}

// 80 % tells the main chat once, 100 % pauses the group with one notice in
// the group; nothing repeats, not even after a restart; the next day the
// pause is over and the notices are armed again.
func TestBudgetNoticesOncePerDay(t *testing.T) {
	e := newEnv(t, 1.00)
	ctx := context.Background()
	a, p := e.open(Config{})

	e.spend(a, 0.50)
	wantPosts(t, p.take())
	e.spend(a, 0.35) // 85 %
	wantPosts(t, p.take(), "local:main fam has used $0.85 of its daily budget of $1.00 (85 %)")
	e.spend(a, 0.05) // 90 %: told already
	wantPosts(t, p.take())
	if a.Paused(ctx, e.fam) {
		t.Fatal("paused at 90 %; want running")
	}
	e.spend(a, 0.10) // 100 %
	wantPosts(t, p.take(), "local:fam pausing until midnight")
	if !a.Paused(ctx, e.fam) {
		t.Fatal("not paused at 100 %")
	}
	e.spend(a, 0.20) // a turn in flight when the budget ran out
	wantPosts(t, p.take())

	// A restart tells nothing again.
	a, p = e.open(Config{})
	e.spend(a, 0.01)
	wantPosts(t, p.take())
	if !a.Paused(ctx, e.fam) {
		t.Fatal("not paused after a restart")
	}

	// Midnight: a new day with a new budget.
	e.clk.set(time.Date(2026, 3, 11, 0, 0, 1, 0, time.UTC))
	if a.Paused(ctx, e.fam) {
		t.Fatal("still paused the next day")
	}
	e.spend(a, 1.50) // past both at once: the main chat hears of the pause
	wantPosts(t, p.take(), "local:main fam has used up its daily budget", "local:fam pausing until midnight")
}

// Raising the budget lifts the pause at once and arms the notices for the
// new amount; 0 lifts the budget.
func TestBudgetRaiseLiftsPause(t *testing.T) {
	e := newEnv(t, 1.00)
	ctx := context.Background()
	a, p := e.open(Config{})
	e.spend(a, 1.00)
	wantPosts(t, p.take(), "local:main used up", "local:fam pausing")
	if !a.Paused(ctx, e.fam) {
		t.Fatal("not paused at 100 %")
	}
	e.fam.ContainerConfig.BudgetDailyUSD = 1.20
	if a.Paused(ctx, e.fam) {
		t.Fatal("paused after the budget was raised")
	}
	e.spend(a, 0.00) // 83 % of the new budget
	wantPosts(t, p.take(), "local:main $1.00 of its daily budget of $1.20")
	e.spend(a, 0.30)
	wantPosts(t, p.take(), "local:fam pausing")
	e.fam.ContainerConfig.BudgetDailyUSD = 0
	if a.Paused(ctx, e.fam) {
		t.Fatal("paused with no budget")
	}
	e.spend(a, 5)
	wantPosts(t, p.take())
}

// loginDetail is the detail the fake WhatsApp channel reports with its state.
const loginDetail = "run `bridged login`"

// Run tells each condition once while it lasts, also across a restart,
// tells it again after it cleared and came back, and has the router look
// again when a new day begins.
func TestConditionsOnceUntilCleared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 0)
		ch := channeltest.New("whatsapp")
		ch.SetStatus(channel.StateConnected, loginDetail)
		var free atomic.Uint64
		free.Store(5 << 30)
		cfg := Config{
			Channels:  []channel.Channel{ch},
			Now:       time.Now, // the bubble's fake time
			FreeBytes: func(string) (uint64, error) { return free.Load(), nil },
		}
		run := func() (*fakePoster, func()) {
			a, p := e.open(cfg)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { a.Run(ctx); close(done) }()
			synctest.Wait()
			return p, func() { cancel(); <-done }
		}
		tick := func() { time.Sleep(DefaultInterval); synctest.Wait() }

		p, stop := run()
		wantPosts(t, p.take())
		ch.SetStatus(channel.StateLoggedOut, loginDetail)
		free.Store(512 << 20)
		tick()
		wantPosts(t, p.take(), "local:main whatsapp is logged out. run `bridged login`", "local:main Only 512 MB free")
		tick()
		tick()
		wantPosts(t, p.take())
		stop()

		// A restart while the conditions last tells nothing again.
		p, stop = run()
		tick()
		wantPosts(t, p.take())

		// Cleared (the disk 20 % above the limit), then back: told again.
		ch.SetStatus(channel.StateConnected, loginDetail)
		free.Store(1100 << 20) // above 1 GB, not 20 % above: still raised
		tick()
		ch.SetStatus(channel.StateOutdated, loginDetail)
		tick()
		wantPosts(t, p.take(), "local:main whatsapp refuses this version")
		free.Store(2 << 30)
		tick()
		free.Store(100 << 20)
		tick()
		wantPosts(t, p.take(), "local:main Only 100 MB free")

		// A new day has the router look at the paused groups again.
		p.mu.Lock()
		before := p.rescans
		p.mu.Unlock()
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		p.mu.Lock()
		after := p.rescans
		p.mu.Unlock()
		if after != before+1 {
			t.Errorf("rescans over a day boundary: got %d; want 1", after-before)
		}
		stop()
	})
}

// Raise and Clear: a key is told once until cleared; with no main group
// nothing is told and the key stays armed.
func TestRaiseClear(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	a, p := e.open(Config{})
	a.Raise(ctx, "gave-up/fam", "fam gave up")
	a.Raise(ctx, "gave-up/fam", "fam gave up")
	wantPosts(t, p.take(), "local:main fam gave up")
	a.Clear(ctx, "gave-up/fam")
	a.Raise(ctx, "gave-up/fam", "fam gave up again")
	wantPosts(t, p.take(), "local:main again")

	if err := e.db.Groups.Remove(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	a.Raise(ctx, "outbox-failed/x", "lost")
	wantPosts(t, p.take())
	if _, ok := a.Raised()["outbox-failed/x"]; ok {
		t.Error("raised with no main chat to tell; want armed")
	}
}

// What the router reports: a group that gave up is told once, with the
// attempts and the reason, until it recovers; a message given up is told
// once per chat, naming the group, until one to that chat is sent.
func TestRouterConditions(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	a, p := e.open(Config{})
	a.GaveUp(ctx, "fam", 3, "container exited with code 1")
	a.GaveUp(ctx, "fam", 3, "container exited with code 1")
	wantPosts(t, p.take(), "local:main group fam failed 3 times in a row and gave up until the next message (container exited with code 1)")
	a.Recovered(ctx, "fam")
	a.GaveUp(ctx, "fam", 3, "hang")
	wantPosts(t, p.take(), "local:main (hang)")

	a.SendFailed(ctx, famChat, "fam", "no such chat")
	a.SendFailed(ctx, famChat, "fam", "no such chat")
	a.SendFailed(ctx, "local:other", "", "gone")
	wantPosts(t, p.take(), "local:main A message to group fam (local:fam) could not be sent and was given up: no such chat.",
		"local:main A message to local:other could not be sent and was given up: gone.")
	a.Sent(ctx, famChat)
	a.SendFailed(ctx, famChat, "fam", "again")
	wantPosts(t, p.take(), "local:main given up: again")
}

// A task that paused itself is told once per pause, also across a restart;
// its next pause (after a resume, a later failed run) is told again.
func TestTaskPausedOncePerPause(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	a, p := e.open(Config{})
	last := e.clk.now()
	task := store.Task{ID: "task-0123456789ab", Folder: "fam", Failures: 5, PausedByFailures: true, Status: store.TaskPaused, LastRun: &last}
	a.TaskPaused(ctx, task, "agent error: API Error: 500")
	a.TaskPaused(ctx, task, "agent error: API Error: 500")
	wantPosts(t, p.take(), "local:main Scheduled task task-0123456789ab of group fam failed 5 times in a row and is paused (last error: agent error: API Error: 500). Once the cause is fixed, `bridged tasks resume task-0123456789ab` restarts it")

	a, p = e.open(Config{}) // a restart
	a.TaskPaused(ctx, task, "agent error: API Error: 500")
	wantPosts(t, p.take())

	later := last.Add(time.Hour)
	task.LastRun = &later
	a.TaskPaused(ctx, task, "still broken")
	wantPosts(t, p.take(), "local:main (last error: still broken)")
}
