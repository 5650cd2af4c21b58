// Package agentrun owns each group's run: which messages were handed to
// the group's agent and which are committed, the batch kept for its next
// container start, the live container and its state, and how its runs
// ended. Each result is committed to the store as it comes (usage, session,
// the reply with the cursor it settles, in one transaction).
//
// # Who owns what
//
// A group's run has one owner, its Group (Runner.Group), and one lock.
// Under it are the cursors, the kept batch, the live run (Run: the
// container, its settings, whether the agent is busy or waits for input,
// whether it is closing, its idle timer, the turns in flight, holds) and
// the owner's notes on the group (Notes). Every hand-over of messages,
// every cursor change and every change of the run's state happens under
// it; it is held across store transactions, never across a channel's send.
// The model is a portal's event loop (mautrix bridgev2): one owner per
// group, with a lock instead of a goroutine (docs/decisions.md).
//
// The router decides what is handed over: the triggers and the prompt's
// contents. Its message loop hands each batch to the group (Runner.Hand),
// which pipes it into the live container or keeps it and asks the group
// queue for a slot (Queue). The queue (internal/groupqueue) only shares
// the slots: the cap, the fair order and retry timing. Its handlers are
// this package's: RunMessages and RunTask start a run in the slot granted,
// CloseIdle is the queue asking for an idle container's slot back, and
// Outcome hears how the queue judged a run's end (status failures, the
// chat's notice, the owner's alerts, the turns hub). Each run tells the
// queue only what it needs to share the cap (QueueRun: the agent waits,
// is busy again, the container goes away); the run's state stays here.
// This package asks the router only for what Owner names: notices, the
// outbox's wake and typing indicator, the budget, the owner's alerts, and
// a fresh read of the pending messages for a retry (Owner.Batch).
// Following a container (start and output timeouts, stop, wait, the
// leftover check) is container.Supervise.
//
// A message run's container closes when its agent has waited
// Config.IdleTimeout since its last result, a task run's
// Config.TaskCloseDelay after its first; at once when the queue wants the
// slot back (for a task or messages of the group that could not be piped,
// another group waiting at the cap, shutdown), when its group's settings
// changed or a turn failed. A busy agent is never closed as idle.
//
// # Cursors
//
// A group's cursor is the id of the last message handed to its agent. In
// memory it advances when messages are handed over (container start or pipe).
// It is stored when a reply of the run is committed (in the same transaction
// as the outbox row; a send_message of the agent to its own chat counts) and
// when the run ends well. An agent action during a messages turn (a task or
// group change, through the TurnHold of Runner.Hold) stores it too, in the action's
// transaction: a turn that acted is never run again, so the agent never acts
// twice; if it then fails, the chat gets a notice instead of a retry. A turn
// that fails after the agent's own message to its chat stored the cursor is
// not run again either (the message would go twice): the chat gets a notice
// too, and the turns hub hears that turn gave up, so `chat -m` fails. A
// reply stores only the messages whose turn has begun: those of the container's start, and those piped while the agent was
// idle. Messages piped while it was busy may wait for a turn of their own
// (or be folded into the running one), so the next result stores them.
//
// Outcomes are per turn, not per container. Every turn either commits its
// result or fails, and a failed turn rolls the cursor back to the last
// committed reply: a run that ends badly (claude died with a turn in flight
// and no later result recovered it, an error result, a result that could not
// be committed, a kill, a hang past the container timeout, a non-zero exit)
// while messages it was handed are not committed puts them back and fails,
// so the queue retries them with the retry and notice policy of a first
// turn. A run that ends badly with everything committed lost nothing and is
// a normal end. A reply that went out is never sent again: only uncommitted
// messages run again (a message folded into a turn whose answer went out
// is the exception: it is not stored until the next result or a good end, so
// a failure before then answers it again). Because an unanswered hand-over is
// never stored, messages in flight when the daemon is killed are still after
// the cursor at the next start and run again, while answered ones are not.
// Input files piped into a container that ended without reading them are
// removed and their messages run again.
//
// A result is counted only once it is committed. One that cannot be
// committed (the disk is full) fails its turn: the container is closed,
// nothing later of it is committed, the cursor stays at the last stored
// reply, and the error ("database or disk is full") shows in Status and in
// the failure notice.
//
// # Containers
//
// Before each run the container side (container.SpecBuilder) creates the
// group's directories, its .claude/settings.json and the CLAUDE.md
// templates where missing and builds the container's spec, and the run
// removes a stale close sentinel. Those trees are the agents' to write, so every file operation
// in them (these, the piped input files and the close sentinel) goes through
// internal/home: a directory an agent replaced by a link is moved aside and
// recreated, and the incident shows in Status as a failure of kind
// "boundary". Right before the container is created every bind-mount source
// under the home is checked for symlinks on the way; a failing check refuses
// the run, which then fails like any other. Containers run as
// the router's Config.ContainerUID:ContainerGID. The Claude credential never
// enters a container: each gets its own socket of the daemon's credential
// proxy (the router's Config.APIProxy), mounted read-only. Every stdout event resets
// the hard timeout (Config.ContainerTimeout, or the group's own, at least the
// idle timeout plus TimeoutMargin); when it fires the container is stopped, which is a
// normal end when every turn was committed, and a failed turn otherwise. A
// pipe into an idle agent starts a turn and restarts the hard timeout. A
// container that prints nothing at all within Config.StartTimeout (2 min) of
// its start is stopped as hung too (the runner reports the session when
// claude begins the first turn). A close writes the close sentinel: the
// runner exits once its turn is done. A failed turn (a runner error while
// the agent works on a turn, a result with is_error, a result that cannot be
// committed) closes the container at once: it takes no more messages and is
// never left busy. Each run writes
// data/logs/<folder>/run-<time>.log (daemon-owned, never mounted) with its
// input (no secrets; the prompt only at debug level), the container's
// stderr, exit code and duration.
//
// # Batches
//
// The router's message loop reads a group's pending messages after every
// change of its chat and hands them to the group's run object with the
// group they belong to (Batch, Runner.Hand). One not piped is kept; the
// next container start takes the newest batch unless the cursor moved or a
// group changed since it was read, so a run reads neither the messages nor
// the group again; a retry, which has no batch, asks the owner to read
// both (Owner.Batch). A prompt that leaves older messages out tells the
// chat once.
//
// # Settings
//
// A run records what its container takes from the group's settings
// (Settings: the tool profile, model, timeout, extra mounts, main flag).
// When the owner changes one of them, Runner.Apply marks the run stale: it
// takes no more messages (Run.Stale, asked before every pipe) and its
// container is closed at once when the agent is idle, or
// right after the result that ends its turn in flight. The next message
// starts a container with the new settings. The rest of a group's settings
// are read live, by the router and the credential proxy, never from the
// group a run started with.
//
// # Holding a turn open
//
// Group.Hold marks the turn in flight as waiting on something outside the
// container (the owner's approval of a tool call): while it is held, the
// container's hard timeout starts over each time it fires instead of
// stopping the container (container.Watch.Held), and releasing it restarts
// the timeout from then. The idle close needs nothing: a held turn is in
// flight, so the agent is busy and nothing closes it as idle. A shutdown still stops a held turn after the drain deadline, like any busy
// one.
//
// # Snapshots
//
// When Deps.Snapshots is set, each turn's group folder and memory are
// recorded as it begins (before its container starts, or before the input
// file that starts it on a waiting agent is written) and as it ends (at its
// result, before the reply is committed and the agent counts as waiting, so
// no next turn begins first; and when its container is gone with the turn
// cut off). Messages piped while the agent worked begin the next turn at
// the result. Each turn is marked with where its input came from other
// than the owner: the senders and received files of its messages
// (snapshot.Sources) as it begins, and at its end the web pages the agent
// fetched and the searches it ran (the runner's fetched events); in `ask`
// a memory change of a marked turn is held. Runner.Idle runs an undo of a group's files with its lock
// held, refused (ErrTurnRunning) while its agent works on a turn.
//
// # Status
//
// Each run publishes its container (name, id, kind, busy, replied) to a
// small board as it changes; Runner.Containers reads it without taking a group's
// lock (those are held across store transactions, which may wait up to the
// store's busy timeout behind another writer). Failures lists the runs that
// failed for good and those the queue retries (until the group's next good
// run); a failure is told in the chat once, and to the owner for a group
// other than main.
package agentrun
