// Package groupqueue decides when each group's agent work runs.
//
// A run is one call to a caller-supplied handler: RunMessages (one container
// for the group's pending messages, returning when the container is gone) or
// RunTask (one container for one scheduled task). The queue never looks at
// what a run does; it only orders, limits, retries and pre-empts runs. It
// imports nothing from the store or the container runtime.
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
//   - A group's container is "idle" between Run.MarkIdle (it finished a
//     turn) and the next successful TryPipe. An idle container is closed at once
//     (Handlers.CloseIdle) when a task is queued for its group, when messages
//     for its group wait that could not be piped, when another group waits for
//     a slot and the cap is reached (the longest-idle containers first, only
//     as many as are needed), and when the queue shuts down. A busy container
//     is never closed by the queue; the rule is applied again when it becomes
//     idle.
//   - A message container is closed Config.IdleTimeout after its last result;
//     a task container Config.TaskCloseDelay after its first result.
//   - TryPipe hands new messages to a live message run. It refuses task runs
//     (user messages never reach a task's container), runs that are closing,
//     and everything during shutdown. The send callback runs while the
//     group's close decisions are held back, so a message is never written
//     after the close sentinel. Messages that were not piped are picked up by
//     a follow-up run when the current run ends.
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
// # Run state
//
// The queue is the one owner of a run's state. Each group's run is in one
// State (NoRun, Busy, Idle, Expired, Piping, Closing), changed only through
// one transition function, and its retry sequence in one Retry state
// (NotRetrying, Backoff, Exhausted) with the count of failed runs and of
// hangs. The owner learns how runs ended through one interface, Outcomes
// (Succeeded, Retrying with the attempt number, GaveUp, Dropped). Tasks
// are typed: a Queue[T] hands a TaskRef[T] back to RunTask as it got it.
//
// Each run has one run object, a *Run, which the queue creates when it
// starts the run and hands to the handler (RunMessages, RunTask); the
// handler keeps it for the run's life. It is the only way a run reports
// its state: Run.MarkIdle after each result, Run.MarkClosing when the
// container goes away, and Run.Idle to ask whether the agent waits for
// input. A Run is bound to its run, not to its group: once the run has
// ended its reports do nothing, so a late one never marks the group's next
// run idle or closing. New messages go the other way, through TryPipe by
// group name, into whatever message run is live.
//
// Every method is safe for concurrent use.
package groupqueue
