package container

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// Container paths (DESIGN §7). They are fixed: the agent-runner's defaults and
// the group templates refer to them.
const (
	ContainerGroupDir  = "/workspace/group"
	ContainerGlobalDir = "/workspace/global"
	ContainerIPCDir    = "/workspace/ipc"
	ContainerGroupsDir = "/workspace/groups"
	ContainerExtraDir  = "/workspace/extra"
	ContainerHome      = "/home/agent"
	ContainerClaudeDir = ContainerHome + "/.claude"
)

// SettingsName is the group's Claude settings file in its .claude directory.
const SettingsName = "settings.json"

// Mounts returns the bind mounts of a group's container (DESIGN §7): the
// group's workspace, the global memory (read-only unless main), the group's
// Claude state, its IPC namespace, for the main group the other groups'
// folders it sees (read-only) and its own folder read-write at
// /workspace/groups/<folder>, and the extra mounts, which must already have
// been checked by an Allowlist. The folder must have passed
// home.CheckFolder (PrepareGroupDirs checks it), and every source must be
// checked with SpecBuilder.CheckMounts right before the container is
// created.
//
// What main sees of the other groups is a mount per folder, so one it does
// not see is not in its container at all: sees.All mounts the whole
// groups/ directory (every group's folder, and one registered later, at
// once), sees.Folders mounts each of those folders (a folder that is main's
// own, or not a safe name, is left out), none mounts nothing but main's own
// folder.
//
// No container can write a directory that holds another container's bind
// source: groups/ is the only one (the parent of every group's folder and
// of groups/global); it is the daemon's, mode 0711 (home.GroupsDirMode),
// and mounted into main read-only when it is mounted at all, so no agent
// can rename another group's folder and put a link in its place between
// the daemon's check and the engine's mount. The directories mounted
// read-write (a group's folder, groups/global, .claude, the IPC namespace)
// hold no other mount's source.
func Mounts(l home.Layout, folder string, isMain bool, sees store.Sees, extra []Mount) []Mount {
	m := []Mount{
		{Source: l.GroupDir(folder), Target: ContainerGroupDir},
		{Source: l.GlobalDir(), Target: ContainerGlobalDir, ReadOnly: !isMain},
		{Source: l.ClaudeDir(folder), Target: ContainerClaudeDir},
		{Source: l.IPCDir(folder), Target: ContainerIPCDir},
	}
	if isMain {
		if sees.All {
			m = append(m, Mount{Source: l.GroupsDir(), Target: ContainerGroupsDir, ReadOnly: true})
		}
		for _, f := range seenFolders(folder, sees) {
			m = append(m, Mount{Source: l.GroupDir(f), Target: ContainerGroupsDir + "/" + f, ReadOnly: true})
		}
		m = append(m, Mount{Source: l.GroupDir(folder), Target: ContainerGroupsDir + "/" + folder})
	}
	return append(m, extra...)
}

// seenFolders are the folders of other groups the main group with folder
// gets a mount of its own for: those sees names, but main's own and any
// that is not a safe name. Every one of them when sees.All: the whole
// groups/ directory is mounted instead.
func seenFolders(folder string, sees store.Sees) []string {
	if sees.All {
		return nil
	}
	var out []string
	for _, f := range sees.Folders {
		if string(f) != folder && home.CheckFolder(string(f)) == nil {
			out = append(out, string(f))
		}
	}
	return out
}

// UserSpec formats uid and gid for Spec.User.
func UserSpec(uid, gid int) string { return fmt.Sprintf("%d:%d", uid, gid) }

// PrepareGroupDirs makes the host directories Mounts refers to (and the IPC
// namespace's input/, requests/ and responses/), all through h: a level an
// agent replaced by a symlink, file or fifo is moved aside and recreated as
// a real directory (a home incident). When the daemon runs as root it hands
// the directories the container writes to — and everything already in them —
// to uid:gid (host ids), so the non-root container user can write its files;
// a daemon that is not root grants uid the same by ACL (home.Tree.Grant),
// unless uid is its own; each
// entry's own owner is changed, never a link's target nor a file with
// another link (home.Tree.Chown), once per tree for the daemon's life. The
// global memory is handed over for the main group only, the one container
// that writes it: another group's start never walks a tree main filled.
func PrepareGroupDirs(h *home.Home, folder string, isMain bool, uid, gid int) error {
	if err := home.CheckFolder(folder); err != nil {
		return err
	}
	var trees []*home.Tree
	defer func() {
		for _, t := range trees {
			t.Close()
		}
	}()
	keep := func(t *home.Tree, err error) (*home.Tree, error) {
		if err != nil {
			return nil, fmt.Errorf("prepare %s: %w", folder, err)
		}
		trees = append(trees, t)
		return t, nil
	}
	// Directories the agent writes to, whose whole content it owns. The
	// global memory is written by the main group (mounted read-write there);
	// other groups see it read-only.
	if _, err := keep(h.Group(folder)); err != nil {
		return err
	}
	if _, err := keep(h.Claude(folder)); err != nil {
		return err
	}
	global, err := keep(h.Global())
	if err != nil {
		return err
	}
	ipcTree, err := keep(h.IPC(folder))
	if err != nil {
		return err
	}
	for _, d := range []string{ipc.InputDir, ipc.RequestsDir, ipc.ResponsesDir} {
		t, err := ipcTree.Dir(d)
		if err != nil {
			return fmt.Errorf("prepare %s: %w", folder, err)
		}
		t.Close()
	}
	give := (*home.Tree).Chown
	switch {
	case os.Geteuid() == 0:
	case uid == os.Geteuid():
		return nil // the agent runs as the daemon: its trees are its own
	default:
		// A daemon that cannot give files away grants the agent's uid
		// by ACL (docs/decisions.md, record 33).
		give = (*home.Tree).Grant
	}
	for _, t := range trees {
		if t == global && !isMain {
			continue
		}
		if err := give(t, uid, gid); err != nil {
			return fmt.Errorf("prepare %s: %w", folder, err)
		}
	}
	return nil
}

// settingsJSON is the settings.json a group starts with (nanoclaw's): its
// env block is ipc.SettingsEnv (agent teams on, CLAUDE.md files from
// --add-dir directories read, auto memory on), which the profiles other
// than full pass with --settings instead. Kept byte for byte: Quarantine
// recognises the file bridged wrote by its content.
const settingsJSON = `{
  "env": {
    "CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS": "1",
    "CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD": "1",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "0"
  }
}
`

// ManagedSettingsName is the managed settings file in the group's policy
// directory.
const ManagedSettingsName = "managed-settings.json"

// ManagedSettingsFile is the group's managed settings file on the host,
// mounted read-only at ipc.ContainerManagedSettings (PolicyMount).
func ManagedSettingsFile(l home.Layout, folder string) string {
	return filepath.Join(l.PolicyDir(folder), ManagedSettingsName)
}

// ManagedSettings is claude's managed (policy) settings for profile, the
// highest layer of its settings, which nothing the agent writes overrides.
// Full gets none ({}: the full agent may do anything anyway). Every other
// profile: only these permission rules apply (those of settings files and
// of --allowedTools are dropped, so the profile's own rules are repeated
// here), only these hooks run (none: the runner's hooks are SDK callbacks,
// which the CLI keeps), and bypass mode is off.
func ManagedSettings(profile string) ([]byte, error) {
	profile = ipc.NormProfile(profile)
	if profile == ipc.ProfileFull {
		return []byte("{}\n"), nil
	}
	allow, deny := ipc.ProfileRules(profile)
	type permissions struct {
		Allow []string `json:"allow"`
		Deny  []string `json:"deny"`
	}
	b, err := json.MarshalIndent(struct {
		AllowManagedPermissionRulesOnly bool        `json:"allowManagedPermissionRulesOnly"`
		AllowManagedHooksOnly           bool        `json:"allowManagedHooksOnly"`
		DisableBypassPermissionsMode    string      `json:"disableBypassPermissionsMode"`
		Permissions                     permissions `json:"permissions"`
	}{true, true, "disable", permissions{Allow: allow, Deny: append([]string{}, deny...)}}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode managed settings: %w", err)
	}
	return append(b, '\n'), nil
}

// PolicyMount is the mount of folder's managed settings: read-only, where
// claude reads them. SpecBuilder.Build writes the file first.
func PolicyMount(l home.Layout, folder string) Mount {
	return Mount{Source: ManagedSettingsFile(l, folder), Target: ipc.ContainerManagedSettings, ReadOnly: true}
}

// WriteManagedSettings writes the managed settings of profile for folder's
// next container into its policy directory (data/policy/<folder>, which no
// container can write; made by path), complete or not at all, at
// ManagedSettingsFile. A running container keeps the file it was started with.
func WriteManagedSettings(l home.Layout, folder, profile string) error {
	if err := home.CheckFolder(folder); err != nil {
		return err
	}
	data, err := ManagedSettings(profile)
	if err != nil {
		return err
	}
	dir := l.PolicyDir(folder)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("managed settings for %s: %w", folder, err)
	}
	f, err := os.CreateTemp(dir, "."+ManagedSettingsName+".*.tmp")
	if err != nil {
		return fmt.Errorf("managed settings for %s: %w", folder, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, ManagedSettingsFile(l, folder))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("managed settings for %s: %w", folder, err)
	}
	return nil
}

// EnsureSettings creates the group's .claude/settings.json through h if
// nothing is there yet, not even a dangling symlink: an existing entry is
// never touched, so the user's edits survive and a planted link leads
// nowhere. The file appears complete or not at all and, when the daemon runs
// as root, is given to uid:gid with the rest of the .claude tree.
func EnsureSettings(h *home.Home, folder string, uid, gid int) error {
	if err := home.CheckFolder(folder); err != nil {
		return err
	}
	t, err := h.Claude(folder)
	if err != nil {
		return fmt.Errorf("settings for %s: %w", folder, err)
	}
	defer t.Close()
	wrote, err := t.WriteNew(SettingsName, []byte(settingsJSON), 0o644)
	if err != nil {
		return fmt.Errorf("settings for %s: %w", folder, err)
	}
	if wrote && os.Geteuid() == 0 {
		if err := t.Chown(uid, gid); err != nil {
			return fmt.Errorf("settings for %s: %w", folder, err)
		}
	}
	return nil
}
