package agentrun

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

// Task runs scheduled task t of g (answering in t's chat, or g's) with
// text as its prompt, in grp's one container, and records the run in the
// task's run log; q is the queue's object for the run. A task in the
// group's context resumes the group's session; an isolated one starts a
// fresh session that is not kept. It blocks until the container is gone
// and returns the run's failure (nil when it committed a result without a
// failed turn).
func (x *Runner) Task(ctx context.Context, g store.Group, grp *Group, q QueueRun, t store.Task, text string) error {
	log := x.Log.With().Str("group", string(g.Folder)).Str("task", string(t.ID)).Logger()
	started := x.Now()
	if t.Chat != "" {
		g.Chat = t.Chat
	}
	run := x.newRun(q, g, groupqueue.KindTask, t.ID)
	grp.Lock()
	grp.run = run
	x.publish(g.Folder, run)
	var sessp *store.Session
	if t.ContextMode != store.ContextIsolated {
		sessp = x.resumeSession(ctx, log, grp, run, g.Folder)
	}
	grp.Unlock()
	log.Info().Msg("starting agent for scheduled task")

	o := x.Container(ctx, log, g, grp, run, text, sessp, store.OriginTask)
	grp.Lock()
	x.gone(run)
	x.end(grp, g.Folder)
	grp.Unlock()

	fail := o.TaskFailure()
	x.finishTask(log, t, started, o, fail, true)
	return fail
}

// NotRun records in t's run log that it failed with err before its
// container started (started is when it was taken up). Such a run is not the
// task's own failure: it does not count toward the failures that pause it.
func (x *Runner) NotRun(t store.Task, started time.Time, err error) {
	log := x.Log.With().Str("group", string(t.Folder)).Str("task", string(t.ID)).Logger()
	x.finishTask(log, t, started, Outcome{Ended: container.Ended{Err: err}}, err, false)
}

// finishTask records a task run in its log. A failed run that counts adds
// one to the task's failures in a row, which pause it at TaskMaxFailures.
// Its duration ends with its last result: the container's close delay
// after it is not the task's.
func (x *Runner) finishTask(log zerolog.Logger, t store.Task, started time.Time, o Outcome, fail error, counts bool) {
	end := x.Now()
	if !o.LastResultAt.IsZero() {
		end = o.LastResultAt
	}
	run := store.TaskRun{
		TaskID:     t.ID,
		StartedAt:  started,
		Duration:   end.Sub(started),
		Status:     store.RunOK,
		Result:     prompt.Clip(o.LastText, 2000),
		CostUSD:    o.Cost,
		NotCounted: !counts,
		PauseAfter: x.cfg.TaskMaxFailures,
	}
	if fail != nil {
		run.Status = store.RunError
		run.Error = prompt.Clip(fail.Error(), 2000)
	}
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	if err := x.Store.Tasks.FinishRun(ctx, run); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			log.Info().Msg("task was cancelled during its run")
		} else {
			log.Error().Err(err).Msg("cannot record task run")
		}
	}
	if fail == nil {
		log.Info().Dur("duration", run.Duration).Msg("task run finished")
		return
	}
	log.Error().Err(fail).Msg("task run failed")
}

// TaskDropped records that task t will not run (the daemon is stopping):
// its run log says so.
func (x *Runner) TaskDropped(t store.Task) {
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	err := x.Store.Tasks.FinishRun(ctx, store.TaskRun{
		TaskID: t.ID, StartedAt: x.Now(), Status: store.RunError, Error: "not run: bridged was stopping", NotCounted: true,
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		x.Log.Error().Err(err).Str("group", string(t.Folder)).Str("task", string(t.ID)).Msg("cannot record dropped task")
	}
}

// CleanLeftovers stops every managed container an earlier instance with the
// same home left behind (container.StopLeftovers) and removes the input
// files they never read. Their messages are still after the cursors (a
// cursor is stored only with a reply), so they run again.
func (x *Runner) CleanLeftovers(ctx context.Context) {
	if container.StopLeftovers(ctx, x.Runtime, x.layout.Dir, x.cfg.Instance, x.Log) {
		// Every container of this home now is this instance's: a group's
		// first run need not look for one.
		x.leftovers.Swept()
	}
	groups, err := x.Store.Groups.List(ctx)
	if err != nil {
		x.Log.Error().Err(err).Msg("cannot list groups to clear stale input")
		return
	}
	for _, g := range groups {
		if home.CheckFolder(string(g.Folder)) != nil {
			continue
		}
		if err := x.Home.ClearInput(string(g.Folder)); err != nil {
			x.Log.Warn().Err(err).Str("group", string(g.Folder)).Msg("cannot clear stale input")
		}
	}
}
