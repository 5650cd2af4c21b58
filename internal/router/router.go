package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/outbox"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultPromptCap       = 200
	DefaultIdleTimeout     = 30 * time.Minute
	DefaultTaskCloseDelay  = 10 * time.Second
	DefaultShutdownTimeout = 60 * time.Second
	DefaultStartTimeout    = 2 * time.Minute
)

// ErrEmpty is returned by SendMessage when nothing is left to send once the
// <internal> blocks are removed (outbox.ErrEmpty).
var ErrEmpty = outbox.ErrEmpty

// Config configures a Router.
type Config struct {
	AssistantName string
	Timezone      *time.Location // nil: UTC
	PromptCap     int            // most messages in one prompt; 0: DefaultPromptCap
	// LateWindow: a message arriving more than this after it was sent (a
	// backlog) is kept as context but wakes no agent; 0: DefaultLateWindow.
	LateWindow time.Duration

	// IdleTimeout closes a message container this long after its last
	// result. ContainerTimeout stops a container that printed nothing for
	// that long (a group's own timeout, when set, is raised to at least
	// IdleTimeout + 30 s). TaskCloseDelay closes a task container this long
	// after its first result. StartTimeout stops a container that printed
	// nothing at all that long after its start (the runner reports the
	// session when claude begins the first turn), at most the container
	// timeout. Zero values mean the defaults.
	IdleTimeout, ContainerTimeout, TaskCloseDelay, StartTimeout time.Duration

	MaxContainers int             // 0: groupqueue.DefaultMaxConcurrent
	RetryDelays   []time.Duration // nil: groupqueue.DefaultRetryDelays; empty: no retries

	// TaskMaxFailures is how many failed runs in a row pause a scheduled
	// task, with one owner alert (Alerts.TaskPaused); 0 never pauses one.
	TaskMaxFailures int

	Instance string
	// Home is the bridged home; every file the router touches in an
	// agent-writable tree goes through it. Required.
	Home *home.Home
	// Container is how each group's container is built: the image, the
	// limits, the user (never 0), the allowlist, the credential proxy
	// and the secrets it must never hold. Its Home, AssistantName,
	// Timezone, Instance and Planted are filled from the router's.
	Container container.SpecBuilder

	// ShutdownTimeout bounds the drain when Run's context ends: runs still
	// busy then are stopped (their messages stay pending). 0: 60 s.
	ShutdownTimeout time.Duration
}

// Deps are the parts a Router works with.
type Deps struct {
	Store    *store.DB
	Runtime  container.Runtime
	Channels []channel.Channel
	Log      zerolog.Logger
	Now      func() time.Time // nil: time.Now
	Turns    *turns.Hub       // hears when a chat's turn ends; nil: nobody
	// Budget, when set, pauses the agent of a group whose daily budget
	// is used up and hears of every recorded cost.
	Budget Budget
	// Alerts, when set, hears of groups that gave up and messages that
	// could not be sent, for the owner.
	Alerts Alerts
	// Ingest stores inbound messages and wakes the message loop (the
	// daemon builds it first, for the channels and the media pool).
	// Required.
	Ingest *ingest.Ingest
	// OutboxSignal, when set, is what the router's outbox sender wakes on,
	// shared with what else commits rows (the owner's alerts); nil: the
	// sender's own.
	OutboxSignal *outbox.Signal
	// ContainerGone, when set, is told that a group's container is gone
	// (the approvals it left waiting are settled); see
	// agentrun.Runner.ContainerGone.
	ContainerGone func(context.Context, store.Folder)
	// ApprovalWait is agentrun.Deps.ApprovalWait.
	ApprovalWait func(folder store.Folder, toolUseID, tool string)
	// Snapshots is agentrun.Deps.Snapshots: each turn's files recorded.
	Snapshots agentrun.Snapshots
}

// Status is the router's live state for `bridged status`.
type Status struct {
	Queue      groupqueue.Status `json:"queue"`
	Containers []ContainerStatus `json:"containers"`
	Failures   []Failure         `json:"failures"`
}

// ContainerStatus is one live container.
type ContainerStatus = agentrun.ContainerStatus

// KindBoundary is the Failure kind of a boundary incident: a place in a
// group's agent-writable tree where a real directory belonged and something
// else (a symlink, file or fifo) was found, moved aside and replaced.
const KindBoundary = "boundary"

// Failure is a failed run (agentrun.Failure) or a boundary incident
// (KindBoundary).
type Failure = agentrun.Failure

// Router moves messages between the channels and the agents: it stores
// inbound messages, decides which wake an agent, starts containers or pipes
// into live ones through the group queue, commits replies to the outbox and
// sends the outbox. Create it with New and start it with Run.
type Router struct {
	cfg      Config
	db       *store.DB
	channels []channel.Channel
	log      zerolog.Logger
	baseLog  zerolog.Logger // the daemon's, for the parts with a component of their own
	now      func() time.Time
	home     *home.Home
	outWake  *outbox.Signal // the outbox sender's; nil: its own
	queue    *groupqueue.Queue[store.Task]
	runs     *agentrun.Runner
	turns    *turns.Hub
	budget   Budget // nil: no budgets
	alerts   Alerts // nil: no owner alerts
	in       *ingest.Ingest

	out   *outbox.Sender
	pings chan chan struct{} // Ping's round trips through the message loop

	running atomic.Bool
	// pendingReads counts the reads of pending messages from the store.
	pendingReads atomic.Int64

	// onSent, when set (tests), is called after an outbox row is marked sent.
	onSent func(store.OutboxItem)
	// beforeMountCheck, when set (tests), runs between a run's prepare and
	// its mount check: the window in which an agent could swap a directory.
	beforeMountCheck func(store.Folder)
}

// readPending reads g's messages after grp's handed cursor (at most the
// prompt cap; omitted counts those left out). grp's lock must be held.
func (r *Router) readPending(ctx context.Context, g store.Group, grp *agentrun.Group) ([]store.Message, int, error) {
	r.pendingReads.Add(1)
	return r.db.Messages.Pending(ctx, g.Chat, grp.Handed(), r.cfg.PromptCap)
}

// New builds a router and its group queue. Nothing runs until Run.
func New(cfg Config, d Deps) (*Router, error) {
	switch {
	case d.Store == nil:
		return nil, errors.New("new router: no store")
	case d.Runtime == nil:
		return nil, errors.New("new router: no container runtime")
	case cfg.AssistantName == "":
		return nil, errors.New("new router: assistant name is empty")
	case cfg.Home == nil:
		return nil, errors.New("new router: no home")
	case cfg.Container.UID <= 0 || cfg.Container.GID < 0:
		return nil, fmt.Errorf("new router: container user %d:%d: an agent never runs as root", cfg.Container.UID, cfg.Container.GID)
	case cfg.Container.Image == "":
		return nil, errors.New("new router: image is empty")
	case cfg.PromptCap < 0, cfg.IdleTimeout < 0, cfg.ContainerTimeout < 0, cfg.TaskCloseDelay < 0, cfg.ShutdownTimeout < 0, cfg.StartTimeout < 0:
		return nil, errors.New("new router: negative prompt cap or duration")
	case d.Ingest == nil:
		return nil, errors.New("new router: no ingest")
	}
	cfg.Timezone = cmp.Or(cfg.Timezone, time.UTC)
	cfg.PromptCap = cmp.Or(cfg.PromptCap, DefaultPromptCap)
	if cfg.LateWindow <= 0 {
		cfg.LateWindow = DefaultLateWindow
	}
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.ContainerTimeout = cmp.Or(cfg.ContainerTimeout, agentrun.ContainerTimeoutFor(cfg.IdleTimeout))
	cfg.TaskCloseDelay = cmp.Or(cfg.TaskCloseDelay, DefaultTaskCloseDelay)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, DefaultShutdownTimeout)
	cfg.StartTimeout = cmp.Or(cfg.StartTimeout, DefaultStartTimeout)
	if d.Now == nil {
		d.Now = time.Now
	}
	r := &Router{
		cfg:      cfg,
		db:       d.Store,
		channels: slices.Clone(d.Channels),
		log:      d.Log.With().Str("component", "router").Logger(),
		baseLog:  d.Log,
		outWake:  d.OutboxSignal,
		now:      d.Now,
		turns:    d.Turns,
		budget:   d.Budget,
		alerts:   d.Alerts,
		in:       d.Ingest,
		home:     cfg.Home,
		pings:    make(chan chan struct{}),
	}
	r.out = r.newSender(outbox.DefaultBackoff)
	specs := cfg.Container
	specs.Home, specs.AssistantName, specs.Timezone, specs.Instance, specs.Planted = cfg.Home, cfg.AssistantName, cfg.Timezone, cfg.Instance, r.planted
	r.runs = agentrun.New(agentrun.Config{
		AssistantName: cfg.AssistantName, Timezone: cfg.Timezone, Instance: cfg.Instance,
		IdleTimeout: cfg.IdleTimeout, TaskCloseDelay: cfg.TaskCloseDelay, ContainerTimeout: cfg.ContainerTimeout, StartTimeout: cfg.StartTimeout,
		TaskMaxFailures: cfg.TaskMaxFailures,
	}, agentrun.Deps{
		Store: d.Store, Runtime: d.Runtime, Home: cfg.Home, Owner: runOwner{r}, Turns: d.Turns,
		Log: r.log, Now: d.Now,
		BeforeMountCheck: func(f store.Folder) {
			if r.beforeMountCheck != nil {
				r.beforeMountCheck(f)
			}
		},
		ContainerGone: d.ContainerGone,
		ApprovalWait:  d.ApprovalWait,
		Snapshots:     d.Snapshots,
		Specs:         specs,
	})
	// The queue's handlers are the runs' own: they pipe, start and end
	// runs, and ask the queue for slots (Deps.Queue) through it.
	q, err := groupqueue.New(groupqueue.Config{MaxConcurrent: cfg.MaxContainers, RetryDelays: cfg.RetryDelays}, groupqueue.Handlers[store.Task]{
		RunMessages: func(ctx context.Context, slot *groupqueue.Run) error { return r.runs.RunMessages(ctx, slot) },
		RunTask:     r.runs.RunTask,
		CloseIdle:   r.runs.CloseIdle,
		Outcomes:    r.runs,
	}, d.Log)
	if err != nil {
		return nil, fmt.Errorf("new router: %w", err)
	}
	r.queue, r.runs.Queue = q, q
	return r, nil
}

// Run runs the router until ctx ends: it first stops the containers a
// previous instance left behind and clears their input files, then runs the
// message loop, the outbox sender and the group queue, and hands every group
// whose pending messages would wake its agent to the queue (their messages
// are after the cursor: they are run again). When ctx ends it stops taking
// work, waits up to Config.ShutdownTimeout for the runs to end (stopping those
// still busy then), sends the replies they committed, and returns nil.
func (r *Router) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("run router: already running")
	}
	r.runs.CleanLeftovers(ctx)

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	var wg sync.WaitGroup
	queueDone := make(chan struct{})
	goOwned := func(name string, fn func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.protect(name, fn)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(queueDone)
		if err := r.queue.Run(ctx); err != nil {
			r.log.Error().Err(err).Msg("group queue stopped with an error")
		}
	}()
	goOwned("outbox sender", func() { r.out.Run(bg) })
	// Every group is looked at in the loop's first pass: marked before the
	// loop starts, so a message stored before Run is not considered in a
	// pass of its own first, and then again with every group.
	r.in.Rescan()
	goOwned("message loop", func() { r.loop(ctx) })
	r.log.Info().Msg("router running")

	<-ctx.Done()
	r.runs.Stop()
	busy := 0
	for _, gs := range r.queue.Status().Groups {
		if gs.Run != "" && !gs.Idle {
			busy++
		}
	}
	r.log.Info().Int("turns", busy).Dur("timeout", r.cfg.ShutdownTimeout).Msgf("draining %d turns", busy)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ShutdownTimeout)
	defer cancel()
	if err := r.queue.Shutdown(dctx); err != nil {
		r.log.Warn().Err(err).Msg("runs still busy at the shutdown deadline were stopped")
	}
	<-queueDone
	r.flush(dctx)
	stopBG()
	wg.Wait()
	r.log.Info().Msg("router stopped")
	return nil
}

// protect runs fn and turns a panic into a logged error.
func (r *Router) protect(what string, fn func()) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error().Str("part", what).Interface("panic", p).Msg("router part panicked")
		}
	}()
	fn()
}

// EnqueueTask queues a claimed scheduled task for its group's agent. It
// never blocks on a run.
func (r *Router) EnqueueTask(t store.Task) {
	r.queue.EnqueueTask(string(t.Folder), groupqueue.TaskRef[store.Task]{ID: string(t.ID), Task: t})
}

// Status reports the queue, the live containers, the recent failures and
// the home's boundary incidents (as failures of kind KindBoundary). It never
// blocks: it reads the snapshot runs publish as they change, never a group's
// lock (those are held across store transactions) nor the store.
func (r *Router) Status() Status {
	st := Status{Queue: r.queue.Status(), Containers: r.runs.Containers(), Failures: r.runs.Failures()}
	for _, in := range r.home.Incidents() {
		st.Failures = append(st.Failures, Failure{Time: in.Time, Group: in.Group, Kind: KindBoundary, Error: in.String()})
	}
	if st.Failures == nil {
		st.Failures = []Failure{}
	}
	return st
}

// channelFor returns the first channel that owns chat, nil if none does.
func (r *Router) channelFor(chat string) channel.Channel {
	for _, c := range r.channels {
		if c.Owns(chat) {
			return c
		}
	}
	return nil
}
