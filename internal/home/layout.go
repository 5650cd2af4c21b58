// Package home is the bridged home directory: where each piece of state
// lives (DESIGN §3 and §14), and the one door through which the daemon
// touches a tree an agent can write to.
//
// Agents are untrusted. Every directory mounted read-write into a container
// (groups/<folder>, data/sessions/<folder>/.claude, data/ipc/<folder>, and for
// the main group groups/global; it sees the rest of groups/ read-only)
// belongs to its agent, which may at any moment
// put a symlink, a fifo, a huge file or a file of any name anywhere in it, or
// replace a whole subdirectory. So the daemon never opens a path in such a
// tree by name. It opens a Tree instead:
//
//   - A Tree is an os.Root: no operation through it can leave it, whatever
//     links the agent planted.
//   - Descending into a Tree opens each directory with O_NOFOLLOW|O_DIRECTORY,
//     one component at a time. A component that is not a real directory (a
//     symlink, a file, a fifo) is never followed or opened: it is moved aside
//     (renamed to ".<name>.refused-<time>" in the same directory, so nothing
//     is lost and nothing crosses a file system), a real directory is made in
//     its place, and the incident is logged and kept for `bridged status`.
//   - Files are created exclusively (O_CREATE|O_EXCL, which never follows a
//     link) under a fresh temporary name and renamed into place; reads open
//     only regular files, never block on a fifo, and stop at a size limit.
//   - Ownership fix-ups walk the tree through the root handle and change the
//     owner of each entry itself (lchown), so a directory swapped for a link
//     during the walk cannot redirect them.
//
// Only the levels above the agent-writable trees (the home, data/, data/ipc,
// data/sessions, groups/) are opened by path: no agent can change them. They
// must still be real directories, not symlinks: every bind-mount source is
// checked component by component below the home right before a container is
// created (MountSource, which also returns the device and inode the
// container's mount is compared with once it runs), because the engine
// follows links the daemon would not. An owner who wants the state on another disk moves or mounts
// the whole home there.
//
// A test (boundary_test.go) keeps the rest of the daemon from calling the os
// package's path-based file functions on these trees.
package home

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// GlobalFolder is groups/global: the memory every group shares.
const GlobalFolder = "global"

// ErrBadFolder is returned for a group folder name that is unsafe as a path
// component (empty, a path, hidden, or the reserved "global").
var ErrBadFolder = errors.New("unsafe group folder")

// Layout locates bridged's state under its home directory.
type Layout struct {
	Dir string // the home directory, absolute
}

// StoreDir is store/, the daemon's databases. Never mounted.
func (l Layout) StoreDir() string { return filepath.Join(l.Dir, "store") }

// DataDir is data/, the daemon's working state. Never mounted as a whole.
func (l Layout) DataDir() string { return filepath.Join(l.Dir, "data") }

// GroupsDir is groups/, the parent of every group's workspace. Agent-writable
// (the main group mounts all of it).
func (l Layout) GroupsDir() string { return filepath.Join(l.Dir, "groups") }

// GroupDir is groups/<folder>, the group's workspace. Agent-writable.
func (l Layout) GroupDir(folder string) string { return filepath.Join(l.GroupsDir(), folder) }

// GlobalDir is groups/global, the memory shared by every group. Writable by
// the main agent.
func (l Layout) GlobalDir() string { return filepath.Join(l.GroupsDir(), GlobalFolder) }

// SessionsDir is data/sessions/, the parent of every group's Claude state.
func (l Layout) SessionsDir() string { return filepath.Join(l.DataDir(), "sessions") }

// ClaudeDir is data/sessions/<folder>/.claude, the group's Claude state.
// Agent-writable.
func (l Layout) ClaudeDir(folder string) string {
	return filepath.Join(l.SessionsDir(), folder, ".claude")
}

// IPCRoot is data/ipc/, the parent of every group's IPC namespace.
func (l Layout) IPCRoot() string { return filepath.Join(l.DataDir(), "ipc") }

// IPCDir is data/ipc/<folder>, the group's IPC namespace. Agent-writable.
func (l Layout) IPCDir(folder string) string { return filepath.Join(l.IPCRoot(), folder) }

// LogsDir is data/logs/<folder>, where the group's run logs are written.
// Daemon-owned: never mounted into any container.
func (l Layout) LogsDir(folder string) string { return filepath.Join(l.DataDir(), "logs", folder) }

// SpoolDir is data/outbox/, the copies of the files agents send, taken out
// of their workspaces before the message is committed. Daemon-owned: never
// mounted into any container.
func (l Layout) SpoolDir() string { return filepath.Join(l.DataDir(), "outbox") }

// UploadsDir is data/uploads/, the files attached to messages posted through
// the control API, kept until the media worker has copied them into the
// group's inbox/. Daemon-owned: never mounted into any container.
func (l Layout) UploadsDir() string { return filepath.Join(l.DataDir(), "uploads") }

// LocalFilesDir is data/local/, the files delivered to local chats (one
// subdirectory per message), kept until the retention removes them.
// Daemon-owned: never mounted into any container.
func (l Layout) LocalFilesDir() string { return filepath.Join(l.DataDir(), "local") }

// PolicyDir is data/policy/<folder>, the managed settings claude reads in
// the group's container (mounted read-only). Daemon-owned: no container
// can write it.
func (l Layout) PolicyDir(folder string) string { return filepath.Join(l.DataDir(), "policy", folder) }

// QuarantineDir is data/quarantine/<folder>, where what the group's agent
// left where claude reads its configuration is moved when the group is not
// full (Home.Quarantine). Daemon-owned: never mounted into any container.
func (l Layout) QuarantineDir(folder string) string {
	return filepath.Join(l.DataDir(), "quarantine", folder)
}

// RemoteControlDir is data/remote-control/, the working directory of the
// owner's /remote-control session on the host. Daemon-owned: never mounted
// into any container, so no agent writes what the CLI reads there.
func (l Layout) RemoteControlDir() string { return filepath.Join(l.DataDir(), "remote-control") }

// SnapshotsDir is data/snapshots/, what each turn changed in its group's
// folder and memory (internal/snapshot). Daemon-owned: never mounted into
// any container.
func (l Layout) SnapshotsDir() string { return filepath.Join(l.DataDir(), "snapshots") }

// SourceLinksDir is data/mount-links/, where a container's bind sources
// on Podman are linked from while the engine creates and starts it
// (container.DockerOptions.LinkDir). Daemon-owned: never mounted into any
// container.
func (l Layout) SourceLinksDir() string { return filepath.Join(l.DataDir(), "mount-links") }

// EmptyDir is data/empty/, read-only empty things mounted over what a
// container must not see.
func (l Layout) EmptyDir() string { return filepath.Join(l.DataDir(), "empty") }

// CheckFolder rejects folder names that are unsafe as a single path
// component. The naming rule itself (lowercase letters, digits, dashes) is
// the registration rule's; this is the last line of defence before a path is
// built.
func CheckFolder(folder string) error {
	switch {
	case folder == "", folder == ".", folder == "..":
		return fmt.Errorf("%w: %q", ErrBadFolder, folder)
	case strings.ContainsAny(folder, `/\`+"\x00"):
		return fmt.Errorf("%w: %q contains a path separator", ErrBadFolder, folder)
	case strings.HasPrefix(folder, "."):
		return fmt.Errorf("%w: %q starts with a dot", ErrBadFolder, folder)
	case folder == GlobalFolder:
		return fmt.Errorf("%w: %q is reserved", ErrBadFolder, folder)
	}
	return nil
}

// Prepare makes the owner-controlled levels of the home: the home itself,
// store/ and data/ (owner only), data/ipc, data/sessions, data/logs,
// data/outbox, data/uploads, data/policy, data/quarantine and groups/
// (GroupsDirMode, set again on a home made before). They are made by path:
// no agent can reach them.
func (l Layout) Prepare() error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{
		{l.Dir, 0o755},
		{l.StoreDir(), 0o700},
		{l.DataDir(), 0o700},
		{l.IPCRoot(), 0o700},
		{l.SessionsDir(), 0o700},
		{filepath.Join(l.DataDir(), "logs"), 0o700},
		{l.SpoolDir(), 0o700},
		{l.UploadsDir(), 0o700},
		{filepath.Join(l.DataDir(), "policy"), 0o700},
		{filepath.Join(l.DataDir(), "quarantine"), 0o700},
		{l.GroupsDir(), GroupsDirMode},
	} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return fmt.Errorf("prepare home: %w", err)
		}
	}
	// A home made before groups/ was only searchable.
	if err := os.Chmod(l.GroupsDir(), GroupsDirMode); err != nil {
		return fmt.Errorf("prepare home: %w", err)
	}
	return l.widenUmaskedFolders()
}

// widenUmaskedFolders gives the folders in groups/ that a daemon under the
// unit's umask (0027) made 0750 where it asked for 0755 the mode it asked
// for, so the agents of other uids read them as record 41 has it (main a
// folder it sees, every group groups/global). Only the daemon's own
// directories with exactly that mode: one an owner set otherwise keeps it.
// No agent can add or replace an entry of groups/.
func (l Layout) widenUmaskedFolders() error {
	entries, err := os.ReadDir(l.GroupsDir())
	if err != nil {
		return fmt.Errorf("prepare home: %w", err)
	}
	for _, e := range entries {
		p := filepath.Join(l.GroupsDir(), e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
			continue
		}
		if err := os.Chmod(p, 0o755); err != nil {
			return fmt.Errorf("prepare home: %w", err)
		}
	}
	return nil
}

// GroupsDirMode is groups/'s mode: the daemon's, searchable by everyone
// else, so an agent reaches its own folder by name but can neither list
// groups/ nor rename, replace or add anything in it, whatever its mounts:
// the kernel refuses it (every agent runs as a uid that is not the
// daemon's).
const GroupsDirMode = 0o711
