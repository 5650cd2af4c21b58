package home

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// What an agent can leave where claude reads its configuration: in the
// group's .claude directory (the CLI's user settings), the entries below;
// in the group's folder, at any depth, every ".claude" (project settings,
// skills, agents, commands) and ".mcp.json" (project MCP servers). When a
// group is not full, its claude loads none of them (the runner gives it no
// setting sources); Quarantine still moves them out of the agent's reach,
// so a later change back to full does not bring them back unseen either.

// claudeConfigNames are the entries of the group's .claude directory that
// claude reads as configuration.
var claudeConfigNames = []string{"settings.json", "settings.local.json", "skills", "agents", "commands", "plugins", "hooks"}

// pluginsOwn is the one entry of .claude/plugins the CLI writes itself at
// every start (its built-in plugins' cache): left in place, or every start
// of a quiet group would report it.
const pluginsOwn = "store"

// projectConfigNames are the names claude reads as project configuration
// at any depth of its working directory.
var projectConfigNames = []string{".claude", ".mcp.json"}

// Bounds of the walk of a group's folder for project configuration: the
// entries it looks at and the directory levels it enters. A folder beyond
// them is reported as not walked whole.
const (
	MaxQuarantineEntries = 200_000
	MaxQuarantineDepth   = 32
)

// maxSettingsRead bounds the read of .claude/settings.json for comparison:
// bridged's own file is a few hundred bytes.
const maxSettingsRead = 64 << 10

// Planted is one thing moved aside by Quarantine.
type Planted struct {
	Path    string `json:"path"`     // where it was, relative to the home
	MovedTo string `json:"moved_to"` // where it is now, relative to the home
}

// QuarantineReport is what Quarantine did.
type QuarantineReport struct {
	Moved []Planted
	// Failed are the entries that could not be moved, each with its reason.
	Failed []string
	// Partial is set when the folder's walk stopped at one of its bounds.
	Partial bool
}

// Quarantine moves aside what the agent of folder left where claude reads
// its configuration (see claudeConfigNames and projectConfigNames) into
// data/quarantine/<folder>/<time>/ (claude/ and group/ below it, each keeping
// the entry's path): nothing is deleted, no link is followed (a link is
// moved as the link), and a settings.json whose content is ours (the file
// bridged writes, given) stays. Only entries on the home's file system move:
// one that cannot (another file system) is renamed in place to
// .<name>.planted-<time>, where claude does not read it either. The walk of
// the group's folder is bounded (MaxQuarantineEntries, MaxQuarantineDepth)
// and holds one directory descriptor per level.
func (h *Home) Quarantine(folder string, ours []byte, now time.Time) (QuarantineReport, error) {
	var rep QuarantineReport
	if err := CheckFolder(folder); err != nil {
		return rep, err
	}
	q := &quarantine{h: h, folder: folder, stamp: now.UTC().Format("20060102T150405.000000000Z"), rep: &rep}

	claude, err := h.Claude(folder)
	if err != nil {
		return rep, fmt.Errorf("quarantine %s: %w", folder, err)
	}
	defer claude.Close()
	for _, name := range claudeConfigNames {
		if name == "settings.json" && isOurs(claude, name, ours) {
			continue
		}
		if name == "plugins" {
			q.plugins(claude)
			continue
		}
		if _, err := claude.Lstat(name); err != nil {
			continue
		}
		q.move(claude.fd, claude.rel, name, "claude/"+name)
	}

	group, err := h.Group(folder)
	if err != nil {
		return rep, fmt.Errorf("quarantine %s: %w", folder, err)
	}
	defer group.Close()
	fd, err := unix.Openat(group.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return rep, fmt.Errorf("quarantine %s: %w", folder, group.pathErr("open", ".", err))
	}
	var top unix.Stat_t
	if err := unix.Fstat(fd, &top); err != nil {
		unix.Close(fd)
		return rep, fmt.Errorf("quarantine %s: %w", folder, group.pathErr("stat", ".", err))
	}
	entries := 0
	if err := q.walk(fd, group.rel, "", top.Dev, 0, &entries); err != nil {
		return rep, fmt.Errorf("quarantine %s: %w", folder, err)
	}
	return rep, nil
}

// isOurs reports whether name in t is a regular file holding exactly ours.
func isOurs(t *Tree, name string, ours []byte) bool {
	if len(ours) == 0 {
		return false
	}
	data, err := t.ReadFile(name, maxSettingsRead)
	return err == nil && bytes.Equal(data, ours)
}

// quarantine is one Quarantine call: its destination, made when the first
// entry moves.
type quarantine struct {
	h      *Home
	folder string
	stamp  string
	rep    *QuarantineReport
	dest   string // data/quarantine/<folder>/<stamp>, once made
}

// plugins moves the entries of .claude/plugins but the CLI's own; a plugins
// that is not a directory moves whole.
func (q *quarantine) plugins(claude *Tree) {
	fi, err := claude.Lstat("plugins")
	if err != nil {
		return
	}
	if !fi.IsDir() {
		q.move(claude.fd, claude.rel, "plugins", "claude/plugins")
		return
	}
	fd, err := unix.Openat(claude.fd, "plugins", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		q.fail(path.Join(claude.rel, "plugins"), err)
		return
	}
	f := os.NewFile(uintptr(fd), "plugins")
	defer f.Close()
	var names []string
	for {
		batch, err := f.Readdirnames(1024)
		names = append(names, batch...)
		if len(names) > MaxQuarantineEntries {
			q.rep.Partial = true
			break
		}
		if errors.Is(err, io.EOF) || len(batch) == 0 {
			break
		}
		if err != nil {
			q.fail(path.Join(claude.rel, "plugins"), err)
			return
		}
	}
	// Moved once the directory is read (see walk).
	for _, n := range names {
		if n != pluginsOwn {
			q.move(fd, path.Join(claude.rel, "plugins"), n, "claude/plugins/"+n)
		}
	}
}

// walk looks at the entries of the directory dirFd (rel: its path from the
// home; sub: from the group's folder) and moves those named in
// projectConfigNames; it enters the other real directories on dev, depth
// first, within the bounds. It closes dirFd.
func (q *quarantine) walk(dirFd int, rel, sub string, dev uint64, depth int, entries *int) error {
	f := os.NewFile(uintptr(dirFd), rel)
	defer f.Close()
	var found, subdirs []string
	for {
		batch, err := f.Readdirnames(1024)
		for _, name := range batch {
			*entries++
			if *entries > MaxQuarantineEntries {
				q.rep.Partial = true
				break
			}
			if slices.Contains(projectConfigNames, name) {
				found = append(found, name)
				continue
			}
			var st unix.Stat_t
			if err := unix.Fstatat(dirFd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				subdirs = append(subdirs, name)
			}
		}
		if *entries > MaxQuarantineEntries || errors.Is(err, io.EOF) || len(batch) == 0 {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", rel, err)
		}
	}
	// Moved once the directory is read: a rename during the reading
	// could make it skip an entry.
	for _, name := range found {
		q.move(dirFd, rel, name, path.Join("group", sub, name))
	}
	if *entries > MaxQuarantineEntries {
		return nil
	}
	if len(subdirs) > 0 && depth >= MaxQuarantineDepth {
		q.rep.Partial = true
		return nil
	}
	for _, name := range subdirs {
		fd, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			// Gone or swapped for something else since it was read: what
			// is not a directory now is not entered.
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Dev != dev {
			unix.Close(fd)
			continue
		}
		if err := q.walk(fd, path.Join(rel, name), path.Join(sub, name), dev, depth+1, entries); err != nil {
			return err
		}
		if *entries > MaxQuarantineEntries {
			return nil
		}
	}
	return nil
}

// move renames name in the directory dirFd (rel from the home) to to under
// the quarantine's destination; across file systems it is renamed in place
// instead. Failures are recorded in the report.
func (q *quarantine) move(dirFd int, rel, name, to string) {
	from := path.Join(rel, name)
	dest, err := q.destDir()
	if err != nil {
		q.fail(from, err)
		return
	}
	target := filepath.Join(dest, filepath.FromSlash(to))
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		q.fail(from, err)
		return
	}
	err = unix.Renameat(dirFd, name, unix.AT_FDCWD, target)
	if errors.Is(err, unix.EXDEV) {
		aside := fmt.Sprintf(".%s.planted-%s", name, q.stamp)
		if err := unix.Renameat(dirFd, name, dirFd, aside); err != nil {
			q.fail(from, err)
			return
		}
		q.moved(from, path.Join(rel, aside))
		return
	}
	if err != nil {
		q.fail(from, err)
		return
	}
	movedTo, _ := filepath.Rel(q.h.layout.Dir, target)
	q.moved(from, filepath.ToSlash(movedTo))
}

func (q *quarantine) moved(from, to string) {
	q.rep.Moved = append(q.rep.Moved, Planted{Path: from, MovedTo: to})
	q.h.log.Warn().Str("group", q.folder).Str("path", from).Str("moved_to", to).
		Msg("agent-written configuration of claude moved aside: the group is not full")
}

func (q *quarantine) fail(from string, err error) {
	q.rep.Failed = append(q.rep.Failed, fmt.Sprintf("%s: %v", from, err))
	q.h.log.Error().Err(err).Str("group", q.folder).Str("path", from).
		Msg("agent-written configuration of claude could not be moved aside")
}

// destDir makes the call's destination, data/quarantine/<folder>/<stamp>
// (daemon-owned: reached by path).
func (q *quarantine) destDir() (string, error) {
	if q.dest != "" {
		return q.dest, nil
	}
	d := filepath.Join(q.h.layout.QuarantineDir(q.folder), q.stamp)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("make the quarantine: %w", err)
	}
	q.dest = d
	return d, nil
}
