package container

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// listRuntime lists fixed containers and records the stops.
type listRuntime struct {
	infos   []Info
	listErr error
	failID  string
	mu      sync.Mutex
	stopped []string
}

func (r *listRuntime) Start(ctx context.Context, spec Spec) (Run, error) {
	return nil, errors.New("not in this test")
}

func (r *listRuntime) Stop(ctx context.Context, id string, grace time.Duration) error {
	if id == r.failID {
		return errors.New("engine says no")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = append(r.stopped, id)
	return nil
}

func (r *listRuntime) ListManaged(ctx context.Context) ([]Info, error) { return r.infos, r.listErr }

// Only this home's containers of other instances are stopped.
func TestStopLeftovers(t *testing.T) {
	mine, theirs := HomeLabel("/srv/bridged"), HomeLabel("/srv/other")
	rt := &listRuntime{
		infos: []Info{
			{ID: "old-1", Home: mine, Instance: "old"},
			{ID: "old-2", Home: mine, Instance: "older"},
			{ID: "stuck", Home: mine, Instance: "old"},
			{ID: "current", Home: mine, Instance: "now"},
			{ID: "other-home", Home: theirs, Instance: "old"},
		},
		failID: "stuck",
	}
	StopLeftovers(context.Background(), rt, "/srv/bridged/", "now", zerolog.Nop())
	slices.Sort(rt.stopped)
	if want := []string{"old-1", "old-2"}; !slices.Equal(rt.stopped, want) {
		t.Fatalf("stopped %q; want %q (not the current instance's, not another home's)", rt.stopped, want)
	}

	rt.stopped = nil
	StopLeftovers(context.Background(), rt, "/srv/bridged", "", zerolog.Nop())
	slices.Sort(rt.stopped)
	if want := []string{"current", "old-1", "old-2"}; !slices.Equal(rt.stopped, want) {
		t.Fatalf("with no instance: stopped %q; want every container of the home", rt.stopped)
	}

	rt.stopped, rt.listErr = nil, errors.New("engine down")
	StopLeftovers(context.Background(), rt, "/srv/bridged", "now", zerolog.Nop())
	if len(rt.stopped) != 0 {
		t.Fatalf("stopped %q after a failed list", rt.stopped)
	}
}
