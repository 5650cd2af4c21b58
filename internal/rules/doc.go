// Package rules holds bridged's rules for groups and tasks: which chat ids,
// folder names, display names and triggers a group may have, how a trigger is
// normalised, how a group's settings change, how an extra mount is written on
// the command line, and how a task moves between its states (pause, resume,
// update, cancel) with its next run.
//
// It is the one home of these rules (DESIGN §14). The command line and the
// control API (internal/control's Admin) and the agents' tools (the IPC host,
// internal/ipchost) all call it, so a group registered by an agent with
// register_group and one added with `bridged groups add` are held to the same
// rules and normalised the same way, and resuming a task behaves the same
// whoever asks. Authorization (which group may touch which task) stays with
// the callers; so does the mount allowlist (internal/container), which alone
// decides which host directories may be mounted.
//
// The package is a leaf: it imports the store for its types and the schedule
// package for parsing, nothing else of bridged. Its functions are pure; the
// Tx variants (PauseTask, ResumeTask, UpdateTask) apply a transition inside
// the caller's store transaction.
//
// Every rule violation wraps ErrInvalid; its text is written for the person
// or agent who made the request and names the value and the rule it breaks.
//
// # Chat ids
//
//   - local:<name> for the local channel: name is 1 to 64 letters, digits,
//     dots, dashes and underscores, starting with a letter or digit, with no
//     "..";
//   - WhatsApp: <digits>@s.whatsapp.net (a person), <digits>@lid (a person
//     by linked id), <digits>@g.us or <digits>-<digits>@g.us (a group).
//
// Nothing else is accepted; in particular no spaces, control characters,
// slashes or "..".
//
// # Folders
//
// 1 to 64 lowercase letters, digits and dashes, starting with a letter or
// digit, not global and not one of bridged's own directory names
// (store.ValidateFolder, which the store also enforces on every write).
// Empty means a slug of the display name.
//
// # Triggers
//
// Trimmed; empty means "@<assistant name>"; an "@" is added when missing
// ("Bob" becomes "@Bob"). A trigger is one word: no whitespace or control
// characters inside, at least one letter or digit, at most 64 characters.
//
// # Tasks
//
//   - pause: an active task becomes paused; a paused one stays paused; a
//     running one (a once task in flight) or a done one cannot be paused.
//   - resume: a paused task becomes active; an active one stays active; a
//     running or done one cannot be resumed, nor a task whose group is no
//     longer registered. A cron or interval task whose next run passed while
//     it was paused continues with its next slot after now (an interval
//     stays anchored to its schedule), not at once for a missed slot; a
//     once task keeps its time and runs at once if that passed; a task with
//     no run left (a once task that already ran) cannot be resumed.
//   - update: a new prompt, or a new schedule with its first run from now
//     (a once time may be at most a minute in the past). A new schedule
//     makes a done task active again; a running task keeps its schedule
//     until its run has finished.
//   - cancel: the task is deleted, whatever its state; its run log stays.
package rules
