package store

import (
	"database/sql"
	"errors"
	"time"
)

// ChatID is a channel's chat id: a WhatsApp JID or "local:<name>".
type ChatID string

// Folder is a registered group's folder name (see ValidateFolder).
type Folder string

// TaskID identifies a scheduled task ("task-…").
type TaskID string

// MessageID is a stored message's id. Ids grow in arrival order; a group's
// cursor is one of them.
type MessageID int64

// OutboxID is an outbox row's id.
type OutboxID int64

// OutboxState is where an outbox row is in its life.
type OutboxState string

// Outbox states.
const (
	OutboxPending OutboxState = "pending"
	OutboxSent    OutboxState = "sent"
	OutboxFailed  OutboxState = "failed"
)

// Origin says why bridged sends a message.
type Origin string

// Origins.
const (
	OriginReply  Origin = "reply"  // an agent's answer
	OriginTool   Origin = "tool"   // the send_message tool
	OriginTask   Origin = "task"   // a scheduled task's output
	OriginNotice Origin = "notice" // bridged itself (failures, status)
)

func (o Origin) valid() bool {
	switch o {
	case OriginReply, OriginTool, OriginTask, OriginNotice:
		return true
	}
	return false
}

// TaskStatus is a task's state.
type TaskStatus string

// TaskKind is how a task repeats, as stored. The store checks only that it is
// one of the three; the schedule package parses the value that goes with it,
// so the store imports nothing of bridged's own.
type TaskKind string

// Task kinds; they are the schedule package's kinds, spelled the same.
const (
	TaskCron     TaskKind = "cron"
	TaskInterval TaskKind = "interval"
	TaskOnce     TaskKind = "once"
)

// Valid reports whether k is one of the task kinds.
func (k TaskKind) Valid() bool {
	return k == TaskCron || k == TaskInterval || k == TaskOnce
}

// Task states.
const (
	TaskActive TaskStatus = "active"
	TaskPaused TaskStatus = "paused"
	// TaskRunning is a claimed task that has no next run (a once task in
	// flight); Tasks.FinishRun makes it TaskDone.
	TaskRunning TaskStatus = "running"
	TaskDone    TaskStatus = "done"
)

func (s TaskStatus) valid() bool {
	switch s {
	case TaskActive, TaskPaused, TaskRunning, TaskDone:
		return true
	}
	return false
}

// ContextMode says whether a task resumes its group's session.
type ContextMode string

// Context modes.
const (
	ContextGroup    ContextMode = "group"    // resume the group's session
	ContextIsolated ContextMode = "isolated" // start a fresh session
)

func (m ContextMode) valid() bool {
	return m == ContextGroup || m == ContextIsolated
}

// RunStatus is how a task run ended.
type RunStatus string

// Run statuses.
const (
	RunOK    RunStatus = "ok"
	RunError RunStatus = "error"
	// RunRunning is a claimed run not finished yet (see Tasks.ClaimDue).
	RunRunning RunStatus = "running"
)

// Error classes, checked with errors.Is.
var (
	ErrNotFound      = errors.New("not found")
	ErrExists        = errors.New("already exists")
	ErrMainExists    = errors.New("a main group already exists")
	ErrInvalidFolder = errors.New("invalid group folder")
	ErrInvalid       = errors.New("invalid value")
	ErrSchemaTooNew  = errors.New("database schema is newer than this bridged")
)

// toMS converts t to unix milliseconds.
func toMS(t time.Time) int64 { return t.UnixMilli() }

// fromMS converts unix milliseconds to a UTC time.
func fromMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// nullMS converts an optional time to a nullable column value.
func nullMS(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// fromNullMS converts a nullable column value to an optional time.
func fromNullMS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMS(v.Int64)
	return &t
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
