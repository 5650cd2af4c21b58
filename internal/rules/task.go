package rules

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
)

// OnceSlack is how far in the past a once time may be and still be accepted
// (it then runs at once): whoever gave it checked it a moment ago.
const OnceSlack = time.Minute

// FirstRun checks a new schedule and returns it with its first run from now
// in loc. A schedule that never runs, or a once time more than OnceSlack in
// the past, is refused. The error wraps ErrInvalid (and, for a value that
// does not parse, schedule.ErrInvalid) and says exactly what is wrong.
func FirstRun(kind schedule.Kind, value string, now time.Time, loc *time.Location) (schedule.Schedule, time.Time, error) {
	loc = orUTC(loc)
	sc, err := schedule.Parse(kind, value, loc)
	if err != nil {
		return sc, time.Time{}, &invalidError{msg: err.Error(), wrap: err}
	}
	first := sc.First(now, loc)
	if first.IsZero() {
		return sc, time.Time{}, invalid("schedule %s %q never runs", kind, value)
	}
	if kind == schedule.Once && first.Before(now.Add(-OnceSlack)) {
		return sc, time.Time{}, invalid("invalid time %q: it is in the past (now is %s in %s)",
			sc.Value, now.In(loc).Format("2006-01-02 15:04"), loc)
	}
	return sc, first, nil
}

func orUTC(loc *time.Location) *time.Location {
	if loc == nil {
		return time.UTC
	}
	return loc
}

// Pause returns t paused. It reports whether anything changed: a paused
// task stays as it is. A running task (a once task whose run is in flight)
// has no later run to pause, and a done task nothing left.
func Pause(t store.Task) (store.Task, bool, error) {
	switch t.Status {
	case store.TaskPaused:
		return t, false, nil
	case store.TaskRunning:
		return t, false, invalid("task %s is running now and has no later run to pause", t.ID)
	case store.TaskDone:
		return t, false, invalid("task %s is done; there is nothing left to pause", t.ID)
	}
	t.Status = store.TaskPaused
	return t, true, nil
}

// Resume returns t active again, with its next run: a cron or interval task
// whose next run passed while it was paused continues with its next slot
// after now (an interval stays anchored to its schedule); a once task keeps
// its time, and runs at once if that has passed. It reports whether anything
// changed: an active task stays as it is. A running or done task cannot be
// resumed, nor one with no run left or whose schedule no longer parses.
// Resuming sets the task's count of failed runs in a row back to 0, so a
// task that paused itself after its failures gets its full count again.
// Whether the task's group is still registered is ResumeTask's to check.
func Resume(t store.Task, now time.Time, loc *time.Location) (store.Task, bool, error) {
	loc = orUTC(loc)
	switch t.Status {
	case store.TaskActive:
		return t, false, nil
	case store.TaskRunning:
		return t, false, invalid("task %s is running now; it is not paused", t.ID)
	case store.TaskDone:
		return t, false, invalid("task %s is done; give it a new schedule to run it again", t.ID)
	}
	sc, err := schedule.Parse(schedule.Kind(t.Kind), t.Value, loc)
	if err != nil {
		return t, false, &invalidError{msg: "task " + string(t.ID) + " cannot be resumed: " + err.Error() + "; give it a new schedule", wrap: err}
	}
	noneLeft := invalid("task %s has no run left; give it a new schedule to run it again", t.ID)
	switch {
	case t.Kind == store.TaskOnce:
		if t.NextRun == nil {
			return t, false, noneLeft
		}
	case t.NextRun == nil:
		first := sc.First(now, loc)
		if first.IsZero() {
			return t, false, noneLeft
		}
		t.NextRun = &first
	case t.NextRun.Before(now):
		next := sc.Next(*t.NextRun, now, loc)
		if next.IsZero() {
			return t, false, noneLeft
		}
		t.NextRun = &next
	}
	t.Status = store.TaskActive
	t.Failures, t.PausedByFailures = 0, false
	return t, true, nil
}

// TaskChange changes a task's prompt or schedule; nil fields are left
// alone. Kind and Value go together.
type TaskChange struct {
	Prompt *string
	Kind   *schedule.Kind
	Value  *string
}

// Update returns t with c applied. A new schedule gets its first run from
// now (see FirstRun) and makes a done task active again; a paused task
// stays paused. A running task keeps its schedule until its run has
// finished.
func Update(t store.Task, c TaskChange, now time.Time, loc *time.Location) (store.Task, error) {
	if (c.Kind == nil) != (c.Value == nil) {
		return t, invalid("the schedule's type and value must be changed together")
	}
	if c.Prompt == nil && c.Kind == nil {
		return t, invalid("nothing to change: give a prompt or a schedule")
	}
	if c.Prompt != nil {
		if strings.TrimSpace(*c.Prompt) == "" {
			return t, invalid("the prompt must not be empty")
		}
		t.Prompt = *c.Prompt
	}
	if c.Kind != nil {
		if t.Status == store.TaskRunning {
			return t, invalid("task %s is running now; change its schedule when the run has finished", t.ID)
		}
		sc, first, err := FirstRun(*c.Kind, *c.Value, now, loc)
		if err != nil {
			return t, err
		}
		t.Kind, t.Value, t.NextRun = store.TaskKind(sc.Kind), sc.Value, &first
		if t.Status == store.TaskDone {
			t.Status = store.TaskActive
		}
	}
	return t, nil
}

// PauseTask pauses t (see Pause) inside tx and returns it as stored.
func PauseTask(ctx context.Context, tx *store.Tx, t store.Task) (store.Task, error) {
	p, changed, err := Pause(t)
	if err != nil || !changed {
		return p, err
	}
	if err := tx.Tasks.Pause(ctx, p.ID, ""); err != nil {
		return t, err
	}
	return p, nil
}

// ResumeTask resumes t (see Resume) inside tx and returns it as stored. A
// task whose group is no longer registered cannot be resumed: the scheduler
// would only pause it again.
func ResumeTask(ctx context.Context, tx *store.Tx, t store.Task, now time.Time, loc *time.Location) (store.Task, error) {
	r, changed, err := Resume(t, now, loc)
	if err != nil || !changed {
		return r, err
	}
	if _, err := tx.Groups.ByFolder(ctx, t.Folder); errors.Is(err, store.ErrNotFound) {
		return t, invalid("task %s belongs to group %s, which is not registered", t.ID, t.Folder)
	} else if err != nil {
		return t, err
	}
	if err := tx.Tasks.Update(ctx, r); err != nil {
		return t, err
	}
	return r, nil
}

// UpdateTask changes t (see Update) inside tx and returns it as stored.
func UpdateTask(ctx context.Context, tx *store.Tx, t store.Task, c TaskChange, now time.Time, loc *time.Location) (store.Task, error) {
	u, err := Update(t, c, now, loc)
	if err != nil {
		return t, err
	}
	if err := tx.Tasks.Update(ctx, u); err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return t, &invalidError{msg: err.Error(), wrap: err}
		}
		return t, err
	}
	return u, nil
}

// CancelTask deletes t inside tx, whatever its state, and keeps its run
// log; a run in flight is recorded as cancelled and its own end is not.
func CancelTask(ctx context.Context, tx *store.Tx, t store.Task) error {
	return tx.Tasks.Delete(ctx, t.ID)
}
