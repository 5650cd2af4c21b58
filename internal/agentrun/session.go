package agentrun

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/store"
)

// EndSession ends folder's Claude session, so that the group's next turn
// starts a new one; the group's folder, memory and message history stay.
// A live run of grp finishes its turn in flight in the old session but
// stores no session any more, takes no more messages and is closed like a
// run whose settings changed (at once when idle, else when its turn ends);
// Applied says which. The lock must be held.
func (x *Runner) EndSession(ctx context.Context, grp *Group, folder store.Folder) (Applied, error) {
	grp.sessions++
	applied := AppliesNext
	if run := grp.run; run != nil {
		applied = x.retire(run, folder)
	}
	if err := x.Store.Sessions.Clear(ctx, folder); err != nil {
		return applied, fmt.Errorf("end the session of %s: %w", folder, err)
	}
	x.Log.Info().Str("group", string(folder)).Str("container", applied.String()).Msg("session ended; the next turn starts a new one")
	return applied, nil
}

// resumeSession reads the session run resumes, and notes the group's count
// of ended sessions with it, so that a session the owner ends from now on
// is not stored again by run. The group's lock must be held.
func (x *Runner) resumeSession(ctx context.Context, log zerolog.Logger, grp *Group, run *Run, folder store.Folder) *store.Session {
	s, err := x.Store.Sessions.Get(ctx, folder)
	if err != nil {
		log.Warn().Err(err).Msg("cannot read session; starting a fresh one")
		s = store.Session{}
	}
	s.Folder = folder
	run.sessionGen = grp.sessions
	return &s
}
