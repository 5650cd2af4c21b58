package router

import (
	"context"
	"errors"

	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/store"
)

// taskRefusals is an optional ability of Alerts: telling the owner that a
// scheduled task was paused instead of run because the group that set its
// prompt may no longer choose what the task's group runs. It does not
// block for long.
type taskRefusals interface {
	TaskNotRun(ctx context.Context, t store.Task, why string)
}

// TaskNotRun tells the owner, through the alerts when they can, that task t
// was paused instead of run; why is rules.TaskMayRun's reason. The
// scheduler calls it for a task it paused at its claim. It does not block
// for long.
func (r *Router) TaskNotRun(t store.Task, why string) {
	r.log.Warn().Str("group", string(t.Folder)).Str("task", string(t.ID)).Str("set_by", string(t.PromptBy)).
		Msg("task not run: the group that set it is not full")
	r.alert(func(ctx context.Context, a Alerts) {
		if tell, ok := a.(taskRefusals); ok {
			tell.TaskNotRun(ctx, t, why)
		}
	})
}

// taskMayRun checks, as task t's run starts, that the group that set its
// prompt may still choose what t's group runs (rules.TaskMayRun): the
// scheduler checked at its claim, and a profile may have changed while the
// task waited for its group. A task that may not run is recorded as not run,
// paused and told to the owner; the error, which wraps
// rules.ErrLesserProfile, says why. Any other error is the store's, and
// nothing was recorded.
func (r *Router) taskMayRun(ctx context.Context, t store.Task) error {
	if t.PromptBy == "" || t.PromptBy == t.Folder {
		return nil
	}
	var setter *store.Group
	g, err := r.db.Groups.ByFolder(ctx, t.PromptBy)
	switch {
	case err == nil:
		setter = &g
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	refusal := rules.TaskMayRun(t, setter)
	if refusal == nil {
		return nil
	}
	r.runs.NotRun(t, r.now(), refusal)
	if err := r.db.Tasks.Pause(context.WithoutCancel(ctx), t.ID, refusal.Error()); err != nil && !errors.Is(err, store.ErrNotFound) {
		r.log.Error().Err(err).Str("task", string(t.ID)).Msg("cannot pause task")
	}
	r.TaskNotRun(t, refusal.Error())
	return refusal
}
