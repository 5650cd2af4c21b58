// Package groups ships the CLAUDE.md templates bridged copies into a fresh
// home: groups/main/CLAUDE.md for the main channel and groups/global/CLAUDE.md
// for the rules every group shares. {{ASSISTANT_NAME}} is replaced by the
// configured assistant name when a template is installed.
package groups

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

//go:embed main/CLAUDE.md global/CLAUDE.md
var templates embed.FS

// Template returns the named template ("main" or "global") with the
// assistant's name filled in.
func Template(name, assistant string) (string, error) {
	b, err := templates.ReadFile(name + "/CLAUDE.md")
	if err != nil {
		return "", fmt.Errorf("template %s: %w", name, err)
	}
	return strings.ReplaceAll(string(b), "{{ASSISTANT_NAME}}", assistant), nil
}

// Install writes template name to dir/CLAUDE.md unless that file exists, so a
// user's edits are never overwritten. It reports whether it wrote the file.
func Install(dir, name, assistant string) (bool, error) {
	dst := filepath.Join(dir, "CLAUDE.md")
	if _, err := os.Stat(dst); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("install %s: %w", dst, err)
	}
	text, err := Template(name, assistant)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("install %s: %w", dst, err)
	}
	if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
		return false, fmt.Errorf("install %s: %w", dst, err)
	}
	return true, nil
}
