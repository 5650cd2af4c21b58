// Package ipchost is the daemon's side of the IPC namespaces (DESIGN §8): it
// watches data/ipc/<folder>/requests/ of every registered group, carries out
// the agents' tool calls (send_message, schedule_task, list_tasks,
// update_task, pause_task, resume_task, cancel_task, register_group,
// list_groups) and answers each one in responses/<id>.json. It is a
// middle-tier service of its own, apart from the leaf package ipc, so that
// agent-runner, which needs only the formats, never links the store.
//
// # Identity and authorization
//
// A request's group is the directory it appeared in, never anything its
// content says. The main group may do everything. Any other group may send to
// its own chat and manage its own tasks only; naming its own chat or folder as
// target_chat or target_group is allowed (it is not "another" one), anything
// else is refused, as are register_group and list_groups. Another group's task
// id from a non-main group gets the same "not found" answer as a task that
// does not exist, so existence does not leak. A refused or failed request
// changes nothing and is answered with the reason.
//
// # Files
//
// send_message's file argument names a file in the group's own workspace
// (groups/<folder>, /workspace/group in the container). It is opened
// through the workspace's tree (home.Tree.OpenFile: real directories and a
// regular file only, nothing followed), capped by kind (MaxImageBytes,
// MaxAudioBytes, MaxDocumentBytes) and copied into the home's spool before
// the message is committed; the copy is kept under the row's key in the
// transaction that commits the row (it is part of the request's unit of
// work, see Exactly once), so the outbox finds it, and dropped if the row
// does not commit. A sparse file (data under half its size, from
// 1 MiB) is refused, and so is a file past the group's caps (Config.Files:
// files in any minute, bytes in any 24 hours, counted from its outbox rows,
// checked before the copy and again in the committing transaction) or one
// sent while the home's disk is below Config.Floor. The row keeps the
// file's name and size. A refused file is answered with why, and nothing of
// it is copied.
//
// The agent owns its IPC namespace and is untrusted: it may put links,
// fifos or huge files anywhere in it, or replace a directory. So the host
// never opens a path there by name: every read, write, list, rename and
// removal goes through the group's tree from internal/home (an os.Root,
// descended without following links). Each pass opens the tree afresh;
// requests/, responses/ or errors/ found to be anything but a real
// directory is moved aside and recreated by the home package, which records
// the incident for `bridged status`.
//
// Every request gets exactly one response, written atomically as a new file
// (a link at its name is replaced, never written through) before the request
// file is deleted; a request whose response already exists as a regular
// file (the daemon stopped between the two steps) is deleted without being
// carried out again. Only regular files are read (never through a symlink,
// never a FIFO), at most MaxRequestBytes of them. A file that cannot be read
// or decoded — bad JSON, an unknown type, unknown fields, invalid arguments,
// a fifo, a file too large — is moved to the group's own
// data/ipc/<folder>/errors/<name> (inside its namespace, so never across a
// file system; deleted if even that fails) and answered with an error
// response when its id can be recovered (from the envelope, or from the file
// name). Nothing an agent writes can crash the daemon: a panic while
// handling a request is recovered, logged and answered as an internal error.
//
// # Exactly once
//
// A request that changes something (every type but list_tasks and
// list_groups) is recorded as handled — group, request id, type and the
// response JSON — in the same transaction as its change. The host builds the
// request's unit of work, a value: the record, for an action other than a
// message the group's turn in flight (held through Messenger.HoldTurn, so
// the cursor of the turn commits with the action and a turn that acted is
// not run again), and for a message with a file the file's staged copy. It
// passes the unit to the code that commits: its own transaction for a task
// or a group, applying it there (the task row, the group), or the
// Messenger's SendMessage, which applies it as a store.Unit inside the
// transaction that enqueues the outbox row. Nothing travels in the context;
// the signatures show every path that commits. Before carrying a request
// out, the host looks it up; a recorded one gets the recorded response again
// and is not carried out (records are kept for HandledRetention). A change
// whose record cannot be written is rolled back with it. Handle, called
// directly, carries a request out with a unit that records nothing.
//
// At start, Recover moves every request file left in requests/ to errors/
// without carrying it out: it was written by a container of the previous
// daemon, whose turn was cut off and runs again from the group's cursor, so
// the action happens once, in the re-run. The daemon calls Recover after the
// previous daemon's containers are stopped and before any of its own start.
//
// # Fairness and bounds
//
// The watching and the workers are a directory engine of their own
// (internal/dirwatch), keyed by group folder; the host gives it the way to
// open a group's requests directory and what to do with each file (read,
// decode, answer, or hand a slow request to a side goroutine), and keeps
// what a request means. Each group has its own worker goroutine, started
// (never blocked on) by an inotify event on its requests directory or by a
// sweep every few seconds (of the groups with a live container, and a few
// idle ones in turn: Config.Live), so one group's backlog never delays
// another's requests. The worker runs
// only while there is something to look at: it ends when a pass finds the
// directory empty and no event came meanwhile, so idle groups cost no
// goroutine, and at most one worker of a group runs at a time. A worker lists at
// most a bounded batch of names at a time (a directory of any size costs
// bounded memory) and handles them in file-name (creation) order, one at a
// time: messages and task changes take effect in the order the agent made
// them, and a group flooding its directory uses one goroutine's worth of the
// machine. Slow requests (list_groups refreshing names from WhatsApp) run on
// side goroutines instead, at most MaxInFlight-1 of them per group plus a
// bounded queue, so they hold up neither each other nor the group's other
// requests. The watch never follows a link (IN_DONT_FOLLOW) and is keyed by
// its descriptor, and it is renewed whenever the directory the home package
// opened is not the one watched (the agent renamed, deleted or replaced it).
//
// # The channel
//
// On the kubernetes engine a run's requests and its follow-up input cross
// the credential proxy's TCP channel instead of files (Channel, channel.go,
// decision record 42): the run's token names its group, a request is
// carried out by carryOut with the same unit of work and looked up in the
// same records, under per-group bounds of the channel's own (one quick
// request at a time, MaxInFlight at once); a request id sent again joins or
// is answered from its first handling. The input directory stays the queue:
// the channel streams it and removes each input the runner acknowledges.
//
// # Tasks
//
// schedule_task parses the schedule in the configured timezone and stores the
// task with its first run; a once time more than a minute in the past is
// refused. A group has at most Config.MaxTasks tasks that are not done
// (active, running or paused; counted and stored in one transaction, and
// main scheduling for another group counts against that group), and a task
// prompt, in schedule_task and update_task alike, is at most
// Config.MaxTaskPrompt bytes: past either the request is refused with the
// limit, its setting and the way out, and nothing is stored. update_task with a new schedule recomputes the next run from now
// and makes a finished task active again; the schedule of a task whose once
// run is in flight cannot be changed. pause_task works on active tasks (a
// paused task stays paused); resume_task makes a paused task active again,
// and if its next run passed while it was paused, a cron or interval task
// continues with its next slot after now (missed slots are not replayed)
// while a once task runs at once. Every change wakes the scheduler.
package ipchost
