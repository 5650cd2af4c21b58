package router

import (
	"context"
	"errors"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/store"
)

// ApplySettings brings folder's settings as stored now to its running
// agent (agentrun.Runner.Apply): a container started with other settings
// is closed at once when idle, or when its turn in flight ends, and takes
// no more messages meanwhile. A removed group's container is closed the
// same way (agentrun.Runner.Retire). It says which; a group with no
// container gets agentrun.AppliesNext. It does not wait for the container
// to go.
func (r *Router) ApplySettings(ctx context.Context, folder store.Folder) (agentrun.Applied, error) {
	g, err := r.db.GetGroupByFolder(ctx, folder)
	if errors.Is(err, store.ErrNotFound) {
		gs := r.runs.Known(folder)
		if gs == nil {
			return agentrun.AppliesNext, nil
		}
		gs.Lock()
		defer gs.Unlock()
		return r.runs.Retire(gs, folder), nil
	}
	if err != nil {
		return agentrun.AppliesNext, err
	}
	gs := r.runs.Known(folder)
	if gs == nil {
		return agentrun.AppliesNext, nil
	}
	gs.Lock()
	defer gs.Unlock()
	return r.runs.Apply(gs, g), nil
}
