package agentrun

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/store"
)

// Group is one group's run, its one owner: its cursors, the batch kept for
// its next container start, its live run (the container, whether the agent
// works or waits, whether it is closing, the idle timer, holds) and the
// owner's notes. One lock guards all of it: it orders every hand-over of
// messages to the group's agent (container start, pipe), every cursor
// change and every change of the run's state. Runner.Group returns a
// group's one Group; the zero Group is ready to use (tests).
type Group struct {
	mu        sync.Mutex
	loaded    bool
	persisted store.MessageID // the cursor as stored
	handed    store.MessageID // the last message handed to the live agent
	run       *Run            // nil when no container runs
	batch     *Batch          // handed for the next container start; nil: none
	sessions  uint64          // how often the owner ended the group's session (Runner.EndSession)
	// leftOutFrom is the first message of the last prompt whose left-out
	// older messages the chat was told about: a prompt that starts there
	// again (a retry) does not repeat the notice.
	leftOutFrom store.MessageID
	// Notes is what the owner remembers of the group between its
	// messages, guarded by the lock like the rest.
	Notes Notes
}

// Notes is what the owner (the router) remembers of a group between its
// messages: kept here so that a group's state has one place and one lock.
type Notes struct {
	// LateTold: the chat was told that late messages started no turn; a
	// turn starting re-arms it.
	LateTold bool
	// NewSessionAt is the owner's last /new acted on.
	NewSessionAt store.MessageID
	// BudgetUpto and BudgetPaused are the budget's last decision recorded
	// for the group's waiting messages (the same one is recorded once).
	BudgetUpto   store.MessageID
	BudgetPaused bool
}

// Batch is a group's pending messages as the message loop read them, handed
// to the group's run object for its next container start, with the group
// they belong to (the group travels with the work: the run looks nothing up
// again). Version is the store's group registry version when the group was
// looked up (store.GroupQuery.Version): a batch whose group changed since is
// read again.
type Batch struct {
	Group   store.Group
	Version uint64
	After   store.MessageID // the cursor the messages were read after
	Msgs    []store.Message
	Omitted int // older messages left out by the prompt cap
}

// Offer hands b to the group's next container start, replacing any batch
// handed before (the message loop reads again after every change of the
// chat, so the newest batch is the whole of what is pending). The lock
// must be held.
func (g *Group) Offer(b Batch) { g.batch = &b }

// Drop forgets the batch handed for the next start (its messages no longer
// wake the agent). The lock must be held.
func (g *Group) Drop() { g.batch = nil }

// Take returns the batch handed for the next container start and forgets
// it; false when there is none, or it was read after another cursor than
// the one in memory now (the messages it starts from moved). The lock must
// be held.
func (g *Group) Take() (Batch, bool) {
	b := g.batch
	g.batch = nil
	if b == nil || b.After != g.handed {
		return Batch{}, false
	}
	return *b, true
}

// Lock takes the group's lock. It is held across store transactions, never
// across a channel's send.
func (g *Group) Lock() { g.mu.Lock() }

// Unlock releases the group's lock.
func (g *Group) Unlock() { g.mu.Unlock() }

// TryLock takes the group's lock if it is free.
func (g *Group) TryLock() bool { return g.mu.TryLock() }

// Load reads the stored cursor of folder once. The lock must be held.
func (g *Group) Load(ctx context.Context, db *store.DB, folder store.Folder) error {
	if g.loaded {
		return nil
	}
	c, err := db.Sessions.Cursor(ctx, folder)
	if err != nil {
		return err
	}
	g.persisted, g.handed, g.loaded = c, c, true
	return nil
}

// Handed is the last message handed to the agent: the cursor in memory.
// The lock must be held.
func (g *Group) Handed() store.MessageID { return g.handed }

// pipe records that the messages up to upto were written into the live
// run's input file file. When the agent waits for input they start a turn
// at once: the agent is busy again (its idle timer stops, the queue hears
// it) and the hard timeout restarts. The lock must be held and the group
// must have a live run.
func (g *Group) pipe(file string, upto store.MessageID) {
	run := g.run
	run.piped = append(run.piped, pipedFile{name: file, before: g.handed})
	g.handed = upto
	if run.waiting {
		run.settled = g.handed
		run.waiting = false
		run.stopTimer()
		run.q.MarkBusy()
		signal(run.kick)
	}
}

// Hold keeps the live run's turn in flight open while it waits on
// something outside the container (the owner's approval of a tool call):
// until release is called the container's hard timeout starts over instead
// of stopping it, and when release is called the timeout counts from then.
// The idle close cannot fire meanwhile: a held turn is in flight, so the
// agent is busy, and the group queue only closes an idle agent. ok is false
// (and release does nothing) when the group has no live run. release may be
// called more than once and from any goroutine; it takes no lock. The
// group's lock must be held for Hold.
func (g *Group) Hold() (release func(), ok bool) {
	run := g.run
	if run == nil {
		return func() {}, false
	}
	run.held.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			run.held.Add(-1)
			signal(run.kick)
		})
	}, true
}

// Run is one container's run. Its fields are guarded by its group's lock,
// except q, which is set when the run begins and never changes.
//
// Its state: busy from its start and from each pipe into a waiting agent;
// waiting (the agent finished a turn and waits for input) from each result;
// closing once it takes no more messages (closed idle, stale at its turn's
// end, a failed turn, the container stopping or gone). A run is closing for
// good; a closing agent still finishes its turn (waiting). The group has no
// run before the container starts and after it is gone.
type Run struct {
	Kind groupqueue.RunKind
	Task store.TaskID
	Chat store.ChatID
	// q is the queue's object for this run: everything the run tells the
	// queue (a turn ended, the container goes away) goes through it.
	q       QueueRun
	folder  store.Folder
	name    string
	id      string
	started time.Time
	piped   []pipedFile
	replied bool // a reply of this run was committed to the outbox
	// broken is why a turn of this run failed for good (its result could
	// not be committed, or it ended with an error): nothing later of the
	// run is committed, and the run rolls back to the last stored cursor.
	broken error
	// kick is signalled when a pipe starts a turn on an idle agent, or a
	// held turn is released, so the hard timeout counts from then.
	kick chan struct{}
	// held counts the holds on the turn in flight (Group.Hold); read by the
	// supervision without the group's lock.
	held atomic.Int32
	// acted: an agent action (a task or group change) committed during
	// the current turn, with the turn's cursor, and no result or message
	// to the chat since. If the turn then fails, its messages are not run
	// again (the agent would act twice); the chat gets a notice instead.
	acted bool
	// settled is the cursor a reply may store: the messages whose turn has
	// begun. Messages piped while the agent is busy may wait for a turn of
	// their own, so a reply does not cover them; the next result does (or
	// the end of the run), and after kill -9 they run again.
	settled store.MessageID
	// source names who other than the owner wrote the messages its
	// container started with; others are the messages of others piped
	// while the agent worked (at most maxOthers), the input of the next
	// turn: both are marked on what those turns change.
	source string
	others []store.Message
	// pages and searches are what the agent fetched from the web during
	// the current turn (at most maxFetched each), marked on what it
	// changes at its end.
	pages, searches []string
	// settings are what the container was started with; stale: a change
	// of them was applied (Runner.Apply), so the container takes no more
	// messages and closes when its turn ends.
	settings Settings
	stale    bool
	// sessionGen is the group's count of ended sessions when the run read
	// the session it resumes: once the owner ends that session
	// (Runner.EndSession), nothing of the run stores a session any more.
	sessionGen uint64
	// waiting: the agent finished a turn and no pipe since started
	// another. closing: the run takes no more messages and its container
	// goes away. results counts the turns ended (a task's close delay
	// starts at its first).
	waiting, closing bool
	results          int
	// timer closes the waiting container after the idle timeout (a
	// message run) or the close delay (a task run); timerGen tells a timer
	// that fired after it was stopped.
	timer    *time.Timer
	timerGen uint64
}

// stopTimer stops the run's close timer, if any. The group's lock must be
// held.
func (r *Run) stopTimer() {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.timerGen++
}

// pipedFile is an input file written into a live container, and the cursor
// from before the messages it carries.
type pipedFile struct {
	name   string
	before store.MessageID
}

// ContainerStatus is one live container.
type ContainerStatus struct {
	Group   string    `json:"group"`
	Kind    string    `json:"kind"` // "messages" or "task"
	TaskID  string    `json:"task_id,omitempty"`
	Name    string    `json:"name"`
	ID      string    `json:"id,omitempty"` // empty while starting
	Since   time.Time `json:"since"`
	Busy    bool      `json:"busy"`    // working on a turn
	Replied bool      `json:"replied"` // a reply of this run went out
}

// board is the live containers as Status shows them. Runs publish to it as
// they change; its mutex is held for nothing but the map.
type board struct {
	mu   sync.Mutex
	live map[store.Folder]ContainerStatus
}

// Containers lists the live containers by group. It never blocks: runs
// publish to it as they change, and it takes no group's lock.
func (x *Runner) Containers() []ContainerStatus {
	b := &x.board
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]ContainerStatus, 0, len(b.live))
	for _, f := range slices.Sorted(maps.Keys(b.live)) {
		out = append(out, b.live[f])
	}
	return out
}

// publish records folder's live container (run nil: none). Call it with
// the group's lock held, after every change Containers shows.
func (x *Runner) publish(folder store.Folder, run *Run) {
	b := &x.board
	b.mu.Lock()
	defer b.mu.Unlock()
	if run == nil {
		delete(b.live, folder)
		return
	}
	if b.live == nil {
		b.live = make(map[store.Folder]ContainerStatus)
	}
	b.live[folder] = ContainerStatus{
		Group: string(folder), Kind: string(run.Kind), TaskID: string(run.Task), Name: run.name, ID: run.id,
		Since: run.started, Replied: run.replied, Busy: !run.waiting,
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
