package agentrun

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

// maxFailures is how many failures Failures remembers.
const maxFailures = 50

// ErrBudgetPaused is the error of a task run skipped because its group's
// daily budget is used up.
var ErrBudgetPaused = errors.New("skipped: the group's daily budget is used up")

// Alerts tells the owner, in the main chat, of a run's condition once
// until it clears (internal/alerts implements it, through Owner.Alert). No
// method blocks for long; each logs its own errors.
type Alerts interface {
	// GaveUp: group folder's agent failed attempts times in a row and
	// gave up until the next message; why is one short line.
	GaveUp(ctx context.Context, folder store.Folder, attempts int, why string)
	// APIRefused: the Claude API refused a turn of folder for a reason
	// waiting cannot heal; label is its kind and status, fix what to do.
	APIRefused(ctx context.Context, folder store.Folder, label, fix string)
	// Recovered: folder's agent ran well again.
	Recovered(ctx context.Context, folder store.Folder)
	// TaskPaused: scheduled task t paused itself after t.Failures failed
	// runs in a row; why is the last failure, one short line. Told once
	// per pause (t.LastRun tells one from the next).
	TaskPaused(ctx context.Context, t store.Task, why string)
}

// taskRefusals is an optional ability of Alerts: telling the owner that a
// scheduled task was paused instead of run because the group that set its
// prompt may no longer choose what the task's group runs.
type taskRefusals interface {
	TaskNotRun(ctx context.Context, t store.Task, why string)
}

// Failure is a run that failed for good (a message run whose retries ran
// out, or a task run), or a failed message run the queue is retrying
// (until the group's next good run; its Error starts "attempt n of m
// failed").
type Failure struct {
	Time   time.Time `json:"time"`
	Group  string    `json:"group"`
	Kind   string    `json:"kind"` // "messages", "task", or the owner's own kinds
	TaskID string    `json:"task_id,omitempty"`
	Error  string    `json:"error"`
}

// Failures lists the recent failures, oldest first, then the retrying
// ones by group. It never blocks on a group.
func (x *Runner) Failures() []Failure {
	x.failMu.Lock()
	defer x.failMu.Unlock()
	out := slices.Clone(x.failures)
	for _, f := range slices.Sorted(maps.Keys(x.retrying)) {
		out = append(out, x.retrying[f])
	}
	return out
}

func (x *Runner) addFailure(f Failure) {
	x.failMu.Lock()
	defer x.failMu.Unlock()
	x.failures = append(x.failures, f)
	if n := len(x.failures) - maxFailures; n > 0 {
		x.failures = slices.Delete(x.failures, 0, n)
	}
}

// Stop tells the runner the daemon is stopping: the outcomes of runs that
// end from now on are not reported (Outcome).
func (x *Runner) Stop() { x.stopping.Store(true) }

// Outcome is the queue's report of how a run ended (groupqueue.Outcomes).
// A failed message run the queue retries shows in Failures until the
// group's next good run; one that failed for good is recorded and told in
// the chat once (and to the owner, for a group other than main); the
// turns hub hears how the turn ended; a dropped task's run log says so.
func (x *Runner) Outcome(name string, o groupqueue.Outcome[store.Task]) {
	folder := store.Folder(name)
	if o.Event == groupqueue.Dropped {
		x.TaskDropped(o.Task.Task)
		return
	}
	if x.stopping.Load() {
		return
	}
	defer x.turnEnded(folder, o)
	why := Reason(o.Err)
	x.failMu.Lock()
	delete(x.retrying, folder)
	if o.Event == groupqueue.Retrying {
		if x.retrying == nil {
			x.retrying = make(map[store.Folder]Failure)
		}
		x.retrying[folder] = Failure{Time: x.Now(), Group: name, Kind: string(groupqueue.KindMessages),
			Error: prompt.Clip(fmt.Sprintf("attempt %d of %d failed, retrying: %s", o.Attempt, o.Attempts, why), 500)}
	}
	x.failMu.Unlock()
	if o.Event == groupqueue.Succeeded {
		x.Owner.Alert(func(ctx context.Context, a Alerts) { a.Recovered(ctx, folder) })
	}
	if o.Event != groupqueue.GaveUp {
		return
	}
	x.Log.Error().Err(o.Err).Str("group", name).Int("attempts", o.Attempt).Msg("agent failed for good; waiting for the next message")
	x.addFailure(Failure{Time: x.Now(), Group: name, Kind: string(groupqueue.KindMessages), Error: prompt.Clip(o.Err.Error(), 500)})
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	g, err := x.Store.Groups.ByFolder(ctx, folder)
	if err != nil {
		x.Log.Warn().Err(err).Str("group", name).Msg("cannot look up the group to tell its chat")
		return
	}
	if refusal, ok := AsAPIRefusal(o.Err); ok {
		// Waiting cannot heal it: the chat is told the fix, the owner is
		// alerted once (for every group: the credential is the daemon's).
		x.Owner.Notice(g.Chat, folder, refusal.Notice())
		if !g.IsMain {
			x.Owner.Alert(func(ctx context.Context, a Alerts) { a.APIRefused(ctx, folder, refusal.Label(), refusal.Fix()) })
		}
		return
	}
	x.Owner.Notice(g.Chat, folder, prompt.GaveUpNotice(o.Attempt, why))
	if g.IsMain {
		// The owner reads the main chat: the notice above already told them.
		return
	}
	x.Owner.Alert(func(ctx context.Context, a Alerts) {
		a.GaveUp(ctx, folder, o.Attempt, prompt.Clip(prompt.OneLine(why), 200))
	})
}

// turnEnded tells the turns hub how a message run of folder ended, once the
// queue judged it (a turn that committed its reply was told already). A run
// that ended well settled its chat up to the group's cursor; a failed one
// failed every message of the chat stored by then that was not answered.
func (x *Runner) turnEnded(folder store.Folder, o groupqueue.Outcome[store.Task]) {
	if x.Turns == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	g, err := x.Store.Groups.ByFolder(ctx, folder)
	if err != nil {
		return // removed: nobody can wait on its chat
	}
	e := turns.End{Chat: string(g.Chat), Attempt: o.Attempt, Attempts: o.Attempts}
	var upto store.MessageID
	switch o.Event {
	case groupqueue.Succeeded:
		e.Result = turns.Done
		upto, err = x.Store.Sessions.Cursor(ctx, folder)
	case groupqueue.Retrying, groupqueue.GaveUp:
		e.Result = turns.Failed
		if o.Event == groupqueue.GaveUp {
			e.Result = turns.GaveUp
		}
		if o.Err != nil {
			e.Reason = prompt.Clip(prompt.OneLine(Reason(o.Err)), 300)
		}
		upto, err = x.Store.Messages.LatestID(ctx, g.Chat)
	default:
		return
	}
	if err != nil {
		x.Log.Warn().Err(err).Str("group", string(folder)).Msg("cannot tell how the turn ended")
		return
	}
	e.Upto = int64(upto)
	x.Turns.Ended(e)
}

// RunTask is the queue's RunTask handler: one container for one task
// (Task), unless the group's daily budget is used up (Owner.Paused) or the
// group that set the task's prompt may no longer choose what its group runs
// (rules.TaskMayRun). A failure is shown in Failures and, when the task's
// previous run did not fail, in its chat; a failure that paused the task
// (its TaskMaxFailures-th in a row) is told to the owner once.
func (x *Runner) RunTask(ctx context.Context, q *groupqueue.Run, ref groupqueue.TaskRef[store.Task]) error {
	name, t := q.Group(), ref.Task
	started := x.Now()
	g, err := x.Store.Groups.ByFolder(ctx, store.Folder(name))
	switch {
	case err != nil:
		err = fmt.Errorf("run task %s: group %s: %w", t.ID, name, err)
	case x.Owner.Paused(ctx, g):
		// The occurrence is skipped, not kept: the task runs again at its
		// next time.
		err = fmt.Errorf("run task %s: %w", t.ID, ErrBudgetPaused)
	default:
		if err = x.taskMayRun(ctx, t); errors.Is(err, rules.ErrLesserProfile) {
			return fmt.Errorf("run task %s: %w", t.ID, err) // recorded, paused and told
		} else if err != nil {
			err = fmt.Errorf("run task %s: %w", t.ID, err)
		}
	}
	fail := err
	if err != nil {
		x.NotRun(t, started, err)
	} else if fail = x.Task(ctx, g, x.Group(g.Folder), q, t, prompt.Task(x.cfg.Timezone, x.Now(), t)); fail != nil {
		err = fmt.Errorf("run task %s: %w", t.ID, fail)
	}
	if fail == nil {
		return nil
	}
	x.addFailure(Failure{Time: x.Now(), Group: string(t.Folder), Kind: string(groupqueue.KindTask), TaskID: string(t.ID), Error: prompt.Clip(fail.Error(), 500)})
	if !strings.HasPrefix(t.LastResult, "error: ") && t.Chat != "" {
		// Told once, when it starts failing.
		x.Owner.Notice(t.Chat, t.Folder, prompt.TaskFailedNotice(string(t.ID), fail))
	}
	x.taskPaused(ctx, t.ID, fail)
	return err
}

// taskPaused tells the owner when the failed run of task id paused it.
func (x *Runner) taskPaused(ctx context.Context, id store.TaskID, fail error) {
	if x.cfg.TaskMaxFailures <= 0 {
		return
	}
	t, err := x.Store.Tasks.Get(context.WithoutCancel(ctx), id)
	if err != nil || t.Status != store.TaskPaused || !t.PausedByFailures {
		return // cancelled meanwhile, or not paused by this run
	}
	x.Log.Warn().Str("group", string(t.Folder)).Str("task", string(t.ID)).Int("failures", t.Failures).
		Msg("task paused after failing too many times in a row")
	why := prompt.Clip(prompt.OneLine(fail.Error()), 200)
	x.Owner.Alert(func(ctx context.Context, a Alerts) { a.TaskPaused(ctx, t, why) })
}

// TaskNotRun tells the owner, through the alerts when they can, that task t
// was paused instead of run; why is rules.TaskMayRun's reason. It does not
// block for long.
func (x *Runner) TaskNotRun(t store.Task, why string) {
	x.Log.Warn().Str("group", string(t.Folder)).Str("task", string(t.ID)).Str("set_by", string(t.PromptBy)).
		Msg("task not run: the group that set it is not full")
	x.Owner.Alert(func(ctx context.Context, a Alerts) {
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
func (x *Runner) taskMayRun(ctx context.Context, t store.Task) error {
	if t.PromptBy == "" || t.PromptBy == t.Folder {
		return nil
	}
	var setter *store.Group
	g, err := x.Store.Groups.ByFolder(ctx, t.PromptBy)
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
	x.NotRun(t, x.Now(), refusal)
	if err := x.Store.Tasks.Pause(context.WithoutCancel(ctx), t.ID, refusal.Error()); err != nil && !errors.Is(err, store.ErrNotFound) {
		x.Log.Error().Err(err).Str("task", string(t.ID)).Msg("cannot pause task")
	}
	x.TaskNotRun(t, refusal.Error())
	return refusal
}
