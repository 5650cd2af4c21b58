package agentrun

import (
	"context"
	"time"

	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/snapshot"
	"github.com/bridged-app/bridged/internal/store"
)

// Group returns folder's one Group, making it on first use.
func (x *Runner) Group(folder store.Folder) *Group {
	x.groupsMu.Lock()
	defer x.groupsMu.Unlock()
	grp := x.groups[folder]
	if grp == nil {
		if x.groups == nil {
			x.groups = make(map[store.Folder]*Group)
		}
		grp = &Group{}
		x.groups[folder] = grp
	}
	return grp
}

// Known returns folder's Group, nil when the group never had one (no
// message was handed over, no run started).
func (x *Runner) Known(folder store.Folder) *Group {
	x.groupsMu.Lock()
	defer x.groupsMu.Unlock()
	return x.groups[folder]
}

// Hand gives b, the group's pending messages as the message loop read them,
// to the group's agent: written as an input file into its live message
// container when there is one for b's chat that takes messages (not
// closing, started with b's group's settings), else kept for the next
// container start (replacing any batch kept before), for which the group
// asks the queue for a slot. A live container that cannot take them and
// whose agent waits for input is closed at once, so they need not wait out
// its idle timeout. The lock must be held.
func (x *Runner) Hand(grp *Group, b Batch) {
	g := b.Group
	log := x.Log.With().Str("group", string(g.Folder)).Logger()
	run := grp.run
	if run != nil && run.Kind == groupqueue.KindMessages && run.Chat == g.Chat && !run.closing && !run.Stale(g) {
		text, n := prompt.Fit(x.cfg.Timezone, x.Now(), b.Msgs, b.Omitted, ipc.MaxTextBytes)
		if run.waiting {
			// The messages start a turn: the files as it begins are
			// recorded before the agent can see them.
			x.snapBegin(context.Background(), log, g, run, b.Msgs[len(b.Msgs)-1].ID, snapshot.Sources(b.Msgs))
		} else {
			run.noteOthers(b.Msgs)
		}
		name, err := x.Home.WriteInput(string(g.Folder), text)
		if err == nil {
			x.noteLeftOut(grp, g, b.Msgs[len(b.Msgs)-n].ID, len(b.Msgs)-n+b.Omitted)
			grp.batch = nil
			grp.pipe(name, b.Msgs[len(b.Msgs)-1].ID)
			x.publish(g.Folder, run)
			log.Debug().Int("messages", len(b.Msgs)).Msg("messages piped into the live container")
			x.Owner.SetTyping(g.Chat, true)
			return
		}
		log.Error().Err(err).Msg("cannot pipe messages into the container")
	}
	grp.Offer(b)
	if run != nil && run.waiting && !run.closing {
		x.closeRun(run, g.Folder)
	}
	x.Queue.EnqueueMessages(string(g.Folder))
}

// RunMessages is the queue's RunMessages handler: one container for the
// pending messages of slot's group, which the run object hands over (the
// batch the message loop kept for it, or, when there is none or it is out
// of date, the owner's fresh read: Owner.Batch), and which it follows until
// the container is gone (Messages). It returns nil at once when no message
// would wake the agent.
func (x *Runner) RunMessages(ctx context.Context, slot Slot) error {
	folder := store.Folder(slot.Group())
	grp := x.Group(folder)
	run, g, text, err := x.begin(ctx, grp, folder, slot)
	if err != nil {
		return NewRunError(folder, err)
	}
	if run == nil {
		return nil
	}
	return x.Messages(ctx, g, grp, run, text)
}

// begin takes the group's pending messages for a new container and makes
// the run that is handed them the group's live run.
func (x *Runner) begin(ctx context.Context, grp *Group, folder store.Folder, slot Slot) (*Run, store.Group, string, error) {
	grp.Lock()
	defer grp.Unlock()
	slot.Begin()
	if err := grp.Load(ctx, x.Store, folder); err != nil {
		return nil, store.Group{}, "", err
	}
	b, ok := grp.Take()
	if !ok || b.Version != x.Store.Groups.Version() {
		var err error
		if b, ok, err = x.Owner.Batch(ctx, grp, folder); err != nil || !ok {
			return nil, store.Group{}, "", err
		}
	}
	g, msgs := b.Group, b.Msgs
	text, n := prompt.Fit(x.cfg.Timezone, x.Now(), msgs, b.Omitted, ipc.MaxTextBytes)
	x.noteLeftOut(grp, g, msgs[len(msgs)-n].ID, len(msgs)-n+b.Omitted)
	run := x.BeginMessages(grp, slot, g, msgs[len(msgs)-1].ID)
	run.source = snapshot.Sources(msgs)
	x.Log.Info().Str("group", string(g.Folder)).Int("messages", n).Int("left_out", len(msgs)-n+b.Omitted).Msg("starting agent for messages")
	return run, g, text, nil
}

// noteLeftOut tells g's chat, once per prompt start, that left older
// messages were left out of the prompt whose first message is first. The
// lock must be held.
func (x *Runner) noteLeftOut(grp *Group, g store.Group, first store.MessageID, left int) {
	if left <= 0 || first <= grp.leftOutFrom {
		return
	}
	grp.leftOutFrom = first
	x.Log.Info().Str("group", string(g.Folder)).Int("left_out", left).Msg("older messages left out of the prompt; telling the chat")
	x.Owner.Notice(g.Chat, g.Folder, prompt.LeftOutNotice(left))
}

// CloseIdle is the queue's CloseIdle handler: the queue wants group name's
// slot back. Its container is closed when its agent still waits for input;
// a run that took input since (or is closing already) keeps going. It takes
// the group's lock.
func (x *Runner) CloseIdle(name string) {
	grp := x.Known(store.Folder(name))
	if grp == nil {
		return
	}
	grp.Lock()
	defer grp.Unlock()
	if run := grp.run; run != nil && run.waiting && !run.closing {
		x.closeRun(run, store.Folder(name))
	}
}

// closeRun has run take no more messages and writes its close sentinel:
// the runner exits once its turn is done. The lock must be held.
func (x *Runner) closeRun(run *Run, folder store.Folder) {
	if run.closing {
		return
	}
	run.closing = true
	run.stopTimer()
	run.q.MarkClosing()
	x.writeClose(string(folder))
}

// gone records that run's container is going away on its own (stopped by
// a timeout or at shutdown, or it ended): it takes no more messages. The
// lock must be held.
func (x *Runner) gone(run *Run) {
	run.stopTimer()
	if !run.closing {
		run.closing = true
		run.q.MarkClosing()
	}
}

// turnDone records that run's agent finished a turn and waits for input,
// and decides what becomes of the container: closed now when its group's
// settings changed during the turn (stale) or the queue wants the slot
// back; otherwise closed after the idle timeout (a message run, counted
// from each result) or the task close delay (a task run, from its first).
// The lock must be held.
func (x *Runner) turnDone(grp *Group, run *Run, folder store.Folder) {
	run.waiting = true
	run.results++
	x.publish(folder, run)
	wasClosing := run.closing
	back := run.q.MarkIdle()
	switch {
	case wasClosing:
	case run.stale:
		x.Log.Info().Str("group", string(folder)).Msg("the turn ended; closing the container for the group's new settings")
		x.closeRun(run, folder)
	case back:
		x.closeRun(run, folder)
	case run.Kind == groupqueue.KindMessages:
		x.arm(grp, run, folder, x.cfg.IdleTimeout)
	case run.results == 1:
		x.arm(grp, run, folder, x.cfg.TaskCloseDelay)
	}
}

// arm (re)starts run's close timer. The lock must be held.
func (x *Runner) arm(grp *Group, run *Run, folder store.Folder, d time.Duration) {
	if d <= 0 {
		return
	}
	run.stopTimer()
	gen := run.timerGen
	run.timer = time.AfterFunc(d, func() {
		grp.Lock()
		defer grp.Unlock()
		if grp.run != run || run.timerGen != gen || !run.waiting || run.closing {
			return
		}
		run.timer = nil
		x.Log.Debug().Str("group", string(folder)).Msg("closing container after idle period")
		x.closeRun(run, folder)
	})
}

// HoldApproval holds the turn in flight of folder's agent open while one
// of its tool calls waits for the owner's approval (Group.Hold); a group
// without a live run has nothing to hold, and release then does nothing.
// It takes the group's lock.
func (x *Runner) HoldApproval(folder store.Folder) (release func()) {
	grp := x.Known(folder)
	if grp == nil {
		return func() {}
	}
	grp.Lock()
	defer grp.Unlock()
	release, _ = grp.Hold()
	return release
}

// Busy reports whether folder's agent is working on a turn. It takes the
// group's lock.
func (x *Runner) Busy(folder store.Folder) bool {
	grp := x.Known(folder)
	if grp == nil {
		return false
	}
	grp.Lock()
	defer grp.Unlock()
	return grp.run != nil && !grp.run.waiting
}
