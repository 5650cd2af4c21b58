package agentrun

import (
	"errors"
	"fmt"

	"github.com/bridged-app/bridged/internal/store"
)

// RunError is how a group's message run failed: the group's folder and the
// cause. Its text is "run messages of <folder>: <cause>"; Reason is what
// the chat, the turn's end and status are told. Find it with errors.As (or
// Reason), through any wrapping.
type RunError struct {
	Folder store.Folder
	Err    error // the cause; never nil
}

// NewRunError returns the RunError of folder's run failed with err.
func NewRunError(folder store.Folder, err error) *RunError {
	return &RunError{Folder: folder, Err: err}
}

func (e *RunError) Error() string { return fmt.Sprintf("run messages of %s: %v", e.Folder, e.Err) }

func (e *RunError) Unwrap() error { return e.Err }

// Reason is the failure as a user is told it: the cause, without the
// folder the chat already knows.
func (e *RunError) Reason() string { return e.Err.Error() }

// Reason returns the user-facing reason of err: the Reason of the RunError
// it wraps, or else its whole text ("" for nil).
func Reason(err error) string {
	if err == nil {
		return ""
	}
	if re := (*RunError)(nil); errors.As(err, &re) {
		return re.Reason()
	}
	return err.Error()
}
