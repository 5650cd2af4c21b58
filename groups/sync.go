package groups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/bridged-app/bridged/internal/home"
)

// nameFile, in the home's data directory (the daemon's, out of the agents'
// reach), records the assistant's name the home's memory files were
// written for. It changes only once no memory file names an earlier one.
const nameFile = "assistant-name"

// memory is one shipped memory file: its template and where it lives.
type memory struct {
	template string
	path     string // for the owner: "groups/main/CLAUDE.md"
	dir      func(home.Layout) string
	open     func(*home.Home) (*home.Tree, error)
}

func memories() []memory {
	return []memory{
		{"global", "groups/global/" + FileName, home.Layout.GlobalDir, (*home.Home).Global},
		{"main", "groups/main/" + FileName, func(l home.Layout) string { return l.GroupDir("main") }, func(h *home.Home) (*home.Tree, error) { return h.Group("main") }},
	}
}

// Synced is what Sync did.
type Synced struct {
	// Renamed lists the memory files written again for a new name.
	Renamed []string
	// Old is the assistant's name recorded before, and Stale the memory
	// files the user edited that still name it (left as they are).
	Old   string
	Stale []string
}

// Sync installs the main and global CLAUDE.md templates in hm where none
// exist and, after a rename of the assistant, writes again those still
// unedited (Refresh). It records assistant as the home's name once no
// memory file names the one recorded before. The home's layout must be
// prepared.
func Sync(hm *home.Home, assistant string) (Synced, error) {
	var out Synced
	old, err := recordedName(hm.Layout())
	if err != nil {
		return out, err
	}
	for _, m := range memories() {
		tree, err := m.open(hm)
		if err != nil {
			return out, fmt.Errorf("open %s: %w", m.path, err)
		}
		res, err := Refresh(tree, m.template, assistant)
		if err == nil && res == Current && old != "" && old != assistant && stillNames(tree, m.template, old) {
			out.Stale = append(out.Stale, m.path)
		}
		tree.Close()
		if err != nil {
			return out, err
		}
		if res == Renamed {
			out.Renamed = append(out.Renamed, m.path)
		}
	}
	if len(out.Stale) > 0 {
		out.Old = old
		return out, nil
	}
	if old != assistant {
		if err := os.WriteFile(filepath.Join(hm.Layout().DataDir(), nameFile), []byte(assistant+"\n"), 0o600); err != nil {
			return out, fmt.Errorf("record the assistant's name: %w", err)
		}
	}
	return out, nil
}

// Stale returns the name recorded for hm's memory files when it is not
// assistant, and the memory files the user edited that still name it. It
// only reads: a home not made yet has none.
func Stale(hm *home.Home, assistant string) (old string, stale []string, err error) {
	old, err = recordedName(hm.Layout())
	if err != nil || old == "" || old == assistant {
		return "", nil, err
	}
	for _, m := range memories() {
		if fi, err := os.Lstat(m.dir(hm.Layout())); err != nil || !fi.IsDir() {
			continue
		}
		tree, err := m.open(hm)
		if err != nil {
			return old, stale, fmt.Errorf("open %s: %w", m.path, err)
		}
		if stillNames(tree, m.template, old) {
			stale = append(stale, m.path)
		}
		tree.Close()
	}
	return old, stale, nil
}

// stillNames reports whether t's CLAUDE.md is the user's edit of template
// and names assistant (an unedited template names the one it was rendered
// with, even when its text happens to hold the word).
func stillNames(t *home.Tree, template, assistant string) bool {
	b, err := t.ReadFile(FileName, maxMemory)
	if err != nil {
		return false
	}
	if _, unedited := RenderedWith(template, string(b)); unedited {
		return false
	}
	return NamesAssistant(string(b), assistant)
}

// recordedName returns the name recorded in the home at l, "" if none.
func recordedName(l home.Layout) (string, error) {
	b, err := os.ReadFile(filepath.Join(l.DataDir(), nameFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the assistant's recorded name: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
