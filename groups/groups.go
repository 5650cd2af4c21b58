// Package groups ships the CLAUDE.md templates bridged copies into a fresh
// home: groups/main/CLAUDE.md for the main channel and groups/global/CLAUDE.md
// for the rules every group shares. {{ASSISTANT_NAME}} is replaced by the
// configured assistant name when a template is installed.
package groups

import (
	"embed"
	"fmt"
	"strings"

	"github.com/bridged-app/bridged/internal/home"
)

// FileName is the name of a group's memory file.
const FileName = "CLAUDE.md"

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

// Install writes template name to CLAUDE.md in t unless something is
// there already, a dangling symlink included, so a user's edits are never
// overwritten and a planted link creates no file anywhere. The file appears
// complete or not at all. It reports whether it wrote the file.
func Install(t *home.Tree, name, assistant string) (bool, error) {
	text, err := Template(name, assistant)
	if err != nil {
		return false, err
	}
	wrote, err := t.WriteNew(FileName, []byte(text), 0o644)
	if err != nil {
		return false, fmt.Errorf("install %s template: %w", name, err)
	}
	return wrote, nil
}
