package rules

import (
	"errors"
	"fmt"

	"github.com/bridged-app/bridged/internal/store"
)

// ErrLesserProfile is wrapped when one group's agent may not make another
// group's agent run something: a task runs with its own group's profile, so
// only a group whose profile is full may choose what another group runs
// (DESIGN §16: an action one group causes in another runs with the lesser
// of their profiles).
var ErrLesserProfile = errors.New("profile not full")

// lesserError is a refusal that matches ErrLesserProfile; its text is
// written for the agent or owner who reads it.
type lesserError struct{ msg string }

func (e *lesserError) Error() string        { return e.msg }
func (e *lesserError) Is(target error) bool { return target == ErrLesserProfile }

func lesser(format string, args ...any) error {
	return &lesserError{msg: fmt.Sprintf(format, args...)}
}

// full reports whether p is the full profile (empty is full, see
// store.Group.Tools).
func full(p store.ToolProfile) bool { return p == "" || p == store.ToolsFull }

// MayDirect returns nil when the agent of group by may make the agent of
// the group with folder target run something it chose: schedule a task
// there, change such a task's prompt or schedule, resume it. A group may
// always direct itself; another group only when by's profile is full.
// what names the request ("schedule a task", …) for the error, which wraps
// ErrLesserProfile and says that nothing was done.
func MayDirect(by store.Group, target store.Folder, what string) error {
	if target == by.Folder || full(by.Tools) {
		return nil
	}
	return lesser("group %s may not %s for group %s: its tool profile is %s, and a task runs with the profile of "+
		"the group it runs in, so only a group whose profile is full may choose what another group's agent runs; nothing was done",
		by.Folder, what, target, by.Tools)
}

// TaskMayRun returns nil when task t may run now: its prompt was set by the
// owner or by its own group's agent, or by another group's agent whose
// group is still registered (setter, nil when not) and full. So a group
// that loses its full profile cannot run, through the tasks it set while
// full, what its own profile now forbids. The error wraps ErrLesserProfile
// and says what the owner can do.
func TaskMayRun(t store.Task, setter *store.Group) error {
	if t.PromptBy == "" || t.PromptBy == t.Folder {
		return nil
	}
	how := fmt.Sprintf("`bridged tasks cancel %s` removes it; `bridged tasks resume %s` runs it as the owner's own task", t.ID, t.ID)
	switch {
	case setter == nil:
		return lesser("task %s of group %s was set by group %s, which is no longer registered; it was not run and is paused. %s",
			t.ID, t.Folder, t.PromptBy, how)
	case !full(setter.Tools):
		return lesser("task %s of group %s was set by group %s, whose tool profile is now %s, not full; it was not run and is paused. %s",
			t.ID, t.Folder, t.PromptBy, setter.Tools, how)
	}
	return nil
}
