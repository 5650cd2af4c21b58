package container

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/groups"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// APIProxy serves the credential proxy to containers (credproxy).
type APIProxy interface {
	// Open serves a socket, ipc.ProxySocketName, for the container name of
	// group in a daemon-owned directory, returned to be mounted read-only
	// at ipc.ContainerProxyDir; closeFn stops it and removes the directory.
	Open(group, name string) (dir string, closeFn func(), err error)
	// Auth is the kind of credential the proxy adds (ipc.APIAuth*).
	Auth() string
}

// SpecBuilder prepares a group's host directories and builds the Spec of
// its container. Its zero value is not usable: Home, Image and a non-root
// UID are required.
type SpecBuilder struct {
	// Home is the bridged home: every file written in an agent-writable
	// tree goes through it.
	Home *home.Home
	// AssistantName fills the CLAUDE.md templates.
	AssistantName string
	// Timezone, unless nil, UTC's zero name or Local, is the containers' TZ.
	Timezone        *time.Location
	Image, Instance string
	Limits          Limits
	// Allowlist checks the groups' extra mounts (nil: none are mounted).
	Allowlist *Allowlist
	// Secrets are the Claude credentials: never sent to a container; a spec
	// holding one is refused (Spec.Forbidden).
	Secrets map[string]string
	// APIProxy, when set, gives each container its own socket of the
	// daemon's credential proxy, mounted read-only.
	APIProxy APIProxy
	// Network is the containers' network mode: "" or "bridge", or "none".
	Network string
	// UID and GID are the user containers run as (and own the group's
	// directories when the daemon runs as root).
	UID, GID int
	// GroupUIDs, when set, gives each group's container a uid (and gid)
	// of its own, which owns the group's directories, in place of UID and
	// GID (a daemon running as root: it can give the directories away).
	GroupUIDs *home.GroupUIDs
	// UIDMap and GIDMap are the engine's id mappings (EngineInfo): the
	// host ids that own the group's directories are UID and GID mapped
	// through them (rootless Podman: the user's subordinate ids). Empty:
	// the same ids.
	UIDMap, GIDMap []IDMap
	// Planted, when set, is told what was moved aside from a group that
	// is not full (home.Home.Quarantine) before its container starts: the
	// owner is to hear of it. It must not block for long.
	Planted func(g store.Group, rep home.QuarantineReport)
}

// Build moves aside what the agent of a group that is not full left where
// claude reads its configuration (quarantine), prepares g's directories
// (Prepare), writes claude's managed settings for g's profile
// (WriteManagedSettings, mounted read-only) and returns the spec of the
// container name for g with input on its stdin. Refused extra mounts are
// logged to log and left out. release stops the container's proxy socket:
// call it once the container is gone (it is nil when err is not).
func (b SpecBuilder) Build(log zerolog.Logger, g store.Group, name string, input ipc.RunInput) (spec Spec, release func(), err error) {
	folder := string(g.Folder)
	if err := home.CheckFolder(folder); err != nil {
		return Spec{}, nil, fmt.Errorf("prepare group directories: %w", err)
	}
	profile := ipc.NormProfile(string(g.Tools))
	if profile != ipc.ProfileFull {
		b.quarantine(log, g)
	}
	if err := b.Prepare(g); err != nil {
		return Spec{}, nil, fmt.Errorf("prepare group directories: %w", err)
	}
	uid, gid, err := b.user(folder)
	if err != nil {
		return Spec{}, nil, err
	}
	layout := b.Home.Layout()
	if err := WriteManagedSettings(layout, folder, profile); err != nil {
		return Spec{}, nil, err
	}
	spec = Spec{
		Name:      name,
		Image:     b.Image,
		Group:     folder,
		Instance:  b.Instance,
		Home:      HomeLabel(layout.Dir),
		User:      UserSpec(uid, gid),
		Mounts:    append(Mounts(layout, folder, g.IsMain, g.Sees, b.extraMounts(log, g)), PolicyMount(layout, folder)),
		Limits:    b.Limits,
		Network:   b.Network,
		Forbidden: slices.Collect(maps.Values(b.Secrets)),
		Input:     input,
	}
	if b.Timezone != nil {
		if tz := b.Timezone.String(); tz != "" && tz != "Local" {
			spec.Env = []string{"TZ=" + tz}
		}
	}
	release = func() {}
	// The credential never enters the container: claude reaches the API
	// through this container's own proxy socket.
	if b.APIProxy != nil {
		dir, closeProxy, err := b.APIProxy.Open(folder, name)
		if err != nil {
			return Spec{}, nil, fmt.Errorf("open the credential proxy: %w", err)
		}
		release = closeProxy
		spec.Mounts = append(spec.Mounts, Mount{Source: dir, Target: ipc.ContainerProxyDir, ReadOnly: true})
		spec.Env = append(spec.Env, ipc.EnvAPISocket+"="+ipc.ContainerProxyDir+"/"+ipc.ProxySocketName, ipc.EnvAPIAuth+"="+b.APIProxy.Auth())
	}
	return spec, release, nil
}

// Prepare creates g's directories, its .claude/settings.json and the
// CLAUDE.md templates (the main one for the main group, the global one)
// where missing. Everything goes through the home: a directory an agent
// replaced by a link is moved aside and recreated, and no file is written
// through a link.
func (b SpecBuilder) Prepare(g store.Group) error {
	folder := string(g.Folder)
	if err := home.CheckFolder(folder); err != nil {
		return err
	}
	if g.IsMain {
		if err := b.installTemplate("main", func() (*home.Tree, error) { return b.Home.Group(folder) }); err != nil {
			return err
		}
	}
	if err := b.installTemplate("global", b.Home.Global); err != nil {
		return err
	}
	uid, gid, err := b.hostIDs(folder)
	if err != nil {
		return err
	}
	if err := EnsureSettings(b.Home, folder, uid, gid); err != nil {
		return err
	}
	if err := PrepareGroupDirs(b.Home, folder, g.IsMain, uid, gid); err != nil {
		return err
	}
	if !g.IsMain {
		return nil
	}
	// The folders main sees are mounted one by one: one whose group has
	// not run yet is made (empty, the daemon's, searchable by all) so the
	// mount has a source; its own start gives it to its agent.
	for _, f := range seenFolders(folder, g.Sees) {
		t, err := b.Home.Group(f)
		if err != nil {
			return err
		}
		t.Close()
	}
	return nil
}

// user is the uid and gid folder's container runs as: its own (GroupUIDs),
// else UID and GID.
func (b SpecBuilder) user(folder string) (uid, gid int, err error) {
	if b.GroupUIDs == nil {
		return b.UID, b.GID, nil
	}
	uid, err = b.GroupUIDs.UID(folder)
	if err != nil {
		return 0, 0, fmt.Errorf("the uid of group %s: %w", folder, err)
	}
	return uid, uid, nil
}

// hostIDs are the host uid and gid of folder's container user (user,
// through the engine's id mappings).
func (b SpecBuilder) hostIDs(folder string) (uid, gid int, err error) {
	cuid, cgid, err := b.user(folder)
	if err != nil {
		return 0, 0, err
	}
	uid, uok := HostID(b.UIDMap, cuid)
	gid, gok := HostID(b.GIDMap, cgid)
	if !uok || !gok {
		return 0, 0, fmt.Errorf("the engine maps no host id to the container user %d:%d (its subordinate id range is too small)", cuid, cgid)
	}
	return uid, gid, nil
}

// quarantine moves aside what g's agent left where claude reads its
// configuration (home.Home.Quarantine), before bridged's own settings.json
// is written again, and tells Planted. Its claude reads none of it anyway
// (the runner gives a group that is not full no setting sources): a
// failure is logged and the container starts.
func (b SpecBuilder) quarantine(log zerolog.Logger, g store.Group) {
	rep, err := b.Home.Quarantine(string(g.Folder), []byte(settingsJSON), time.Now())
	if err != nil {
		log.Error().Err(err).Msg("agent-written configuration of claude not looked for")
	}
	if rep.Partial {
		log.Warn().Int("max_entries", home.MaxQuarantineEntries).Int("max_depth", home.MaxQuarantineDepth).
			Msg("the group's folder was not walked whole for agent-written configuration of claude")
	}
	if (len(rep.Moved) > 0 || len(rep.Failed) > 0) && b.Planted != nil {
		b.Planted(g, rep)
	}
}

// installTemplate installs the named template as CLAUDE.md in the tree
// open opens, unless a CLAUDE.md is there.
func (b SpecBuilder) installTemplate(name string, open func() (*home.Tree, error)) error {
	t, err := open()
	if err != nil {
		return err
	}
	defer t.Close()
	_, err = groups.Install(t, name, b.AssistantName)
	return err
}

// CheckMounts verifies every bind-mount source of spec and records in each
// mount the device and inode of what it checked (Mount.ID), which Start
// confirms once the container runs; call it right before the container is
// created: under the home, each must be reached through real directories
// only (an agent may have swapped one for a link since Prepare), and an
// extra mount's source must still be the path without links the allowlist
// resolved.
func (b SpecBuilder) CheckMounts(spec *Spec) error {
	layout := b.Home.Layout()
	for i, m := range spec.Mounts {
		fi, err := layout.MountSource(m.Source)
		if err != nil {
			return fmt.Errorf("refused to start the container: %w", err)
		}
		spec.Mounts[i].ID = FileIDOf(fi)
	}
	return nil
}

// extraMounts checks the group's extra mounts against the allowlist; refused
// ones are logged and left out.
func (b SpecBuilder) extraMounts(log zerolog.Logger, g store.Group) []Mount {
	reqs := g.ContainerConfig.ExtraMounts
	if len(reqs) == 0 {
		return nil
	}
	if b.Allowlist == nil {
		log.Warn().Int("mounts", len(reqs)).Msg("extra mounts requested but no mount allowlist is loaded; none mounted")
		return nil
	}
	creqs := make([]MountRequest, len(reqs))
	for i, m := range reqs {
		creqs[i] = MountRequest{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadWrite: m.ReadWrite}
	}
	mounts, err := b.Allowlist.CheckAll(creqs, g.IsMain)
	if err != nil {
		log.Warn().Err(err).Msg("extra mounts refused")
	}
	return mounts
}
