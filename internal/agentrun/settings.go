package agentrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// Settings is what a container takes from its group's settings when it
// starts, and keeps for its life: the tool profile (the CLI's flags and the
// runner's judging), the model, the extra mounts, the container timeout,
// whether the group is the main one and which other groups' folders it
// sees (its mounts). A run records them at
// its start; a change to any of them reaches the agent only through a new
// container (Runner.Apply). The rest of a group's settings are read live
// by the daemon on each message or request (the trigger, who may wake the
// agent and what becomes of others' messages, at a message's arrival; the
// daily budget, at each API request and each notice), so a change to them
// needs no new container.
type Settings struct {
	Tools   store.ToolProfile
	Model   string
	Timeout time.Duration
	IsMain  bool
	// Mounts are the extra mounts as asked for, in order, one string.
	Mounts string
	// Sees is which other groups' folders the main group's agent sees
	// (store.Sees.String): each is a mount of its own.
	Sees string
}

// SettingsOf returns the settings a container of g starts with.
func SettingsOf(g store.Group) Settings {
	tools := g.Tools
	if tools == "" {
		tools = store.ToolsFull
	}
	var m strings.Builder
	for _, r := range g.ContainerConfig.ExtraMounts {
		fmt.Fprintf(&m, "%q %q %t;", r.HostPath, r.ContainerPath, r.ReadWrite)
	}
	return Settings{Tools: tools, Model: g.ContainerConfig.Model, Timeout: g.ContainerConfig.Timeout, IsMain: g.IsMain, Mounts: m.String(), Sees: g.Sees.String()}
}

// Applied is how a change of a group's settings reaches its agent.
type Applied int

const (
	// AppliesNext: no container runs with other settings; the change
	// applies from the group's next message.
	AppliesNext Applied = iota
	// AppliedStopped: the group's container was idle and is closed now;
	// the next message starts one with the new settings.
	AppliedStopped
	// AppliesAtTurnEnd: the group's container is working on a turn; it is
	// closed when the turn ends, and nothing more is piped into it.
	AppliesAtTurnEnd
)

// String is what the owner is told (`bridged groups set`, the control
// API's "applies").
func (a Applied) String() string {
	switch a {
	case AppliedStopped:
		return "applied: the running agent was stopped"
	case AppliesAtTurnEnd:
		return "applies when the current turn ends"
	}
	return "applies from the next message"
}

// Apply brings g's current settings to its live run in grp: when the run
// was started with other Settings, it takes no more messages (Stale) and
// its container is closed at once if the agent is idle, or when its turn
// in flight ends. It does not wait for the container to go. The lock must
// be held.
func (x *Runner) Apply(grp *Group, g store.Group) Applied {
	run := grp.run
	if run == nil || (!run.stale && run.settings == SettingsOf(g)) {
		return AppliesNext
	}
	applied := x.retire(run, g.Folder)
	if applied == AppliesAtTurnEnd {
		x.Log.Info().Str("group", string(g.Folder)).Msg("group settings changed; its container closes when the turn ends")
	} else {
		x.Log.Info().Str("group", string(g.Folder)).Msg("group settings changed; its idle container is closed")
	}
	return applied
}

// Retire ends the live run in grp for good, as for a group that was
// removed: it takes no more messages and its container is closed at once
// if the agent is idle, or when its turn in flight ends. It does not wait
// for the container to go. The lock must be held.
func (x *Runner) Retire(grp *Group, folder store.Folder) Applied {
	run := grp.run
	if run == nil {
		return AppliesNext
	}
	applied := x.retire(run, folder)
	x.Log.Info().Str("group", string(folder)).Str("applies", applied.String()).Msg("group removed; its container closes")
	return applied
}

// retire has run take no more messages and closes its container: at once
// when the agent is idle, else when its turn in flight ends. The group's
// lock must be held.
func (x *Runner) retire(run *Run, folder store.Folder) Applied {
	run.stale = true
	if !run.waiting {
		return AppliesAtTurnEnd
	}
	x.closeRun(run, folder)
	return AppliedStopped
}

// Stale reports whether r may not take g's messages: g's settings are not
// those r was started with (or a change of them was applied to r), so they
// wait for the next container. The group's lock must be held.
func (r *Run) Stale(g store.Group) bool {
	return r.stale || r.settings != SettingsOf(g)
}

// ApplySettings brings folder's settings as stored now to its running
// agent (Apply): a container started with other settings
// is closed at once when idle, or when its turn in flight ends, and takes
// no more messages meanwhile. A removed group's container is closed the
// same way (Retire). It says which; a group with no
// container gets AppliesNext. It does not wait for the container
// to go.
func (x *Runner) ApplySettings(ctx context.Context, folder store.Folder) (Applied, error) {
	g, err := x.Store.Groups.ByFolder(ctx, folder)
	if errors.Is(err, store.ErrNotFound) {
		gs := x.Known(folder)
		if gs == nil {
			return AppliesNext, nil
		}
		gs.Lock()
		defer gs.Unlock()
		return x.Retire(gs, folder), nil
	}
	if err != nil {
		return AppliesNext, err
	}
	gs := x.Known(folder)
	if gs == nil {
		return AppliesNext, nil
	}
	gs.Lock()
	defer gs.Unlock()
	return x.Apply(gs, g), nil
}
