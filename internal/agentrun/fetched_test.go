package agentrun

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/snapshot"
	"github.com/bridged-app/bridged/internal/store"
)

// fakeSnapshots records how turns ended.
type fakeSnapshots struct{ ends []snapshot.Finish }

func (f *fakeSnapshots) Begin(context.Context, snapshot.Start) (store.ChangeID, error) { return 1, nil }
func (f *fakeSnapshots) End(_ context.Context, fin snapshot.Finish) error {
	f.ends = append(f.ends, fin)
	return nil
}

// The pages the agent fetched and the searches it ran during a turn mark
// what the turn changed, once, at its end; in `ask` its memory change is
// then held. The next turn starts unmarked.
func TestFetchedPagesMarkTheTurnsEnd(t *testing.T) {
	x, db := newRunner(t)
	snaps := &fakeSnapshots{}
	x.Snapshots, x.Owner = snaps, &owner{}
	grp, run := beginFam(t, x, db, 1)
	tr := &turn{x: x, log: zerolog.Nop(), g: store.Group{Folder: "fam", Chat: "local:fam", Tools: store.ToolsAsk}, grp: grp, run: run, origin: store.OriginTask}
	ctx := context.Background()
	for _, ev := range []ipc.Event{
		{Type: ipc.EventFetched, Tool: "WebFetch", What: "https://evil.example/rules"},
		{Type: ipc.EventFetched, Tool: "WebFetch", What: "https://evil.example/rules"},
		{Type: ipc.EventFetched, Tool: "WebSearch", What: "dog names"},
		{Type: ipc.EventResult, Text: "done"},
		{Type: ipc.EventResult, Text: "again"},
	} {
		tr.event(ctx, ev)
	}
	want := snapshot.Finish{Folder: "fam", Source: `a fetched page https://evil.example/rules, a web search "dog names"`, Hold: true}
	if len(snaps.ends) != 2 || snaps.ends[0] != want || snaps.ends[1] != (snapshot.Finish{Folder: "fam"}) {
		t.Fatalf("ends = %+v; want %+v, then an unmarked one", snaps.ends, want)
	}
}
