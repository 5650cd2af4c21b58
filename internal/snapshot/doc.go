// Package snapshot records what each agent turn changes in its group's
// folder and memory, tells it, and takes a turn back.
//
// When a turn begins and when it ends (agentrun calls Begin and End), the
// group's folder (groups/<folder>: its CLAUDE.md and every file) and the
// agent's memory in its Claude home (data/sessions/<folder>/.claude: its
// CLAUDE.md and each project's memory/ directory; not the session
// transcripts) are recorded in a store under data/snapshots/, which no
// container mounts. The trees are the agent's, so they are read through
// internal/home's Tree.Scan: nothing is followed, a symlink is recorded as
// a link with its target, a fifo, socket or device by its kind only.
//
// # The store
//
// Content-addressed objects, each at objects/<sha256> (fanned out by its
// first two hex digits), written to a temporary file, synced and renamed:
// a file's content, a link's target, and a tree per directory (one line
// per entry: type, permission bits, size, hash, quoted name). An unchanged
// file or directory is the same object, so it costs nothing; a change of
// three files writes those three files and the trees on their way to the
// root. A file larger than Config.MaxFile is recorded by size and hash
// only, and the change's note says so. A file is hashed again only when
// its device, inode, size, mtime or ctime changed since the last snapshot
// (a file changed within two seconds of being hashed is hashed again the
// next time its directory is listed, whatever its stamp).
//
// # What is listed
//
// Every directory a snapshot lists is watched by the Service's inotify
// instance (watch.go), added before it is listed, so nothing written after
// the listing is missed; a write in a container through its bind mount is
// the same inode's and is seen the same. A snapshot lists only the
// directories the watch saw written since the last (and opens the ones on
// their way), so a turn that changed nothing lists none and opens nothing:
// its snapshot is the last one. Every directory is listed again when the
// watch cannot be trusted: the kernel's queue overflowed, a snapshot failed,
// the group is new to this process (a restart), a collection removed what a
// cache named, the tree's top went away, or an hour passed. A directory
// made, moved in, or not the one recorded at its place is listed whole; one
// that could not be watched (the watch limit), one holding an unreadable
// entry, and one holding a file with a second link (written through the
// other, its directory sees nothing) is listed at every snapshot.
//
// A directory or file the agent closed to the daemon is recorded as
// unreadable (shown so by diff, and counted in the change's note); the
// snapshot does not fail.
//
// Each change is a row of turn_changes (store.ChangeQuery) naming the root
// trees before and after it, written only once every object it names is
// synced, with the directories holding them: a kill -9 at any point leaves
// a change recorded whole or not at all (stray objects are collected).
//
// # Undo
//
// Undo puts the paths a change changed back to what they were before it.
// A path changed again since (by a later turn or by hand) is a conflict,
// shown with what the turn left and what is there now; the owner chooses
// to overwrite (Force), to leave those and undo the rest (Keep), or names
// the paths (Only). The undo is a change of its own, with the state before
// it as its before snapshot, so undoing it brings the turn's change back.
// Its list of writes is stored before the first one is made, so an undo
// cut off by a crash is finished at the next start (Recover).
//
// # Where it came from, and the weekly summary
//
// A change's source names where its turn's input came from other than the
// owner: senders, received files (Sources), and the pages the agent
// fetched (Fetched, known at the turn's end: Finish). A group in `ask`
// has a memory change of such a turn held (hold.go). Weekly posts to the
// main chat what each group's memory gained and lost each week, recorded
// with the post so it is posted once (summary.go).
//
// # Collection
//
// Prune removes changes older than the retention (never a group's newest)
// and then the objects no remaining change reaches, once they are an hour
// old (an object younger than that may belong to a snapshot being taken).
package snapshot
