// Package router is the heart of the bridged daemon: it stores inbound
// messages, decides which of them wake a group's agent, hands them to the
// agent (a new container through the group queue, or piped into the live
// one), follows each container's events, commits the agent's replies to the
// outbox and sends the outbox through the channels (DESIGN §6, §7, §11).
//
// # Who owns what
//
// The group queue (internal/groupqueue) owns each run's state: whether a
// group has a container and whether it is busy, idle, being piped into or
// closing (groupqueue.State), and the retry sequence of failed message runs
// (the count, the back-off, hangs, giving up). The router never counts
// retries: the queue reports how every run ended through one interface,
// groupqueue.Outcomes, which Router.Outcome implements (succeeded, retrying
// n of m, gave up, task dropped), and the router turns that into Status
// failures, chat notices and alerts. The router keeps what is its own: the
// triggers, the prompts' contents, the cursors (what was handed to the live
// agent and what is committed) and the message loop. Its one entry for
// inbound messages is Inbound. Following a container (start and output
// timeouts, stop, wait, the leftover check) is container.Supervise; the text
// of prompts and notices is internal/prompt; the agents' input directory is
// written through internal/home.
//
// # Triggers
//
// The main group and groups with requires-trigger off answer every message.
// Any other group wakes only when a pending message starts with its trigger
// (the group's trigger column, default "@" + the assistant's name), ignoring
// case and surrounding space, and the trigger ends there as a word ("@Andy's"
// counts, "@Andyx" and "hi @Andy" do not), or when the channel reports a
// mention of the bot. Untriggered messages are kept and go to the agent as
// context with the next trigger. Bot messages never trigger and are never in a
// prompt. The mention flag is stored with the message, so a mention still
// counts after a restart.
//
// # Prompts
//
// A prompt (internal/prompt) is a <context timezone now/> line and the
// pending messages as <message sender time> elements, XML-escaped, times RFC
// 3339 in the configured timezone. The message loop's read of the pending
// messages is the one a new run starts from, unless a message came since:
// one read per run. At most Config.PromptCap messages go in (and never
// more than one IPC text may hold): older ones are dropped with a note saying
// how many, and the chat gets one line saying so too (prompt.LeftOutNotice), once
// per prompt: a retry of the same messages does not repeat it. A scheduled
// task's prompt is its text in a <scheduled_task>
// element after the context line.
//
// # Cursors
//
// A group's cursor is the id of the last message handed to its agent. In
// memory it advances when messages are handed over (container start or pipe).
// It is stored when a reply of the run is committed (in the same transaction
// as the outbox row; a send_message of the agent to its own chat counts) and
// when the run ends well. An agent action during a messages turn (a task or
// group change, through AgentAction) stores it too, in the action's
// transaction: a turn that acted is never run again, so the agent never acts
// twice; if it then fails, the chat gets a notice instead of a retry. A reply stores only the messages whose turn has
// begun: those of the container's start, and those piped while the agent was
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
// templates where missing and builds the container's spec, and the router
// removes a stale close sentinel. Those trees are the agents' to write, so every file operation
// in them (these, the piped input files and the close sentinel) goes through
// internal/home: a directory an agent replaced by a link is moved aside and
// recreated, and the incident shows in Status as a failure of kind
// "boundary". Right before the container is created every bind-mount source
// under the home is checked for symlinks on the way; a failing check refuses
// the run, which then fails like any other. Containers run as
// Config.ContainerUID:ContainerGID. The Claude credential never enters a
// container: each gets its own socket of the daemon's credential proxy
// (Config.APIProxy), mounted read-only. Every stdout event resets
// the hard timeout (Config.ContainerTimeout, or the group's own, at least the
// idle timeout plus 30 s); when it fires the container is stopped, which is a
// normal end when every turn was committed, and a failed turn otherwise. A
// pipe into an idle agent starts a turn and restarts the hard timeout. A
// container that prints nothing at all within Config.StartTimeout (2 min) of
// its start is stopped as hung too (the runner reports the session when
// claude begins the first turn). The
// idle timeout and the task close delay are the group queue's: when it asks,
// the router writes the close sentinel. A failed turn (a runner error while
// the agent works on a turn, a result with is_error, a result that cannot be
// committed) closes the container at once: it takes no more messages and is
// never left busy. Each run writes
// data/logs/<folder>/run-<time>.log (daemon-owned, never mounted) with its
// input (no secrets; the prompt only at debug level), the container's
// stderr, exit code and duration.
//
// A failed message run shows in Status ("attempt n of m failed, retrying:
// why") until the group's next good run. When a group's message runs fail
// more times in a row than the queue retries, or a second run of the same
// retry sequence hangs (a hang is retried once), one notice naming the reason is
// posted in its chat (sent straight through the channel, best effort, when
// the outbox cannot take it) and the failure shows in Status; the group then
// waits for its next message. A failed task run is recorded in
// its run log and announced in its chat when the task's previous run did not
// fail.
//
// # Outbox
//
// Every message is committed to the outbox before it is sent: replies with
// the cursor they settle, the agent's send_message, the daemon's notices.
// Each commit wakes the router's outbox.Sender, which sends the rows and
// drives the typing indicator (internal/outbox). The indicator goes on when
// messages are handed to an agent and off when its reply is out (unless the
// agent is working on another turn by then), when a result has nothing to
// send, and when the run ends.
//
// # Status
//
// Status never blocks: each run publishes its container (name, id, kind,
// busy, replied) to a small board as it changes, and Status reads that
// board, the queue's status and the recent failures, never a group's lock
// (those are held across store transactions, which may wait up to the
// store's busy timeout behind another writer) nor the store.
//
// # Start and stop
//
// Run first stops every managed container a previous instance left, removes
// their unread input files, and then hands every group whose pending messages
// would wake its agent to the queue. When its context ends it stops taking
// work, waits up to Config.ShutdownTimeout for runs to end (stopping those
// still busy, whose messages then stay pending), sends what they committed,
// and returns.
//
// # Liveness
//
// Ping makes a round trip through the message loop: it answers while the
// loop runs and fails when the loop is stuck (on a group's lock, or a call
// that never returns), before Run and after it stopped. The daemon's systemd
// watchdog pings only while it answers.
package router
