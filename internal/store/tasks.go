package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Task is a scheduled prompt for a group's agent.
type Task struct {
	ID          TaskID // "task-…", chosen by Tasks.Create
	Folder      Folder
	Chat        ChatID // where the output goes
	Prompt      string
	Kind        TaskKind
	Value       string // the schedule value, as the user gave it
	ContextMode ContextMode
	Status      TaskStatus
	NextRun     *time.Time // nil: none
	LastRun     *time.Time
	LastResult  string
	CreatedAt   time.Time
	// Failures counts the task's failed runs in a row; a good run and a
	// resume set it back to 0 (see TaskRun.PauseAfter).
	Failures int
	// PausedByFailures: the task paused itself after Failures failed runs
	// in a row (not a person's pause). Resuming clears it.
	PausedByFailures bool
	// PromptBy is the folder of the group whose agent last set the task's
	// prompt (schedule_task, update_task); empty: the owner. A task whose
	// prompt another group set runs only while that group may direct it
	// (rules.TaskMayRun).
	PromptBy Folder
	// RunInFlight is set by Tasks.ClaimDue only: the task's earlier run is still
	// queued or running (its 'running' row in the run log is open).
	RunInFlight bool
}

// TaskRun is one run of a task, for the run log.
type TaskRun struct {
	ID        int64
	TaskID    TaskID
	StartedAt time.Time
	Duration  time.Duration
	Status    RunStatus
	Result    string
	Error     string
	CostUSD   float64

	// NotCounted: an error run that was not the task's own failure (its
	// group was paused by its budget, the daemon dropped it or stopped
	// during it) leaves the task's failure count as it is. An ok run always
	// sets it back to 0.
	NotCounted bool
	// PauseAfter, when above 0, pauses an active task whose failures in a
	// row reach it with this run: it becomes paused, PausedByFailures.
	PauseAfter int
}

const taskColumns = `id, folder, chat, prompt, kind, value, context_mode, status, next_run, last_run, last_result, created_at, failures, paused_by_failures, prompt_by`

func scanTask(row rowScanner) (Task, error) {
	var t Task
	var next, last sql.NullInt64
	var created int64
	err := row.Scan(&t.ID, &t.Folder, &t.Chat, &t.Prompt, &t.Kind, &t.Value, &t.ContextMode, &t.Status, &next, &last, &t.LastResult, &created,
		&t.Failures, &t.PausedByFailures, &t.PromptBy)
	t.NextRun = fromNullMS(next)
	t.LastRun = fromNullMS(last)
	t.CreatedAt = fromMS(created)
	return t, err
}

func newTaskID() TaskID {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return TaskID("task-" + hex.EncodeToString(b[:]))
}

// check validates t's fields and fills the defaults (isolated, active).
func (t *Task) check() error {
	if err := ValidateFolder(string(t.Folder)); err != nil {
		return err
	}
	if t.ContextMode == "" {
		t.ContextMode = ContextIsolated
	}
	if t.Status == "" {
		t.Status = TaskActive
	}
	switch {
	case t.Chat == "":
		return fmt.Errorf("%w: task has no chat", ErrInvalid)
	case strings.TrimSpace(t.Prompt) == "":
		return fmt.Errorf("%w: task prompt is empty", ErrInvalid)
	case !t.Kind.Valid():
		return fmt.Errorf("%w: schedule kind must be cron, interval or once, not %q", ErrInvalid, t.Kind)
	case strings.TrimSpace(t.Value) == "":
		return fmt.Errorf("%w: schedule value is empty", ErrInvalid)
	case !t.ContextMode.valid():
		return fmt.Errorf("%w: context mode must be group or isolated, not %q", ErrInvalid, t.ContextMode)
	case !t.Status.valid():
		return fmt.Errorf("%w: unknown task status %q", ErrInvalid, t.Status)
	}
	return nil
}

// Create stores t with a new id and returns it as stored. ContextMode
// defaults to isolated and Status to active. The schedule value is not
// parsed here: callers check it with the schedule package and compute NextRun.
func (q *TaskTx) Create(ctx context.Context, t Task) (Task, error) {
	if err := t.check(); err != nil {
		return Task{}, fmt.Errorf("create task: %w", err)
	}
	t.CreatedAt = fromMS(toMS(q.tx.now()))
	for attempt := 0; ; attempt++ {
		t.ID = newTaskID()
		var taken bool
		// A cancelled task's runs keep its id.
		if err := q.tx.stx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE id = ?) OR EXISTS (SELECT 1 FROM task_runs WHERE task_id = ?)`,
			t.ID, t.ID).Scan(&taken); err != nil {
			return Task{}, fmt.Errorf("create task: %w", err)
		}
		if !taken {
			break
		}
		if attempt == 5 {
			return Task{}, fmt.Errorf("create task: no free id after %d attempts", attempt+1)
		}
	}
	if err := q.insert(ctx, t); err != nil {
		return Task{}, fmt.Errorf("create task: %w", err)
	}
	return t, nil
}

// insert writes t, id and all, as a new row.
func (q *TaskTx) insert(ctx context.Context, t Task) error {
	_, err := q.tx.stx.ExecContext(ctx, `INSERT INTO tasks (`+taskColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Folder, t.Chat, t.Prompt, t.Kind, t.Value, t.ContextMode, t.Status,
		nullMS(t.NextRun), nullMS(t.LastRun), t.LastResult, toMS(t.CreatedAt), t.Failures, boolInt(t.PausedByFailures), t.PromptBy)
	return err
}

// Create stores a new task (see TaskTx.Create).
func (q *TaskQuery) Create(ctx context.Context, t Task) (Task, error) {
	return txValue(ctx, q.db, func(tx *Tx) (Task, error) { return tx.Tasks.Create(ctx, t) })
}

// Get returns the task id, or ErrNotFound.
func (q *TaskQuery) Get(ctx context.Context, id TaskID) (Task, error) {
	return getTask(ctx, q.db.read, id)
}

// Get returns the task id, or ErrNotFound.
func (q *TaskTx) Get(ctx context.Context, id TaskID) (Task, error) {
	return getTask(ctx, q.tx.stx, id)
}

func getTask(ctx context.Context, q querier, id TaskID) (Task, error) {
	t, err := scanTask(q.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, fmt.Errorf("get task %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Task{}, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, nil
}

// List returns folder's tasks (every task when folder is empty), oldest
// first.
func (q *TaskQuery) List(ctx context.Context, folder Folder) ([]Task, error) {
	rows, err := q.db.read.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE ? = '' OR folder = ? ORDER BY created_at, id`, folder, folder)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	out, err := collect(rows, scanTask)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}

// Update replaces the prompt, schedule (kind, value), context mode,
// status, next run, failure count, PausedByFailures (kept only while
// paused) and PromptBy of the task t.ID. To change one field atomically, read and write
// inside DB.Tx. ErrNotFound if the task does not exist.
func (q *TaskTx) Update(ctx context.Context, t Task) error {
	if err := t.check(); err != nil {
		return fmt.Errorf("update task %s: %w", t.ID, err)
	}
	res, err := q.tx.stx.ExecContext(ctx, `UPDATE tasks SET prompt = ?, kind = ?, value = ?, context_mode = ?, status = ?, next_run = ?,
		failures = ?, paused_by_failures = ?, prompt_by = ? WHERE id = ?`,
		t.Prompt, t.Kind, t.Value, t.ContextMode, t.Status, nullMS(t.NextRun), max(t.Failures, 0), boolInt(t.PausedByFailures && t.Status == TaskPaused),
		t.PromptBy, t.ID)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("update task %s: %w", t.ID, err)
	}
	return nil
}

// Update replaces a task's settings (see TaskTx.Update).
func (q *TaskQuery) Update(ctx context.Context, t Task) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Tasks.Update(ctx, t) })
}

// SetStatus sets the task's status. ErrNotFound if it does not exist.
func (q *TaskTx) SetStatus(ctx context.Context, id TaskID, status TaskStatus) error {
	if !status.valid() {
		return fmt.Errorf("set status of task %s: %w: unknown task status %q", id, ErrInvalid, status)
	}
	res, err := q.tx.stx.ExecContext(ctx, `UPDATE tasks SET status = ? WHERE id = ?`, status, id)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("set status of task %s: %w", id, err)
	}
	return nil
}

// SetStatus sets a task's status (see TaskTx.SetStatus).
func (q *TaskQuery) SetStatus(ctx context.Context, id TaskID, status TaskStatus) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Tasks.SetStatus(ctx, id, status) })
}

// Pause pauses the task; a non-empty reason becomes its last result, so
// a person sees why. ErrNotFound if it does not exist.
func (q *TaskTx) Pause(ctx context.Context, id TaskID, reason string) error {
	res, err := q.tx.stx.ExecContext(ctx, `UPDATE tasks SET status = 'paused',
		last_result = CASE WHEN ? != '' THEN ? ELSE last_result END WHERE id = ?`, reason, reason, id)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("pause task %s: %w", id, err)
	}
	return nil
}

// Pause pauses a task (see TaskTx.Pause).
func (q *TaskQuery) Pause(ctx context.Context, id TaskID, reason string) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Tasks.Pause(ctx, id, reason) })
}

// runCancelled is the error of a run in flight when its task was cancelled.
const runCancelled = "cancelled: the task was cancelled during the run"

// Delete cancels a task: it is deleted and its run log kept (pruned
// with the retention, as every finished run). A run in flight becomes an
// error run saying it was cancelled, from its start; when it finishes, its
// Tasks.FinishRun reports ErrNotFound and records nothing. ErrNotFound if the
// task does not exist.
func (q *TaskTx) Delete(ctx context.Context, id TaskID) error {
	res, err := q.tx.stx.ExecContext(ctx, `DELETE FROM tasks WHERE id = ?`, id)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("delete task %s: %w", id, err)
	}
	if _, err := q.tx.stx.ExecContext(ctx, `UPDATE task_runs SET status = 'error', error = ?,
		duration_ms = MAX(? - started_at, 0) WHERE task_id = ? AND status = 'running'`, runCancelled, toMS(q.tx.now()), id); err != nil {
		return fmt.Errorf("delete task %s: %w", id, err)
	}
	return nil
}

// Delete cancels a task (see TaskTx.Delete).
func (q *TaskQuery) Delete(ctx context.Context, id TaskID) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Tasks.Delete(ctx, id) })
}

// CountLive returns how many of folder's tasks are not done: active,
// running or paused (the ones a per-group cap counts).
func (q *TaskTx) CountLive(ctx context.Context, folder Folder) (int, error) {
	var n int
	if err := q.tx.stx.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks WHERE folder = ? AND status != 'done'`, folder).Scan(&n); err != nil {
		return 0, fmt.Errorf("count tasks of %s: %w", folder, err)
	}
	return n, nil
}

// Tasks.NextDue returns the earliest next run of the active tasks, nil if none
// has one.
func (q *TaskQuery) NextDue(ctx context.Context) (*time.Time, error) {
	var next sql.NullInt64
	if err := q.db.read.QueryRowContext(ctx, `SELECT MIN(next_run) FROM tasks WHERE status = 'active' AND next_run IS NOT NULL`).Scan(&next); err != nil {
		return nil, fmt.Errorf("next due task: %w", err)
	}
	return fromNullMS(next), nil
}

// Claim is what Tasks.ClaimDue's decide function says about one due task.
type Claim struct {
	// Next is the task's following run; nil means none (always for once
	// tasks): the task becomes running.
	Next *time.Time
	// Pause, when not empty, pauses the task instead of running it, with
	// Pause as its last result; its next run is left as it was.
	Pause string
	// Skip, when not empty, says why the run now due is skipped: the task's
	// next run becomes Next, nothing is recorded in its run log, and it is
	// not returned. A Skip without a Next is ignored (the task runs), so a
	// skipped task is never left due.
	Skip string
}

// runInterrupted is the error of a run a stopped daemon left in flight.
const runInterrupted = "interrupted: bridged stopped during the run"

// Tasks.ClaimDue claims every active task whose next run is at or before now,
// earliest first, in one IMMEDIATE transaction, so that no task is claimed
// twice, not even by another process. For each due task (as stored, NextRun
// being the run now due) decide says what happens: the task's next run
// becomes Claim.Next (nil: none, and the task becomes running), or the task
// is paused with the reason Claim.Pause. Each claimed run is recorded at once
// in the run log as a 'running' row, which Tasks.FinishRun completes, so a run
// a stopped daemon left in flight is found at the next start
// (Tasks.FailInterrupted); a task whose earlier run is still in flight keeps that
// one row. Each due task is handed to decide with RunInFlight set when its
// earlier run is still queued or running, so the caller can skip the slot
// (Claim.Skip) rather than queue the task twice. The tasks to run are
// returned with their new NextRun and Status; paused and skipped ones are
// not.
func (q *TaskQuery) ClaimDue(ctx context.Context, now time.Time, decide func(Task) Claim) ([]Task, error) {
	var claimed []Task
	err := q.db.Tx(ctx, func(tx *Tx) error {
		claimed = nil
		rows, err := tx.stx.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks
			WHERE status = 'active' AND next_run IS NOT NULL AND next_run <= ? ORDER BY next_run, id`, toMS(now))
		if err != nil {
			return fmt.Errorf("claim due tasks: %w", err)
		}
		due, err := collect(rows, scanTask)
		if err != nil {
			return fmt.Errorf("claim due tasks: %w", err)
		}
		for _, t := range due {
			if err := tx.stx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM task_runs WHERE task_id = ? AND status = 'running')`,
				t.ID).Scan(&t.RunInFlight); err != nil {
				return fmt.Errorf("claim task %s: %w", t.ID, err)
			}
			c := decide(t)
			if c.Pause != "" {
				if err := tx.Tasks.Pause(ctx, t.ID, c.Pause); err != nil {
					return fmt.Errorf("claim due tasks: %w", err)
				}
				continue
			}
			if c.Skip != "" && c.Next != nil {
				if _, err := tx.stx.ExecContext(ctx, `UPDATE tasks SET next_run = ? WHERE id = ?`, toMS(*c.Next), t.ID); err != nil {
					return fmt.Errorf("skip task %s: %w", t.ID, err)
				}
				continue
			}
			if c.Next != nil {
				nt := fromMS(toMS(*c.Next))
				t.NextRun = &nt
			} else {
				t.NextRun = nil
				t.Status = TaskRunning
			}
			if _, err := tx.stx.ExecContext(ctx, `UPDATE tasks SET next_run = ?, status = ? WHERE id = ?`,
				nullMS(t.NextRun), t.Status, t.ID); err != nil {
				return fmt.Errorf("claim task %s: %w", t.ID, err)
			}
			if _, err := tx.stx.ExecContext(ctx, `INSERT INTO task_runs (task_id, started_at, duration_ms, status)
				VALUES (?, ?, 0, 'running') ON CONFLICT (task_id) WHERE status = 'running' DO NOTHING`,
				t.ID, toMS(tx.now())); err != nil {
				return fmt.Errorf("claim task %s: %w", t.ID, err)
			}
			claimed = append(claimed, t)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// FinishRun records a run in the task's log and sets its last run
// (r.StartedAt) and last result (the result, or "error: " and the error). The
// task's run in flight (the 'running' row its claim made) becomes this run;
// without one, a row is added. A running task (no next run) becomes done.
// An ok run sets the task's failure count back to 0; an error run adds one
// (unless r.NotCounted), and pauses the task, PausedByFailures, when the
// count reaches r.PauseAfter (> 0) and the task is still active.
// ErrNotFound if the task was deleted meanwhile; nothing is recorded then.
func (q *TaskTx) FinishRun(ctx context.Context, r TaskRun) error {
	if r.Status != RunOK && r.Status != RunError {
		return fmt.Errorf("finish run of task %s: %w: run status must be ok or error, not %q", r.TaskID, ErrInvalid, r.Status)
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = q.tx.now()
	}
	last := r.Result
	if r.Status == RunError {
		last = "error: " + r.Error
	}
	counted := r.Status == RunError && !r.NotCounted
	res, err := q.tx.stx.ExecContext(ctx, `UPDATE tasks SET last_run = ?, last_result = ?,
		status = CASE WHEN status = 'running' THEN 'done' ELSE status END,
		failures = CASE WHEN ? THEN 0 WHEN ? THEN failures + 1 ELSE failures END WHERE id = ?`,
		toMS(r.StartedAt), last, boolInt(r.Status == RunOK), boolInt(counted), r.TaskID)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("finish run of task %s: %w", r.TaskID, err)
	}
	if counted && r.PauseAfter > 0 {
		if _, err := q.tx.stx.ExecContext(ctx, `UPDATE tasks SET status = 'paused', paused_by_failures = 1
			WHERE id = ? AND status = 'active' AND failures >= ?`, r.TaskID, r.PauseAfter); err != nil {
			return fmt.Errorf("finish run of task %s: %w", r.TaskID, err)
		}
	}
	res, err = q.tx.stx.ExecContext(ctx, `UPDATE task_runs SET started_at = ?, duration_ms = ?, status = ?, result = ?, error = ?, cost_usd = ?
		WHERE task_id = ? AND status = 'running'`,
		toMS(r.StartedAt), r.Duration.Milliseconds(), r.Status, r.Result, r.Error, r.CostUSD, r.TaskID)
	if err != nil {
		return fmt.Errorf("finish run of task %s: %w", r.TaskID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("finish run of task %s: %w", r.TaskID, err)
	} else if n > 0 {
		return nil
	}
	if _, err := q.tx.stx.ExecContext(ctx, `INSERT INTO task_runs (task_id, started_at, duration_ms, status, result, error, cost_usd)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, r.TaskID, toMS(r.StartedAt), r.Duration.Milliseconds(), r.Status, r.Result, r.Error, r.CostUSD); err != nil {
		return fmt.Errorf("finish run of task %s: %w", r.TaskID, err)
	}
	return nil
}

// FinishRun records a finished run (see TaskTx.FinishRun).
func (q *TaskQuery) FinishRun(ctx context.Context, r TaskRun) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Tasks.FinishRun(ctx, r) })
}

// Tasks.FailInterrupted closes the runs a stopped daemon left in flight: every
// 'running' row of the run log (a claimed run of any task, recurring or once)
// becomes an error run "interrupted: bridged stopped during the run", keeping
// its start, and every running once task becomes done (a claimed run never
// runs twice). notice, when not nil, is called with each such task as it was
// before (its LastResult still the previous run's); a non-empty text it
// returns is committed to the outbox for the task's chat, as a notice, in
// the same transaction, so the chat hears about it exactly once. Call it
// once at start, before the scheduler claims anything. It returns the tasks
// it closed runs of.
func (q *TaskQuery) FailInterrupted(ctx context.Context, notice func(Task) string) ([]Task, error) {
	return txValue(ctx, q.db, func(tx *Tx) ([]Task, error) {
		// A running once task without a 'running' row was claimed by a
		// bridged from before the run log showed claims.
		rows, err := tx.stx.QueryContext(ctx, `SELECT task_id, started_at FROM task_runs WHERE status = 'running'
			UNION ALL
			SELECT id, NULL FROM tasks t WHERE status = 'running'
				AND NOT EXISTS (SELECT 1 FROM task_runs r WHERE r.task_id = t.id AND r.status = 'running')
			ORDER BY 1`)
		if err != nil {
			return nil, fmt.Errorf("fail interrupted tasks: %w", err)
		}
		type open struct {
			id      TaskID
			started sql.NullInt64
		}
		runs, err := collect(rows, func(r rowScanner) (o open, err error) { return o, r.Scan(&o.id, &o.started) })
		if err != nil {
			return nil, fmt.Errorf("fail interrupted tasks: %w", err)
		}
		out := make([]Task, 0, len(runs))
		for _, o := range runs {
			t, err := tx.Tasks.Get(ctx, o.id)
			if err != nil {
				return nil, fmt.Errorf("fail interrupted tasks: %w", err)
			}
			started := tx.now()
			if o.started.Valid {
				started = fromMS(o.started.Int64)
			}
			if err := tx.Tasks.FinishRun(ctx, TaskRun{TaskID: t.ID, StartedAt: started, Status: RunError, Error: runInterrupted, NotCounted: true}); err != nil {
				return nil, err
			}
			if notice != nil && t.Chat != "" {
				if text := notice(t); strings.TrimSpace(text) != "" {
					if _, err := tx.Outbox.Enqueue(ctx, OutboxItem{Chat: t.Chat, Group: t.Folder, Text: text, Origin: OriginNotice}); err != nil {
						return nil, fmt.Errorf("fail interrupted task %s: %w", t.ID, err)
					}
				}
			}
			out = append(out, t)
		}
		return out, nil
	})
}

// Runs returns up to limit runs of the task, newest first. A limit
// of 0 or less means no limit.
func (q *TaskQuery) Runs(ctx context.Context, id TaskID, limit int) ([]TaskRun, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := q.db.read.QueryContext(ctx, `SELECT id, task_id, started_at, duration_ms, status, result, error, cost_usd
		FROM task_runs WHERE task_id = ? ORDER BY id DESC LIMIT ?`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("list runs of task %s: %w", id, err)
	}
	out, err := collect(rows, scanTaskRun)
	if err != nil {
		return nil, fmt.Errorf("list runs of task %s: %w", id, err)
	}
	return out, nil
}

func scanTaskRun(row rowScanner) (TaskRun, error) {
	var r TaskRun
	var started, dur int64
	err := row.Scan(&r.ID, &r.TaskID, &started, &dur, &r.Status, &r.Result, &r.Error, &r.CostUSD)
	r.StartedAt = fromMS(started)
	r.Duration = time.Duration(dur) * time.Millisecond
	return r, err
}
