package agentrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

// TimeoutMargin is how much longer than the idle timeout a container's
// hard timeout must be, so the graceful close acts first.
const TimeoutMargin = 30 * time.Second

// shortTimeout bounds the small writes done outside a caller's context.
const shortTimeout = 30 * time.Second

// Queue is the part of the group queue a group asks for a slot
// (groupqueue.Queue implements it). No method blocks, and none calls back
// into this package under the caller's lock.
type Queue interface {
	EnqueueMessages(name string)
}

// QueueRun is the group queue's object for the slot one run holds, made by
// the queue when it grants the slot (groupqueue.Run implements it): what a
// run tells the queue so the queue can share the cap (which idle container
// to close when another group needs a slot). The run's state is the
// group's; these are reports. Once the run has ended it does nothing. No
// method blocks; each may be called with the group's lock held.
type QueueRun interface {
	// MarkIdle records that the agent finished a turn and waits for input,
	// and reports whether the queue wants the slot back now.
	MarkIdle() bool
	// MarkBusy records that a pipe started a turn on the waiting agent.
	MarkBusy()
	// MarkClosing records that the container is going away.
	MarkClosing()
}

// Slot is a message run's QueueRun as the queue hands it to RunMessages.
type Slot interface {
	QueueRun
	// Group is the name (folder) of the run's group.
	Group() string
	// Begin records that the run took the group's pending messages.
	Begin()
}

var _ Slot = (*groupqueue.Run)(nil)

// Owner is what a run needs of the daemon that started it (the router
// implements it). No method blocks for long.
type Owner interface {
	// Notice commits a notice from bridged to chat (and sends it directly,
	// best effort, when it cannot be committed).
	Notice(chat store.ChatID, folder store.Folder, text string)
	// Spent is told after the cost of a turn of g was recorded.
	Spent(ctx context.Context, g store.Group)
	// Wake tells the outbox a row was committed.
	Wake()
	// SetTyping shows or hides the typing indicator in chat.
	SetTyping(chat store.ChatID, on bool)
	// Batch reads folder's pending messages for a container start that
	// has no batch from the message loop (a retry) or an outdated one, with
	// the owner's rules (the trigger, the budget); ok is false when none
	// would wake the agent, or the group was removed. grp's lock is held.
	Batch(ctx context.Context, grp *Group, folder store.Folder) (b Batch, ok bool, err error)
	// Paused reports whether g's agent is paused by its daily budget.
	Paused(ctx context.Context, g store.Group) bool
	// Alert calls tell with the owner's alerts, if there are any.
	Alert(tell func(context.Context, Alerts))
}

// Config configures a Runner. The durations must be set (the router fills
// in its defaults).
type Config struct {
	AssistantName string
	Timezone      *time.Location
	Instance      string
	// IdleTimeout closes a message container this long after its last
	// result (a group's own container timeout is raised to at least
	// IdleTimeout + TimeoutMargin); TaskCloseDelay a task container this
	// long after its first. ContainerTimeout stops a container that printed
	// nothing for that long; StartTimeout one that printed nothing at all
	// that long after its start.
	IdleTimeout, TaskCloseDelay, ContainerTimeout, StartTimeout time.Duration
	// TaskMaxFailures is how many failed runs in a row pause a task
	// (store.TaskRun.PauseAfter); 0 never pauses one.
	TaskMaxFailures int
}

// Deps are the parts a Runner works with. All but Turns and
// BeforeMountCheck are required.
type Deps struct {
	Store   *store.DB
	Runtime container.Runtime
	Specs   container.SpecBuilder
	Home    *home.Home
	Queue   Queue
	Owner   Owner
	Turns   *turns.Hub // hears when a chat's turn ends; nil: nobody
	Log     zerolog.Logger
	Now     func() time.Time
	// BeforeMountCheck, when set (tests), runs between a run's prepare and
	// its mount check: the window in which an agent could swap a directory.
	BeforeMountCheck func(store.Folder)
	// ContainerGone, when set, is told that a group's container is gone:
	// the approvals its turn left waiting are settled. Its ctx is not
	// cancelled when the run's was (see Container).
	ContainerGone func(context.Context, store.Folder)
	// ApprovalWait, when set, is told of each tool call a group's runner
	// announced it is about to ask the owner about (an approval_wait
	// line): only such a call's ask_approval request is taken. It must not
	// block.
	ApprovalWait func(folder store.Folder, toolUseID, tool string)
	// Snapshots, when set, records the group's folder and memory as each
	// turn begins and ends.
	Snapshots Snapshots
}

// Runner runs agent containers for groups and keeps their runs' state.
type Runner struct {
	cfg Config
	Deps
	layout home.Layout
	seq    atomic.Uint64
	board  board
	// leftovers: the groups whose containers need not be looked for
	// before their next start (container.Leftovers).
	leftovers container.Leftovers
	// groups holds each group's one Group. Its mutex is a leaf, held for
	// the map only.
	groupsMu sync.Mutex
	groups   map[store.Folder]*Group
	// failMu guards the failures Failures shows: a leaf, held for them only.
	failMu   sync.Mutex
	failures []Failure
	retrying map[store.Folder]Failure // per group, the last failed message run the queue retries
	stopping atomic.Bool
}

// New returns a Runner.
func New(cfg Config, d Deps) *Runner {
	return &Runner{cfg: cfg, Deps: d, layout: d.Home.Layout()}
}

// BeginMessages makes a message run for g's chat the live run of grp,
// handed the messages up to upto; q is the queue's object for the run, g
// the group its container starts with. The lock must be held.
func (x *Runner) BeginMessages(grp *Group, q QueueRun, g store.Group, upto store.MessageID) *Run {
	run := x.newRun(q, g, groupqueue.KindMessages, "")
	grp.run = run
	grp.handed = upto
	run.settled = upto
	x.publish(g.Folder, run)
	return run
}

func (x *Runner) newRun(q QueueRun, g store.Group, kind groupqueue.RunKind, t store.TaskID) *Run {
	name := fmt.Sprintf("bridged-%s-%d-%d", g.Folder, x.Now().UnixMilli(), x.seq.Add(1))
	return &Run{Kind: kind, Task: t, Chat: g.Chat, q: q, folder: g.Folder, name: name, started: x.Now(), kick: make(chan struct{}, 1),
		settings: SettingsOf(g)}
}

// end makes grp's run gone. The lock must be held.
func (x *Runner) end(grp *Group, folder store.Folder) {
	if grp.run != nil {
		grp.run.stopTimer()
	}
	grp.run = nil
	x.publish(folder, nil)
}

// writeClose writes the close sentinel of group name: the runner exits
// once its turn is done.
func (x *Runner) writeClose(name string) {
	if home.CheckFolder(name) != nil {
		return
	}
	if err := x.Home.WriteClose(name); err != nil {
		x.Log.Error().Err(err).Str("group", name).Msg("cannot write close sentinel")
		return
	}
	x.Log.Debug().Str("group", name).Msg("close sentinel written")
}

// hardTimeout is the group's container timeout: its own (at least the idle
// timeout plus a margin) or the daemon's.
func (x *Runner) hardTimeout(g store.Group) time.Duration {
	if t := g.ContainerConfig.Timeout; t > 0 {
		return max(t, x.cfg.IdleTimeout+TimeoutMargin)
	}
	return x.cfg.ContainerTimeout
}

// Container starts one container for g with text as its prompt and follows
// it until it is gone (container.Supervise): results are committed to the
// outbox (origin) with the session and usage as they come. sess is nil for
// an isolated task (its session is not kept). It blocks until the
// container is gone.
func (x *Runner) Container(ctx context.Context, log zerolog.Logger, g store.Group, grp *Group, run *Run, text string, sess *store.Session, origin store.Origin) Outcome {
	start := time.Now()
	var o Outcome
	folder := string(g.Folder)
	input := ipc.RunInput{
		Prompt:        text,
		Group:         folder,
		Chat:          string(g.Chat),
		IsMain:        g.IsMain,
		IsTask:        origin == store.OriginTask,
		AssistantName: x.cfg.AssistantName,
		Timezone:      x.cfg.Timezone.String(),
		Model:         g.ContainerConfig.Model,
		Tools:         string(g.Tools),
		ApprovalKey:   newApprovalKey(),
	}
	if sess != nil {
		input.SessionID, input.ResumeAt = sess.SessionID, sess.LastUUID
	}
	spec, release, err := x.Specs.Build(log, g, run.name, input)
	if err != nil {
		o.Err = err
		return o
	}
	defer release()
	if err := x.Home.RemoveClose(folder); err != nil {
		o.Err = fmt.Errorf("prepare group directories: %w", err)
		return o
	}
	rl := container.OpenRunLog(log, x.layout.LogsDir(folder), x.Now())
	defer rl.Close()
	rl.Header(x.Log.GetLevel() <= zerolog.DebugLevel, string(run.Kind), string(run.Task), spec, input)
	stderrLog := log.With().Str("container", spec.Name).Logger()
	spec.Stderr = func(line string) {
		rl.Stderr(line)
		stderrLog.Debug().Str("line", line).Msg("container stderr")
	}

	if x.BeforeMountCheck != nil {
		x.BeforeMountCheck(g.Folder)
	}
	if err := x.Specs.CheckMounts(&spec); err != nil {
		log.Error().Err(err).Msg("bind-mount source failed its check; container not started")
		o.Err = err
		rl.Footer(o.Ended, 0, false, o.Failure())
		return o
	}
	grp.Lock()
	upto, source := run.settled, run.source
	grp.Unlock()
	x.snapBegin(ctx, log, g, run, upto, source)
	// A turn cut off with the container (a crash, a timeout) ends here.
	defer x.snapEnd(ctx, log, grp, g, run)
	t := &turn{x: x, log: log, g: g, grp: grp, run: run, sess: sess, origin: origin, approvalKey: input.ApprovalKey}
	o = t.end(container.Supervise(ctx, x.Runtime, spec, container.Watch{
		Log:          log,
		Instance:     x.cfg.Instance,
		Leftovers:    &x.leftovers,
		Timeout:      x.hardTimeout(g),
		StartTimeout: x.cfg.StartTimeout,
		Kick:         run.kick,
		Held:         func() bool { return run.held.Load() > 0 },
		Started: func(id string) {
			grp.Lock()
			run.id = id
			x.publish(g.Folder, run)
			grp.Unlock()
		},
		Stopping: func() {
			t.stopping = true
			grp.Lock()
			x.gone(run)
			grp.Unlock()
		},
		Event: t.event,
	}))
	if x.ContainerGone != nil {
		// The container is often gone because ctx ended (bridged stops):
		// the approvals it left open are still to be settled in the store,
		// or the next start finds them open with no runner waiting. So the
		// call keeps ctx's values but not its cancellation.
		x.ContainerGone(context.WithoutCancel(ctx), g.Folder)
	}
	grp.Lock()
	replied := run.replied
	grp.Unlock()
	rl.Footer(o.Ended, o.Results, replied, o.Failure())
	log.Info().Str("container", spec.Name).Int("exit_code", o.Exit.Code).Dur("duration", time.Since(start)).Bool("timed_out", o.TimedOut).
		Int("results", o.Results).Bool("replied", replied).Msg("container finished")
	return o
}

// newApprovalKey is a container run's ipc.RunInput.ApprovalKey: 128
// random bits.
func newApprovalKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Messages runs the message run run of g, begun by BeginMessages with text
// as its prompt, until its container is gone, and settles its cursors: a
// run that ended well stores the cursor of what it was handed; one that
// failed with messages not committed rolls back to the last committed reply
// and returns the failure (a hang wraps groupqueue.ErrHang), so the queue
// retries them; input files the agent never read are removed and their
// messages run again. A turn that failed after the agent acted is told in
// the chat instead of run again. A turn the API refused for good (an
// APIRefusal) stores its messages as handled and returns the refusal, which
// the queue does not retry.
func (x *Runner) Messages(ctx context.Context, g store.Group, grp *Group, run *Run, text string) error {
	folder := g.Folder
	log := x.Log.With().Str("group", string(folder)).Logger()
	x.Owner.SetTyping(g.Chat, true)
	grp.Lock()
	sess := x.resumeSession(ctx, log, grp, run, folder)
	grp.Unlock()
	o := x.Container(ctx, log, g, grp, run, text, sess, store.OriginReply)

	// The container is gone: nothing can be piped into it any more.
	grp.Lock()
	x.gone(run)
	fail := o.Failure()
	// Messages handed over and not committed with a reply: the turns in
	// flight when the run ended, and turns that ended without a reply.
	uncommitted := grp.handed != grp.persisted
	// A turn that committed an agent action and then failed is not run
	// again (it would act twice): the chat is told instead.
	actedFail := fail != nil && run.acted
	// A turn that failed after everything it was handed was committed (the
	// agent sent a message of its own, or acted, and then failed before its
	// answer) is not run again either, but it did fail: the chat is told,
	// and so is whoever waits for the turn's end.
	lost := fail != nil && !uncommitted && (o.AgentErr != "" || o.CommitErr != nil || !run.waiting)
	if fail != nil && !uncommitted {
		log.Warn().Err(fail).Msg("run ended badly after every turn was committed; nothing to run again")
		fail = nil
	}
	rollback, unread := x.unread(log, folder, run)
	again := false
	// A turn the API refused for good (a refused key, no credit, an
	// invalid request) is not run again: its messages are stored as
	// handled, the queue does not retry (the error wraps ErrNoRetry) and
	// the router tells the chat the fix.
	refused := fail != nil && o.Refusal != nil
	switch {
	case refused:
		log.Warn().Err(fail).Msg("the API refused the turn for good; its messages are not run again")
	case fail != nil:
		// A turn failed (or the run ended under one): back to the last
		// committed reply; the queue's retry hands the rest over again.
		grp.handed = grp.persisted
	case rollback >= 0:
		grp.handed = rollback
		again = true
	}
	if (fail == nil || refused) && grp.handed != grp.persisted {
		if err := x.Store.Sessions.SetCursor(context.WithoutCancel(ctx), folder, grp.handed); err != nil {
			log.Error().Err(err).Msg("cannot store cursor")
		} else {
			grp.persisted = grp.handed
		}
	}
	upto := grp.persisted
	x.end(grp, folder)
	grp.Unlock()

	x.Owner.SetTyping(g.Chat, false)
	switch {
	case actedFail:
		log.Warn().Err(o.Failure()).Msg("a turn failed after the agent acted; its messages are not run again")
		x.Owner.Notice(g.Chat, folder, prompt.ActedNotice(o.Failure()))
	case lost:
		log.Warn().Err(o.Failure()).Msg("a turn failed after its messages were answered by the agent's own message; they are not run again")
		x.Owner.Notice(g.Chat, folder, prompt.UnfinishedNotice(o.Failure()))
	}
	if lost || actedFail {
		x.Turns.Ended(turns.End{Chat: string(g.Chat), Result: turns.GaveUp, Upto: int64(upto),
			Reason: prompt.Clip(prompt.OneLine(o.Failure().Error()), 300), Attempt: 1, Attempts: 1})
	}
	if unread > 0 {
		log.Info().Int("files", unread).Msg("piped messages the agent never read will run again")
	}
	if again {
		x.Queue.EnqueueMessages(string(folder))
	}
	if fail == nil {
		return nil
	}
	err := NewRunError(folder, fail)
	if errors.Is(fail, errTimedOut) || errors.Is(fail, errNoStart) {
		return hang{err}
	}
	return err
}

// unread removes the input files of run the agent never read and returns
// the cursor from before the first of them (-1: none) and how many there
// were. The group's lock must be held.
func (x *Runner) unread(log zerolog.Logger, folder store.Folder, run *Run) (store.MessageID, int) {
	rollback, unread := store.MessageID(-1), 0
	if len(run.piped) == 0 {
		return rollback, 0
	}
	in, err := x.Home.Input(string(folder))
	if err != nil {
		// The files cannot be checked: count them all as unread, so
		// their messages run again rather than be lost.
		log.Warn().Err(err).Msg("cannot check unread input files")
		return run.piped[0].before, len(run.piped)
	}
	defer in.Close()
	for _, p := range run.piped {
		if !in.Exists(p.name) {
			continue
		}
		if rollback < 0 {
			rollback = p.before
		}
		unread++
		if err := in.Remove(p.name); err != nil {
			log.Warn().Err(err).Str("file", p.name).Msg("cannot remove unread input file")
		}
	}
	return rollback, unread
}

// hang is a run error the queue counts as a hang (it wraps
// groupqueue.ErrHang without changing the error's text).
type hang struct{ error }

func (e hang) Unwrap() error { return e.error }

func (hang) Is(target error) bool { return target == groupqueue.ErrHang }
