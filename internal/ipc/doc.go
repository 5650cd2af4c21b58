// Package ipc holds the formats the host daemon and the agent-runner exchange,
// and the file mechanics both sides rely on.
//
// Two channels exist between them:
//
//   - The container protocol (DESIGN §7): one RunInput JSON object on the
//     container's stdin, then NDJSON RunEvent lines on its stdout.
//   - The IPC directory (DESIGN §8), mounted at /workspace/ipc:
//     input/<seq>.json (host → agent follow-ups), input/_close (the close
//     sentinel), requests/<id>.json (agent → host tool calls) and
//     responses/<id>.json (host → agent answers). On the kubernetes engine
//     the same bodies cross the run's authenticated TCP channel instead
//     (channel.go, decision record 42).
//
// Every file is written atomically (WriteFileAtomic: <name>.tmp in the same
// directory, fsync, rename) and readers ignore *.tmp (List). File names sort in
// creation order (NewName). Decoding happens in two steps: the envelope first,
// then the payload for its type, with unknown fields rejected and Validate
// called on the payload.
//
// Watcher wakes on fsnotify events and also sweeps every directory on a slow
// interval, because bind mounts on some hosts drop inotify events.
package ipc
