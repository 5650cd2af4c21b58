// Package router is the heart of the bridged daemon: it decides which
// inbound messages wake a group's agent and hands them to the group's run
// object, and it sends the outbox through the channels (DESIGN §6, §7, §11).
//
// # Who owns what
//
// A group's run is internal/agentrun's alone: agentrun.Group holds, under
// one lock, the cursors, the batch kept for the next container start, the
// live container and its state (busy, waiting, closing), its idle timer and
// holds, and the router's own notes on the group (agentrun.Notes: the late
// notice, the last /new, the budget's last decision). internal/groupqueue
// only shares the container slots (the cap, the fair order, retry timing),
// and how runs end (status failures, chat notices, alerts) is agentrun's
// too (Runner.Outcome). The router keeps no per-group state. It keeps the
// triggers, the prompts' contents, the message loop and the outbox; it
// answers agentrun's questions (agentrun.Owner: a fresh read for a retry,
// the budget's word, notices, the typing indicator, the owner's alerts).
// Inbound messages are stored by internal/ingest, built before the
// channels and the router: the loop wakes on its Wake and takes the chats
// it marked changed. The rules every entry point shares are
// internal/rules'; owner alerts and budgets are internal/alerts'; the text
// of prompts and notices is internal/prompt.
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
// messages after every change of its chat, under the group's lock, and
// hands them with the group to its run object (agentrun.Runner.Hand): piped
// into the live container, or kept for the next container start, which
// asks the queue for a slot. At most Config.PromptCap messages go in (and
// never more than one IPC text may hold); the chat is told once per prompt
// how many older ones were left out. A scheduled task's prompt is its text
// in a <scheduled_task> element after the context line.
//
// # Outbox
//
// Every message is committed to the outbox before it is sent: replies with
// the cursor they settle, the agent's send_message, the daemon's notices
// (sent straight through the channel, best effort, when the outbox cannot
// take one). Each commit wakes the router's outbox.Sender, which sends the
// rows and drives the typing indicator: on when messages are handed to an
// agent, off when its reply is out (unless the agent is working on another
// turn by then), when a result has nothing to send, and when the run ends.
//
// # Status and liveness
//
// Status never blocks: it reads the queue's status, the runs' board of live
// containers and their recent failures, never a group's lock nor the store.
// Ping makes a round trip through the message loop: it fails while the
// loop is stuck (on a group's lock, or a call that never returns), before
// Run and after it stopped. The daemon's systemd watchdog pings only while
// it answers.
//
// # Start and stop
//
// Run first stops every managed container a previous instance left, removes
// their unread input files, and then looks at every group's pending
// messages. When its context ends it stops taking work, waits up to
// Config.ShutdownTimeout for runs to end (stopping those still busy, whose
// messages then stay pending), sends what they committed, and returns.
//
// # Hand-overs
//
// A hand-over is a package or goroutine boundary crossed with the message's
// work, a store trip (a query or transaction on SQLite; the group registry
// and the budget's day total are in memory and make none) or a Docker
// Engine call. Pure helpers that keep no state (internal/prompt,
// internal/rules) are not counted. One message from WhatsApp to the reply,
// to an agent whose container is live:
//
//  1. whatsmeow's event goroutine calls the WhatsApp channel;
//  2. the channel hands it to internal/ingest (Ingest.Inbound);
//  3. ingest looks the chat's group up in the store's registry (memory:
//     the message's one group lookup);
//  4. store trip: the message and its chat's row, one transaction;
//  5. ingest wakes the message loop (goroutine), handing it the group and
//     the registry's version;
//  6. store trip: the chat's pending messages after the handed cursor,
//     under the group's lock;
//  7. the budget (internal/alerts, in memory) is asked once;
//  8. the loop hands the batch to the group's run object
//     (agentrun.Runner.Hand), which writes it as an input file through
//     internal/home;
//  9. the runner's result reaches agentrun's turn on the container's
//     stdout goroutine (internal/container.Supervise);
//  10. store trip: usage, session, the reply's outbox row and the cursor it
//     settles, one transaction;
//  11. the outbox sender's goroutine is woken (internal/outbox);
//  12. store trip: the due outbox rows;
//  13. the channel sends the reply (whatsmeow);
//  14. store trip: the row marked sent.
//
// When no container is live, the run object keeps the batch at 8 and asks
// internal/groupqueue for a slot, and the start adds seven: the queue's
// goroutine calls agentrun's RunMessages, which takes the batch (no store
// trip, no second lookup or budget check); agentrun reads the session (a
// store trip) and hands the spec to internal/container, which makes four
// Engine calls (create, attach, start, and an inspect of the bind mounts):
// 21 in all, still one group lookup (TestOneGroupLookupPerMessage).
package router
