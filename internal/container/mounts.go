package container

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/bridged-app/bridged/internal/ipc"
)

// Container paths (DESIGN §7). They are fixed: the agent-runner's defaults and
// the group templates refer to them.
const (
	ContainerGroupDir   = "/workspace/group"
	ContainerGlobalDir  = "/workspace/global"
	ContainerIPCDir     = "/workspace/ipc"
	ContainerGroupsDir  = "/workspace/groups"
	ContainerExtraDir   = "/workspace/extra"
	ContainerHome       = "/home/agent"
	ContainerClaudeDir  = ContainerHome + "/.claude"
	GlobalFolder        = "global"
	defaultContainerUID = 1000
	defaultContainerGID = 1000
)

// ErrBadFolder is returned for a group folder name that is unsafe as a path
// component (empty, a path, hidden, or the reserved "global").
var ErrBadFolder = errors.New("unsafe group folder")

// Paths locates bridged's state under its home directory (DESIGN §3).
type Paths struct {
	Home string
}

// GroupsDir is groups/, the parent of every group's workspace.
func (p Paths) GroupsDir() string { return filepath.Join(p.Home, "groups") }

// GroupDir is groups/<folder>, the group's workspace.
func (p Paths) GroupDir(folder string) string { return filepath.Join(p.GroupsDir(), folder) }

// GlobalDir is groups/global, the memory shared by every group.
func (p Paths) GlobalDir() string { return filepath.Join(p.GroupsDir(), GlobalFolder) }

// LogsDir is groups/<folder>/logs, where run logs are written.
func (p Paths) LogsDir(folder string) string { return filepath.Join(p.GroupDir(folder), "logs") }

// ClaudeDir is data/sessions/<folder>/.claude, the group's Claude state.
func (p Paths) ClaudeDir(folder string) string {
	return filepath.Join(p.Home, "data", "sessions", folder, ".claude")
}

// SettingsFile is the group's .claude/settings.json.
func (p Paths) SettingsFile(folder string) string {
	return filepath.Join(p.ClaudeDir(folder), "settings.json")
}

// IPCDir is data/ipc/<folder>, the group's IPC namespace.
func (p Paths) IPCDir(folder string) string { return filepath.Join(p.Home, "data", "ipc", folder) }

// CheckFolder rejects folder names that are unsafe as a single path
// component. The naming rule itself (lowercase letters, digits, dashes) is
// the store's; this is the last line of defence before a path is built.
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

// Mounts returns the bind mounts of a group's container (DESIGN §7): the
// group's workspace, the global memory (read-only unless main), the group's
// Claude state, its IPC namespace, every group's folder (main only) and the
// extra mounts, which must already have been checked by an Allowlist. The
// folder must have passed CheckFolder (PrepareGroupDirs checks it).
func Mounts(p Paths, folder string, isMain bool, extra []Mount) []Mount {
	m := []Mount{
		{Source: p.GroupDir(folder), Target: ContainerGroupDir},
		{Source: p.GlobalDir(), Target: ContainerGlobalDir, ReadOnly: !isMain},
		{Source: p.ClaudeDir(folder), Target: ContainerClaudeDir},
		{Source: p.IPCDir(folder), Target: ContainerIPCDir},
	}
	if isMain {
		m = append(m, Mount{Source: p.GroupsDir(), Target: ContainerGroupsDir})
	}
	return append(m, extra...)
}

// ContainerUser returns the uid:gid a container runs as: the daemon's own, or
// 1000:1000 when the daemon runs as root (the agent is never root).
func ContainerUser() (uid, gid int) {
	if os.Geteuid() == 0 {
		return defaultContainerUID, defaultContainerGID
	}
	return os.Geteuid(), os.Getegid()
}

// UserSpec formats uid and gid for Spec.User.
func UserSpec(uid, gid int) string { return fmt.Sprintf("%d:%d", uid, gid) }

// PrepareGroupDirs creates the host directories Mounts refers to (and the IPC
// namespace's input/, requests/ and responses/). When the daemon runs as root
// it hands the directories the container writes to — and everything already
// in them — to uid:gid, so the non-root container user can write its files.
// Symlinks are never followed.
func PrepareGroupDirs(p Paths, folder string, uid, gid int) error {
	if err := CheckFolder(folder); err != nil {
		return err
	}
	ipcDirs := ipc.Layout{Root: p.IPCDir(folder)}
	// Directories the agent writes to, whose whole content it owns.
	owned := []string{p.GroupDir(folder), p.ClaudeDir(folder), p.IPCDir(folder)}
	create := append([]string{p.GlobalDir(), ipcDirs.Input(), ipcDirs.Requests(), ipcDirs.Responses()}, owned...)
	for _, d := range create {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("prepare %s: %w", folder, err)
		}
	}
	if os.Geteuid() != 0 {
		return nil
	}
	// The global memory is written by the main group (mounted read-write
	// there); other groups see it read-only.
	for _, d := range append(owned, p.GlobalDir()) {
		if err := chownTree(d, uid, gid); err != nil {
			return fmt.Errorf("prepare %s: %w", folder, err)
		}
	}
	return nil
}

// chownTree gives root and everything below it to uid:gid without following
// symlinks, skipping entries that already belong to them. Entries that vanish
// during the walk (an IPC file renamed or consumed meanwhile) are skipped.
func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != root {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		if err := os.Lchown(path, uid, gid); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("chown %s: %w", path, err)
		}
		return nil
	})
}

// settingsJSON is the settings.json a group starts with (nanoclaw's): agent
// teams on, CLAUDE.md files from --add-dir directories read, auto memory on.
const settingsJSON = `{
  "env": {
    "CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS": "1",
    "CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD": "1",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "0"
  }
}
`

// EnsureSettings creates the group's .claude/settings.json if it does not
// exist yet. An existing file is never touched, so the user's edits survive.
// The file appears atomically (complete or not at all) and, when the daemon
// runs as root, belongs to the owner of its directory.
func EnsureSettings(p Paths, folder string) error {
	if err := CheckFolder(folder); err != nil {
		return err
	}
	dir := p.ClaudeDir(folder)
	final := p.SettingsFile(folder)
	if _, err := os.Lstat(final); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("settings for %s: %w", folder, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("settings for %s: %w", folder, err)
	}
	tmp, err := os.CreateTemp(dir, ".settings-*.tmp")
	if err != nil {
		return fmt.Errorf("settings for %s: %w", folder, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(settingsJSON); err != nil {
		tmp.Close()
		return fmt.Errorf("settings for %s: %w", folder, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("settings for %s: %w", folder, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("settings for %s: %w", folder, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("settings for %s: %w", folder, err)
	}
	if os.Geteuid() == 0 {
		if fi, err := os.Stat(dir); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				if err := os.Lchown(tmp.Name(), int(st.Uid), int(st.Gid)); err != nil {
					return fmt.Errorf("settings for %s: %w", folder, err)
				}
			}
		}
	}
	// Link, unlike rename, fails when the target exists: a file created
	// meanwhile (by the user or the agent) wins.
	if err := os.Link(tmp.Name(), final); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("settings for %s: %w", folder, err)
	}
	return nil
}
