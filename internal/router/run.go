package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

// Errors of a run that ended without a reply.
var (
	errTimedOut   = errors.New("the agent printed nothing before the container timeout")
	errNoStart    = errors.New("the agent did not start")
	errNoResult   = errors.New("the container ended without a result")
	errStopped    = errors.New("the run was stopped at shutdown")
	errAgentError = errors.New("agent error")
	errNoCommit   = errors.New("could not store the reply")
)

// outcome is how a container run ended: the container's end, and what the
// run committed.
type outcome struct {
	container.Ended
	results int // results committed
	// agentErr is the text of the error that failed a turn: for a message
	// run, a runner error while a turn was in flight or an is_error result,
	// cleared when a later result commits (the runner re-sent the turn and
	// it finished); for a task, such an error before any reply.
	agentErr  string
	commitErr error  // a result that could not be committed
	lastText  string // last reply text (a task's result)
	cost      float64
}

// failure returns the error of a run that did not end well, nil if it did:
// it exited cleanly after at least one committed result, with no turn left
// failed. Whether that loses anything is decided by the caller: a run whose
// every hand-over is committed lost nothing.
func (o outcome) failure() error {
	switch {
	case o.Err != nil:
		return o.Err
	case o.commitErr != nil:
		return fmt.Errorf("%w: %w", errNoCommit, o.commitErr)
	case o.agentErr != "":
		return fmt.Errorf("%w: %s", errAgentError, prompt.Clip(prompt.OneLine(o.agentErr), 300))
	case o.Stopped:
		return errStopped
	case o.NoStart:
		return fmt.Errorf("%w: no output within %s of the container's start", errNoStart, o.Timeout)
	case o.TimedOut && o.Timeout > 0:
		return fmt.Errorf("%w (%s)", errTimedOut, o.Timeout)
	case o.TimedOut:
		return errTimedOut
	case o.Exit.Err != nil:
		return fmt.Errorf("container exit: %w", o.Exit.Err)
	case o.Exit.Code != 0:
		return fmt.Errorf("container exited with code %d", o.Exit.Code)
	case o.results == 0:
		return errNoResult
	}
	return nil
}

// runMessages is the queue's RunMessages handler: one container for the
// group's pending messages.
func (r *Router) runMessages(ctx context.Context, name string) error {
	folder := store.Folder(name)
	g, err := r.db.GetGroupByFolder(ctx, folder)
	if err != nil {
		r.queue.MarkClosing(name) // no container: new messages need a new run
		if errors.Is(err, store.ErrNotFound) {
			r.log.Info().Str("group", name).Msg("group was removed; its messages are not run")
			return nil
		}
		return fmt.Errorf("run messages of %s: %w", name, err)
	}
	err = r.runMessagesFor(ctx, g)
	if isHang(err) {
		return hang{err}
	}
	return err
}

// isHang reports whether err is a run stopped by a timeout.
func isHang(err error) bool {
	return errors.Is(err, errTimedOut) || errors.Is(err, errNoStart)
}

// hang is a run error the queue counts as a hang (it wraps
// groupqueue.ErrHang without changing the error's text).
type hang struct{ error }

func (e hang) Unwrap() error { return e.error }

func (hang) Is(target error) bool { return target == groupqueue.ErrHang }

// handover takes the group's pending messages for a new container. It
// returns nil when none would wake the agent. Until it has run, a pipe into
// this run hands nothing over (handover takes those messages too); when it
// returns nil the run is marked closing, so later messages start a new run.
func (r *Router) handover(ctx context.Context, g store.Group, gs *groupState) (*liveRun, string, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	run, text, err := func() (*liveRun, string, error) {
		if err := gs.loadLocked(ctx, r.db, g.Folder); err != nil {
			return nil, "", err
		}
		msgs, omitted, err := r.readPending(ctx, g, gs)
		gs.read = nil
		if err != nil {
			return nil, "", err
		}
		if len(msgs) == 0 || !r.triggered(g, msgs) {
			return nil, "", nil
		}
		if r.paused(ctx, g) {
			r.log.Info().Str("group", string(g.Folder)).Msg("agent paused by its daily budget; messages wait")
			return nil, "", nil
		}
		text, n := prompt.Fit(r.cfg.Timezone, r.now(), msgs, omitted, ipc.MaxTextBytes)
		r.noteLeftOut(g, gs, msgs[len(msgs)-n].ID, len(msgs)-n+omitted)
		run := &liveRun{kind: groupqueue.KindMessages, chat: g.Chat, name: r.containerName(g.Folder), started: r.now(), kick: make(chan struct{}, 1)}
		gs.run = run
		gs.handed = msgs[len(msgs)-1].ID
		run.settled = gs.handed
		r.publish(g.Folder, run)
		r.log.Info().Str("group", string(g.Folder)).Int("messages", n).Int("left_out", len(msgs)-n+omitted).Msg("starting agent for messages")
		return run, text, nil
	}()
	if run == nil {
		r.queue.MarkClosing(string(g.Folder))
	}
	if err != nil {
		return nil, "", fmt.Errorf("run messages of %s: %w", g.Folder, err)
	}
	return run, text, nil
}

func (r *Router) runMessagesFor(ctx context.Context, g store.Group) error {
	folder := g.Folder
	log := r.log.With().Str("group", string(folder)).Logger()
	gs := r.state(folder)
	run, text, err := r.handover(ctx, g, gs)
	if run == nil {
		return err
	}

	r.out.SetTyping(string(g.Chat), true)
	sess, err := r.db.GetSession(ctx, folder)
	if err != nil {
		log.Warn().Err(err).Msg("cannot read session; starting a fresh one")
		sess = store.Session{}
	}
	sess.Folder = folder
	o := r.runContainer(ctx, log, g, run, text, &sess, store.OriginReply)

	// The container is gone: nothing can be piped into it any more.
	r.queue.MarkClosing(string(folder))
	gs.mu.Lock()
	fail := o.failure()
	// Messages handed over and not committed with a reply: the turns in
	// flight when the run ended, and turns that ended without a reply.
	uncommitted := gs.handed != gs.persisted
	// A turn that committed an agent action and then failed is not run
	// again (it would act twice): the chat is told instead.
	actedFail := fail != nil && run.acted
	if fail != nil && !uncommitted {
		log.Warn().Err(fail).Msg("run ended badly after every turn was committed; nothing to run again")
		fail = nil
	}
	// Input files the agent never read: their messages go back to pending.
	rollback, unread := store.MessageID(-1), 0
	if len(run.piped) > 0 {
		in, err := r.home.Input(string(folder))
		if err != nil {
			// The files cannot be checked: count them all as unread, so
			// their messages run again rather than be lost.
			log.Warn().Err(err).Msg("cannot check unread input files")
			rollback, unread = run.piped[0].before, len(run.piped)
		} else {
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
			in.Close()
		}
	}
	again := false
	switch {
	case fail != nil:
		// A turn failed (or the run ended under one): back to the last
		// committed reply; the queue's retry hands the rest over again.
		gs.handed = gs.persisted
	case rollback >= 0:
		gs.handed = rollback
		again = true
	}
	if fail == nil && gs.handed != gs.persisted {
		if err := r.db.SetCursor(context.WithoutCancel(ctx), folder, gs.handed); err != nil {
			log.Error().Err(err).Msg("cannot store cursor")
		} else {
			gs.persisted = gs.handed
		}
	}
	gs.run = nil
	r.publish(folder, nil)
	gs.mu.Unlock()

	r.out.SetTyping(string(g.Chat), false)
	if actedFail {
		log.Warn().Err(o.failure()).Msg("a turn failed after the agent acted; its messages are not run again")
		r.notice(g.Chat, folder, prompt.ActedNotice(o.failure()))
	}
	if unread > 0 {
		log.Info().Int("files", unread).Msg("piped messages the agent never read will run again")
	}
	if again {
		r.queue.EnqueueMessages(string(folder))
	}
	if fail != nil {
		return fmt.Errorf("run messages of %s: %w", folder, fail)
	}
	return nil
}

// Outcome is the queue's report of how a run ended (groupqueue.Outcomes):
// the one way run outcomes reach the router. A failed message run the queue
// retries shows in Status until the group's next good run; one that failed
// for good is recorded and told in the chat once; a dropped task's run log
// says so.
func (r *Router) Outcome(name string, o groupqueue.Outcome[store.Task]) {
	folder := store.Folder(name)
	if o.Event == groupqueue.Dropped {
		r.taskDropped(name, o.Task)
		return
	}
	if r.stopping.Load() {
		return
	}
	defer r.turnEnded(folder, o)
	why := ""
	if o.Err != nil {
		why = strings.TrimPrefix(o.Err.Error(), fmt.Sprintf("run messages of %s: ", folder))
	}
	r.mu.Lock()
	delete(r.retrying, folder)
	if o.Event == groupqueue.Retrying {
		r.retrying[folder] = Failure{Time: r.now(), Group: name, Kind: string(groupqueue.KindMessages),
			Error: prompt.Clip(fmt.Sprintf("attempt %d of %d failed, retrying: %s", o.Attempt, o.Attempts, why), 500)}
	}
	r.mu.Unlock()
	if o.Event == groupqueue.Succeeded {
		r.clearAlert(GaveUpKey(folder))
	}
	if o.Event != groupqueue.GaveUp {
		return
	}
	r.log.Error().Err(o.Err).Str("group", name).Int("attempts", o.Attempt).Msg("agent failed for good; waiting for the next message")
	r.addFailure(Failure{Time: r.now(), Group: name, Kind: string(groupqueue.KindMessages), Error: prompt.Clip(o.Err.Error(), 500)})
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	g, err := r.db.GetGroupByFolder(ctx, folder)
	if err != nil {
		r.log.Warn().Err(err).Str("group", name).Msg("cannot look up the group to tell its chat")
		return
	}
	r.notice(g.Chat, folder, prompt.GaveUpNotice(o.Attempt, why))
	if g.IsMain {
		// The owner reads the main chat: the notice above already told them.
		return
	}
	r.raise(GaveUpKey(folder), fmt.Sprintf("The agent of group %s failed %d times in a row and gave up until the next message (%s). See `bridged status` and the logs.", folder, o.Attempt, prompt.Clip(prompt.OneLine(why), 200)))
}

// closeIdle is the queue's CloseIdle handler: it writes the close sentinel,
// and the runner exits once its turn is done. It takes no lock.
func (r *Router) closeIdle(name string) {
	if home.CheckFolder(name) != nil {
		return
	}
	if err := r.home.WriteClose(name); err != nil {
		r.log.Error().Err(err).Str("group", name).Msg("cannot write close sentinel")
		return
	}
	r.log.Debug().Str("group", name).Msg("close sentinel written")
}

func (r *Router) containerName(folder store.Folder) string {
	return fmt.Sprintf("bridged-%s-%d-%d", folder, r.now().UnixMilli(), r.seq.Add(1))
}

// hardTimeout is the group's container timeout: its own (at least the idle
// timeout plus a margin) or the daemon's.
func (r *Router) hardTimeout(g store.Group) time.Duration {
	if t := g.ContainerConfig.Timeout; t > 0 {
		return max(t, r.cfg.IdleTimeout+timeoutMargin)
	}
	return r.cfg.ContainerTimeout
}

// runContainer starts one container for g with text as its prompt and
// follows it until it is gone (container.Supervise): results are committed
// to the outbox (origin) with the session and usage as they come. sess is
// nil for an isolated task (its session is not kept).
func (r *Router) runContainer(ctx context.Context, log zerolog.Logger, g store.Group, run *liveRun, text string, sess *store.Session, origin store.Origin) outcome {
	start := time.Now()
	var o outcome
	folder := string(g.Folder)
	input := ipc.RunInput{
		Prompt:        text,
		Group:         folder,
		Chat:          string(g.Chat),
		IsMain:        g.IsMain,
		IsTask:        origin == store.OriginTask,
		AssistantName: r.cfg.AssistantName,
		Timezone:      r.cfg.Timezone.String(),
		Model:         g.ContainerConfig.Model,
	}
	if sess != nil {
		input.SessionID, input.ResumeAt = sess.SessionID, sess.LastUUID
	}
	spec, release, err := r.specs.Build(log, g, run.name, input)
	if err != nil {
		o.Err = err
		return o
	}
	defer release()
	if err := r.home.RemoveClose(folder); err != nil {
		o.Err = fmt.Errorf("prepare group directories: %w", err)
		return o
	}
	rl := container.OpenRunLog(log, r.layout.LogsDir(folder), r.now())
	defer rl.Close()
	rl.Header(r.log.GetLevel() <= zerolog.DebugLevel, string(run.kind), string(run.task), spec, input)
	stderrLog := log.With().Str("container", spec.Name).Logger()
	spec.Stderr = func(line string) {
		rl.Stderr(line)
		stderrLog.Debug().Str("line", line).Msg("container stderr")
	}

	if r.beforeMountCheck != nil {
		r.beforeMountCheck(g.Folder)
	}
	if err := r.specs.CheckMounts(spec); err != nil {
		log.Error().Err(err).Msg("bind-mount source failed its check; container not started")
		o.Err = err
		rl.Footer(o.Ended, 0, false, o.failure())
		return o
	}
	gs := r.state(g.Folder)
	stopping, errClosed := false, false
	o.Ended = container.Supervise(ctx, r.rt, spec, container.Watch{
		Log:          log,
		Instance:     r.cfg.Instance,
		Timeout:      r.hardTimeout(g),
		StartTimeout: r.cfg.StartTimeout,
		Kick:         run.kick,
		Started: func(id string) {
			gs.mu.Lock()
			run.id = id
			r.publish(g.Folder, run)
			gs.mu.Unlock()
		},
		Stopping: func() {
			stopping = true
			r.queue.MarkClosing(folder)
		},
		Event: func(ev ipc.Event) {
			r.handleEvent(ctx, log, g, run, sess, origin, ev, &o)
			if origin == store.OriginReply && (o.agentErr != "" || o.commitErr != nil) && !stopping && !errClosed {
				// A turn failed: the container takes no more messages and
				// closes once idle (a turn the runner re-sent may still
				// finish and commit); what it did not commit runs again.
				errClosed = true
				log.Info().Msg("a turn failed; closing the container")
				r.queue.MarkClosing(folder)
				r.closeIdle(folder)
			}
		},
	})
	gs.mu.Lock()
	replied := run.replied
	gs.mu.Unlock()
	rl.Footer(o.Ended, o.results, replied, o.failure())
	log.Info().Str("container", spec.Name).Int("exit_code", o.Exit.Code).Dur("duration", time.Since(start)).Bool("timed_out", o.TimedOut).
		Int("results", o.results).Bool("replied", replied).Msg("container finished")
	return o
}
