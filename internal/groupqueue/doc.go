// Package groupqueue shares the container slots among the groups: the
// cap, the order in which groups get a slot, and the timing of retries. It
// is a slot scheduler only: a group's run itself (its container, whether
// the agent is busy or waits, its idle timer, pipes into it) belongs to
// the slot's holder (internal/agentrun).
//
// A run is one call to a caller-supplied handler in the slot granted:
// RunMessages (one container for the group's pending messages, returning
// when the container is gone) or RunTask (one container for one scheduled
// task). The queue never looks at what a run does; it only orders, limits,
// retries and asks for slots back. It imports nothing from the store or
// the container runtime.
//
// Rules:
//
//   - At most one run per group at a time, and at most Config.MaxConcurrent
//     runs overall. A group with work and no free slot waits; waiting groups
//     start in the order they began to wait, tasks or not, as slots free. A
//     group whose run ends with more work waits behind the groups already
//     waiting.
//   - Per group, due tasks and waiting messages take turns: after a task run
//     the group's waiting messages go next, after a message run its first
//     due task; with only one kind waiting, that kind runs. One task per run.
//     So a task that is due again every time it ends keeps a message waiting
//     for at most the task run under way. A task whose ID is already queued
//     or running for the group is not added again.
//   - A slot's holder reports whether its agent waits for input
//     (Run.MarkIdle, Run.MarkBusy) and when its container goes away
//     (Run.MarkClosing). The queue wants an idle slot back when a task is
//     queued for its group, when messages for its group wait, when another
//     group waits for a slot and the cap is reached (the longest-idle slots
//     first, only as many as are needed), and when the queue shuts down: it
//     says so in MarkIdle's answer, or asks the holder (Handlers.CloseIdle,
//     on a goroutine of its own), which closes its container only if its
//     agent still waits. A busy slot is never asked for; the rule is applied
//     again when it becomes idle.
//   - Messages enqueued while the group's message run has not yet taken
//     the group's messages (Run.Begin) need no follow-up: that run reads
//     them. Messages enqueued later are picked up by a follow-up run when
//     the current run ends.
//   - A failed message run (an error or a panic) is retried after each of
//     Config.RetryDelays in turn (5, 10, 20, 40, 80 s by default); after the
//     last one the group waits for the next EnqueueMessages, which starts a
//     fresh sequence. A run error wrapping ErrNoRetry ends the sequence at
//     once, as if the retries had run out. One wrapping ErrHang is a hang:
//     a hang is retried once, so the Config.MaxHangs-th (2nd) hang of a
//     sequence ends it. Messages enqueued while a retry
//     sequence is under way (during a failed attempt or its back-off) join
//     that sequence instead of starting an early run. A successful message
//     run resets the count.
//     Failed task runs are logged, not retried: the scheduler owns tasks.
//   - A panic in any handler is recovered and logged with its stack; for a
//     run it counts as a failed run.
//   - Nothing runs before Queue.Run is called, so work may be enqueued
//     while the daemon is still wiring itself up.
//   - Shutdown (or the end of Queue.Run's context) stops intake: later
//     enqueues are ignored with a debug log, pending work is not started,
//     pending tasks are reported through Handlers.Outcomes (Dropped). Idle
//     containers are closed, busy ones as soon as they become idle.
//     Shutdown waits for runs to end until its context's deadline, then
//     cancels the runs' contexts and returns an error naming the groups
//     still running.
//
// # Slots
//
// Per group the queue keeps only what sharing the slots needs: the slot it
// holds (if any) with what its holder last reported, the work waiting for
// its next slot, and its retry sequence in one Retry state (NotRetrying,
// Backoff, Exhausted) with the count of failed runs and of hangs. The
// owner learns how runs ended through one interface, Outcomes (Succeeded,
// Retrying with the attempt number, GaveUp, Dropped). Tasks are typed: a
// Queue[T] hands a TaskRef[T] back to RunTask as it got it.
//
// Each slot has one object, a *Run, which the queue creates when it grants
// the slot and hands to the handler (RunMessages, RunTask); the handler
// keeps it for the run's life. A Run is bound to its run, not to its
// group: once the run has ended its reports do nothing, so a late one
// never changes the group's next run.
//
// Every method is safe for concurrent use, and none calls a handler with
// the queue's lock held: a holder may report, enqueue or ask for a slot
// with its own lock held (its lock comes before the queue's).
package groupqueue
