package agentrun

import (
	"context"
	"errors"
	"slices"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/snapshot"
	"github.com/bridged-app/bridged/internal/store"
)

// Snapshots records a group's folder and memory as each of its turns
// begins and ends (snapshot.Service implements it). Both block while the
// snapshot is taken; neither takes a group's lock (their own locks are
// leaves). A failure is logged and never fails the turn.
type Snapshots interface {
	Begin(ctx context.Context, st snapshot.Start) (store.ChangeID, error)
	End(ctx context.Context, f snapshot.Finish) error
}

// ErrTurnRunning refuses what must not happen while a group's agent works
// on a turn (an undo of its files).
var ErrTurnRunning = errors.New("its agent is working on a turn; try again once the turn has ended")

// Idle runs fn while no turn of folder's group runs and none can begin:
// the group's lock is held for the whole of fn. It returns ErrTurnRunning
// at once while the group's agent works on a turn (a container starting
// counts); an agent waiting for input does not count.
func (x *Runner) Idle(folder store.Folder, fn func() error) error {
	grp := x.Group(folder)
	grp.Lock()
	defer grp.Unlock()
	if grp.run != nil && !grp.run.waiting {
		return ErrTurnRunning
	}
	return fn()
}

// maxOthers bounds the messages of others a run keeps for the next turn's
// source.
const maxOthers = 20

// noteOthers keeps the messages of msgs not the owner's, and those that
// brought a received file, for the source of the turn they will begin.
// The group's lock must be held.
func (run *Run) noteOthers(msgs []store.Message) {
	for _, m := range msgs {
		if (!m.FromMe && !m.IsBot || snapshot.ReceivedFile(m.Text)) && len(run.others) < maxOthers {
			run.others = append(run.others, m)
		}
	}
}

// snapBegin records g's folder and memory as a turn of run begins. upto is
// the newest message the turn was handed, source who other than the owner
// wrote its messages.
func (x *Runner) snapBegin(ctx context.Context, log zerolog.Logger, g store.Group, run *Run, upto store.MessageID, source string) {
	if x.Snapshots == nil {
		return
	}
	// In `ask`, what a turn that took someone else's messages changes in
	// memory is held for the owner.
	st := snapshot.Start{Folder: g.Folder, Chat: g.Chat, Kind: store.ChangeTurn, Upto: upto, Source: source,
		Hold: g.Tools == store.ToolsAsk && source != ""}
	if run.Task != "" {
		st.Kind, st.Task, st.Upto, st.Source = store.ChangeTask, run.Task, 0, ""
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shortTimeout)
	defer cancel()
	if _, err := x.Snapshots.Begin(wctx, st); err != nil {
		log.Error().Err(err).Msg("cannot record the group's files as the turn begins")
	}
}

// maxFetched bounds the pages and searches a run keeps for its turn's
// source.
const maxFetched = 20

// noteFetched keeps a page the agent fetched (tool WebFetch, what its URL)
// or a search it ran (WebSearch, its query) during the turn, for the
// turn's source. The group's lock must be held.
func (run *Run) noteFetched(tool, what string) {
	list := &run.pages
	if tool == "WebSearch" {
		list = &run.searches
	}
	if len(*list) < maxFetched && !slices.Contains(*list, what) {
		*list = append(*list, what)
	}
}

// snapEnd records g's folder and memory as run's turn ends, marked with
// the pages the agent fetched during it. In `ask` a memory change is then
// held as for another's message: a fetched page is known only now.
func (x *Runner) snapEnd(ctx context.Context, log zerolog.Logger, grp *Group, g store.Group, run *Run) {
	if x.Snapshots == nil {
		return
	}
	grp.Lock()
	source := snapshot.Fetched(run.pages, run.searches)
	run.pages, run.searches = nil, nil
	grp.Unlock()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shortTimeout)
	defer cancel()
	if err := x.Snapshots.End(wctx, snapshot.Finish{Folder: g.Folder, Source: source, Hold: g.Tools == store.ToolsAsk && source != ""}); err != nil {
		log.Error().Err(err).Msg("cannot record the group's files as the turn ends")
	}
}
