package router

import (
	"context"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/store"
)

// ApplySettings brings folder's settings as stored now to its running
// agent (agentrun.Runner.ApplySettings); it says how they apply.
func (r *Router) ApplySettings(ctx context.Context, folder store.Folder) (agentrun.Applied, error) {
	return r.runs.ApplySettings(ctx, folder)
}
