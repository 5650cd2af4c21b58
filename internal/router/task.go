package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

// runTask is the queue's RunTask handler: one container for one task.
func (r *Router) runTask(ctx context.Context, name string, ref groupqueue.TaskRef[store.Task]) error {
	t := ref.Task
	log := r.log.With().Str("group", name).Str("task", string(t.ID)).Logger()
	started := r.now()
	g, err := r.db.GetGroupByFolder(ctx, store.Folder(name))
	if err != nil {
		err = fmt.Errorf("run task %s: group %s: %w", t.ID, name, err)
		r.finishTask(log, t, started, agentrun.Outcome{Ended: container.Ended{Err: err}}, err)
		return err
	}
	if r.paused(ctx, g) {
		// The occurrence is skipped, not kept: the task runs again at its
		// next time.
		err := fmt.Errorf("run task %s: %w", t.ID, ErrBudgetPaused)
		r.finishTask(log, t, started, agentrun.Outcome{Ended: container.Ended{Err: err}}, err)
		return err
	}
	sess := store.Session{Folder: g.Folder}
	var sessp *store.Session
	if t.ContextMode != store.ContextIsolated {
		if s, err := r.db.GetSession(ctx, g.Folder); err == nil {
			sess = s
			sess.Folder = g.Folder
		} else {
			log.Warn().Err(err).Msg("cannot read session; starting a fresh one")
		}
		sessp = &sess
	}
	chat := t.Chat
	if chat == "" {
		chat = g.Chat
	}
	gs := r.state(g.Folder)
	run := r.runs.BeginTask(&gs.Group, g.Folder, t.ID, chat)
	log.Info().Msg("starting agent for scheduled task")

	text := prompt.Task(r.cfg.Timezone, r.now(), t)
	taskGroup := g
	taskGroup.Chat = chat
	o := r.runs.Container(ctx, log, taskGroup, &gs.Group, run, text, sessp, store.OriginTask)
	r.runs.EndTask(&gs.Group, g.Folder)

	fail := o.TaskFailure()
	r.finishTask(log, t, started, o, fail)
	if fail != nil {
		return fmt.Errorf("run task %s: %w", t.ID, fail)
	}
	return nil
}

// finishTask records a task run in its log; a failure is also shown in
// status and, when the task's previous run did not fail, in its chat.
func (r *Router) finishTask(log zerolog.Logger, t store.Task, started time.Time, o agentrun.Outcome, fail error) {
	run := store.TaskRun{
		TaskID:    t.ID,
		StartedAt: started,
		Duration:  r.now().Sub(started),
		Status:    store.RunOK,
		Result:    prompt.Clip(o.LastText, 2000),
		CostUSD:   o.Cost,
	}
	if fail != nil {
		run.Status = store.RunError
		run.Error = prompt.Clip(fail.Error(), 2000)
	}
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	if err := r.db.FinishTaskRun(ctx, run); err != nil {
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
	r.addFailure(Failure{Time: r.now(), Group: string(t.Folder), Kind: string(groupqueue.KindTask), TaskID: string(t.ID), Error: prompt.Clip(fail.Error(), 500)})
	if strings.HasPrefix(t.LastResult, "error: ") || t.Chat == "" {
		return // already announced when it started failing
	}
	r.notice(t.Chat, t.Folder, prompt.TaskFailedNotice(string(t.ID), fail))
}

// taskDropped records the queue's Dropped outcome: the task will not run
// (the daemon is stopping); its run log says so.
func (r *Router) taskDropped(name string, ref groupqueue.TaskRef[store.Task]) {
	t := ref.Task
	log := r.log.With().Str("group", name).Str("task", string(t.ID)).Logger()
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	err := r.db.FinishTaskRun(ctx, store.TaskRun{
		TaskID: t.ID, StartedAt: r.now(), Status: store.RunError, Error: "not run: bridged was stopping",
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		log.Error().Err(err).Msg("cannot record dropped task")
	}
}
