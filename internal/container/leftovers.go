package container

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// leftoverGrace is how long a previous instance's container gets.
const leftoverGrace = 5 * time.Second

// StopLeftovers stops and removes every managed container of the home
// homeDir (containers of other homes on the same engine belong to other
// daemons) that an instance other than instance started, and waits until
// they are gone. Failures are logged. It reports whether no group can have
// a container left that its next run would have to stop: the list worked,
// every leftover was stopped and none carrying instance was seen (see
// Leftovers.Swept).
func StopLeftovers(ctx context.Context, rt Runtime, homeDir, instance string, log zerolog.Logger) bool {
	infos, err := rt.ListManaged(ctx)
	if err != nil {
		log.Error().Err(err).Msg("cannot list leftover containers")
		return false
	}
	var failed atomic.Bool
	label := HomeLabel(homeDir)
	var wg sync.WaitGroup
	for _, info := range infos {
		if info.Instance == instance {
			// One the group's next run would find (it looks by group
			// and instance, whatever the home): the sweep does not vouch
			// for its group.
			failed.Store(true)
		}
		if info.Home != label || (instance != "" && info.Instance == instance) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rt.Stop(ctx, info.ID, leftoverGrace); err != nil {
				log.Error().Err(err).Str("container", info.Name).Str("group", info.Group).Msg("cannot stop leftover container")
				failed.Store(true)
				return
			}
			log.Info().Str("container", info.Name).Str("group", info.Group).Str("instance", info.Instance).
				Msg("stopped a previous bridged's leftover container")
		}()
	}
	wg.Wait()
	return !failed.Load()
}
