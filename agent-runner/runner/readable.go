package runner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// memoryDepth bounds how deep keepReadable goes below a project's memory/.
const memoryDepth = 16

// claudeDir is the Claude home claude uses: $CLAUDE_CONFIG_DIR, else
// ~/.claude ("" when neither is known).
func claudeDir(environ []string) string {
	var home string
	for _, kv := range environ {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "CLAUDE_CONFIG_DIR":
			if v != "" {
				return v
			}
		case "HOME":
			home = v
		}
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".claude")
}

// keepReadable gives the group the right to read (and enter) the agent's
// memory in its Claude home that the agent made closed to it: the
// directories on the way (dir itself, projects/, each project) and what is
// under each project's memory/, its CLAUDE.md. The daemon records that
// memory at every turn's start and end; where it runs agents under rootless
// Podman it reads their files through a named ACL entry, which a mode of
// 0700 or 0600 masks (the CLI makes its directories so). The group's bits
// are the ACL's mask there; elsewhere they are the agent's own group's,
// which no one else is in. Only what this uid owns is changed; nothing is
// followed. Errors are ignored: the daemon records what it cannot read as
// unreadable.
func keepReadable(dir string) {
	if dir == "" {
		return
	}
	uid := os.Getuid()
	open := func(p string) (fs.FileInfo, bool) {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			return nil, false
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			return fi, fi.IsDir()
		}
		want := fs.FileMode(0o040)
		if fi.IsDir() {
			want = 0o050
		}
		if fi.Mode().Perm()&want != want {
			_ = os.Chmod(p, fi.Mode().Perm()|want)
		}
		return fi, fi.IsDir()
	}
	if _, ok := open(dir); !ok {
		return
	}
	open(filepath.Join(dir, "CLAUDE.md"))
	projects := filepath.Join(dir, "projects")
	if _, ok := open(projects); !ok {
		return
	}
	entries, err := os.ReadDir(projects)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(projects, e.Name())
		if _, ok := open(p); !ok {
			continue
		}
		var walk func(p string, depth int)
		walk = func(p string, depth int) {
			if _, dir := open(p); !dir || depth > memoryDepth {
				return
			}
			sub, err := os.ReadDir(p)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return
			}
			for _, s := range sub {
				walk(filepath.Join(p, s.Name()), depth+1)
			}
		}
		walk(filepath.Join(p, "memory"), 0)
	}
}
