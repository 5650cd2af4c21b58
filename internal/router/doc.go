// Package router is the heart of the bridged daemon: it decides which of them wake a group's agent, hands them to the
// agent (a new run through the group queue, or piped into the live
// container), turns how each run ended into status, notices and alerts, and
// sends the outbox through the channels (DESIGN §6, §7, §11).
//
// # Who owns what
//
// The group queue (internal/groupqueue) owns each run's state: whether a
// group has a container and whether it is busy, idle, being piped into or
// closing (groupqueue.State), and the retry sequence of failed message runs
// (the count, the back-off, hangs, giving up). The router never counts
// retries: the queue reports how every run ended through one interface,
// groupqueue.Outcomes, which Router.Outcome implements (succeeded, retrying
// n of m, gave up, task dropped): the router's one entry for run outcomes,
// which it turns into Status failures, chat notices and alerts. What happens inside one run (the
// container, each result committed with the cursor it settles, the
// roll-back of a failed turn) is internal/agentrun's, which asks the router
// only for what agentrun.Owner names. The router keeps what is its own: the
// triggers, the prompts' contents, when messages are handed over (a new run
// or a pipe) and the message loop. Inbound messages are stored by
// internal/ingest, built before the channels and the router: the loop
// wakes on its Wake and takes the chats it marked changed (the router's
// Inbound and MediaSettled only forward to it). The rules for groups and tasks that every entry point shares
// are internal/rules'; the agents' requests that apply them reach the
// router only through HoldTurn, whose hold the IPC host applies in the
// action's transaction, which keeps the cursor in step. Owner
// alerts (their keys and texts) and budgets are internal/alerts'. The
// text of prompts and notices is internal/prompt; the agents'
// input directory is written through internal/home.
//
// # Triggers
//
// The main group and groups with requires-trigger off answer every message.
// Any other group wakes only when a pending message starts with its trigger
// (the group's trigger column, default "@" + the assistant's name), ignoring
// case and surrounding space, and the trigger ends there as a word ("@Andy's"
// counts, "@Andyx" and "hi @Andy" do not), or when the channel reports a
// mention of the bot. Untriggered messages are kept and go to the agent as
// context with the next trigger. A message stored more than Config.LateWindow after it
// was sent (a backlog after a disconnect) is marked late: it wakes no
// agent, in the main group either, and the chat is told once until a turn
// starts again (late.go); it goes to the agent as context with the next fresh message
// that wakes it. Bot messages never trigger and are never in a
// prompt. The mention flag is stored with the message, so a mention still
// counts after a restart.
//
// # Prompts
//
// A prompt (internal/prompt) is a <context timezone now/> line and the
// pending messages as <message sender time> elements, XML-escaped, times RFC
// 3339 in the configured timezone. The message loop reads a group's pending
// messages after every change of its chat and hands them, with the group, to
// the group's run object (agentrun.Batch): piped into the live container,
// or kept for the next container start, which starts from the newest batch
// unless the cursor or the group changed since: one read per run. Nothing
// else is cached between the loop and the queue. At most Config.PromptCap messages go in (and never
// more than one IPC text may hold): older ones are dropped with a note saying
// how many, and the chat gets one line saying so too (prompt.LeftOutNotice), once
// per prompt: a retry of the same messages does not repeat it. A scheduled
// task's prompt is its text in a <scheduled_task>
// element after the context line.
//
// # Cursors
//
// A group's cursor is the id of the last message handed to its agent.
// How it moves during a run (handed over, stored with a reply or an agent
// action, rolled back when a turn fails) is internal/agentrun's, which also
// runs the containers; the router decides what is handed over and when.
//
// # Failures
//
// A failed message run shows in Status ("attempt n of m failed, retrying:
// why") until the group's next good run. When a group's message runs fail
// more times in a row than the queue retries, or a second run of the same
// retry sequence hangs (a hang is retried once), one notice naming the reason is
// posted in its chat (sent straight through the channel, best effort, when
// the outbox cannot take it) and the failure shows in Status; the group then
// waits for its next message. A failed task run is recorded in
// its run log and announced in its chat when the task's previous run did not
// fail; the failure that pauses the task (its Config.TaskMaxFailures-th in a
// row) is told to the owner once (Alerts.TaskPaused).
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
// Status never blocks: it reads the runs' board of live containers
// (agentrun.Runner.Containers), the queue's status and the recent failures,
// never a group's lock (those are held across store transactions, which may
// wait up to the store's busy timeout behind another writer) nor the store.
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
// # Hand-overs
//
// A hand-over is a package or goroutine boundary crossed with the message's
// work, a store trip (a query or transaction on SQLite; the group registry
// and the budget's day total are in memory and make none) or a Docker
// Engine call. Pure helpers that keep no state (internal/prompt,
// internal/rules) are not counted. One message from WhatsApp to the reply,
// to an agent whose container is live and idle:
//
//  1. whatsmeow's event goroutine calls the WhatsApp channel
//     (channel/whatsapp.Client.handleEvent);
//  2. the channel hands it to internal/ingest (Ingest.Inbound);
//  3. ingest looks the chat's group up in the store's registry (memory:
//     the one group lookup of the message, for the group's allow list);
//  4. store trip: the message and its chat's row, one transaction (which
//     stores text only for a registered chat: a condition of the insert);
//  5. ingest wakes the message loop (goroutine), handing it the group it
//     looked up with the registry's version (ingest.Changed): the loop
//     uses it while the registry has not changed since, and looks the
//     group up again only if it has;
//  6. store trip: the chat's pending messages after the cursor;
//  7. the budget (internal/alerts, Budget.Paused, in memory) is asked once;
//  8. the loop hands the batch to the group's run object through the queue
//     (groupqueue.TryPipe), which writes the input file through
//     internal/home;
//  9. the runner's result reaches agentrun's turn on the container's
//     stdout goroutine (internal/container.Supervise);
//  10. store trip: usage, session, the reply's outbox row and the cursor it
//     settles, one transaction;
//  11. the outbox sender's goroutine is woken (internal/outbox);
//  12. store trip: the due outbox rows;
//  13. the channel sends the reply (whatsmeow);
//  14. store trip: the row marked sent (and the sent text recorded).
//
// When no container is live, 8 is the queue's EnqueueMessages instead, and
// the run adds seven: the queue's run goroutine takes the batch from the
// run object (no store trip, no second group lookup, no second budget
// check); internal/agentrun reads the session (a store trip); it hands the
// spec to internal/container, which makes four Engine calls (create,
// attach, start, and an inspect that confirms each bind mount is the
// directory that was checked; the engine is asked for the group's
// leftovers only after the start-up sweep failed or the group's last
// container did not end cleanly): 21 in all, still one group lookup.
// TestOneGroupLookupPerMessage holds both paths to one lookup.
//
// # Liveness
//
// Ping makes a round trip through the message loop: it answers while the
// loop runs and fails when the loop is stuck (on a group's lock, or a call
// that never returns), before Run and after it stopped. The daemon's systemd
// watchdog pings only while it answers.
package router
