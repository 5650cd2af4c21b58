package router

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/store"
)

// runTask is the queue's RunTask handler: one container for one task
// (agentrun.Runner.Task, which keeps q, the queue's object for the run),
// unless the group's daily budget is used up. A
// failure is shown in status and, when the task's previous run did not
// fail, in its chat; a failure that paused the task (its
// TaskMaxFailures-th in a row) is told to the owner once.
func (r *Router) runTask(ctx context.Context, q *groupqueue.Run, ref groupqueue.TaskRef[store.Task]) error {
	name := q.Group()
	t := ref.Task
	started := r.now()
	g, err := r.db.GetGroupByFolder(ctx, store.Folder(name))
	switch {
	case err != nil:
		err = fmt.Errorf("run task %s: group %s: %w", t.ID, name, err)
	case r.paused(ctx, g):
		// The occurrence is skipped, not kept: the task runs again at its
		// next time.
		err = fmt.Errorf("run task %s: %w", t.ID, ErrBudgetPaused)
	default:
		if err = r.taskMayRun(ctx, t); errors.Is(err, rules.ErrLesserProfile) {
			return fmt.Errorf("run task %s: %w", t.ID, err) // recorded, paused and told
		} else if err != nil {
			err = fmt.Errorf("run task %s: %w", t.ID, err)
		}
	}
	fail := err
	if err != nil {
		r.runs.NotRun(t, started, err)
	} else if fail = r.runs.Task(ctx, g, r.runs.Group(g.Folder), q, t, prompt.Task(r.cfg.Timezone, r.now(), t)); fail != nil {
		err = fmt.Errorf("run task %s: %w", t.ID, fail)
	}
	if fail == nil {
		return nil
	}
	r.addFailure(Failure{Time: r.now(), Group: string(t.Folder), Kind: string(groupqueue.KindTask), TaskID: string(t.ID), Error: prompt.Clip(fail.Error(), 500)})
	if !strings.HasPrefix(t.LastResult, "error: ") && t.Chat != "" {
		// Told once, when it starts failing.
		r.notice(t.Chat, t.Folder, prompt.TaskFailedNotice(string(t.ID), fail))
	}
	r.taskPaused(ctx, t.ID, fail)
	return err
}

// taskPaused tells the owner when the failed run of task id paused it.
func (r *Router) taskPaused(ctx context.Context, id store.TaskID, fail error) {
	if r.cfg.TaskMaxFailures <= 0 {
		return
	}
	t, err := r.db.GetTask(context.WithoutCancel(ctx), id)
	if err != nil || t.Status != store.TaskPaused || !t.PausedByFailures {
		return // cancelled meanwhile, or not paused by this run
	}
	r.log.Warn().Str("group", string(t.Folder)).Str("task", string(t.ID)).Int("failures", t.Failures).
		Msg("task paused after failing too many times in a row")
	why := prompt.Clip(prompt.OneLine(fail.Error()), 200)
	r.alert(func(ctx context.Context, a Alerts) { a.TaskPaused(ctx, t, why) })
}
