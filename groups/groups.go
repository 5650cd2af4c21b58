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

// placeholder is where a template names the assistant.
const placeholder = "{{ASSISTANT_NAME}}"

// maxMemory bounds how much of a CLAUDE.md is read to compare it with a
// template.
const maxMemory = 1 << 20

// RenderedWith reports whether text is template name as bridged installs
// it, unedited, and returns the assistant's name it was rendered with: the
// template is recognised under any name, so a file installed before a
// rename needs no record of the old name to be rewritten.
func RenderedWith(name, text string) (string, bool) {
	b, err := templates.ReadFile(name + "/" + FileName)
	if err != nil {
		return "", false
	}
	parts := strings.SplitN(string(b), placeholder, 3)
	if len(parts) < 2 || !strings.HasPrefix(text, parts[0]) {
		return "", false
	}
	rest := text[len(parts[0]):]
	end := strings.Index(rest, parts[1])
	if parts[1] == "" || end <= 0 {
		return "", false
	}
	assistant := rest[:end]
	if strings.ContainsAny(assistant, "\n{}") {
		return "", false
	}
	if want, err := Template(name, assistant); err != nil || want != text {
		return "", false
	}
	return assistant, true
}

// Refreshed is what Refresh did to a CLAUDE.md.
type Refreshed int

const (
	// Current: the file is the template with the assistant's name, or
	// the user's own text; it is left as it is.
	Current Refreshed = iota
	// Installed: there was none; the template was written.
	Installed
	// Renamed: the file was the unedited template with another name; it
	// was written again with the assistant's name.
	Renamed
)

// Refresh installs template name in t like Install and, when a CLAUDE.md
// is there that is still the unedited template rendered with another
// assistant's name (a rename), writes it again with assistant. A file the
// user edited is left as it is, and so is anything but a regular file (a
// link the agent planted is neither followed nor replaced). The write is
// through t, complete or not at all.
func Refresh(t *home.Tree, name, assistant string) (Refreshed, error) {
	wrote, err := Install(t, name, assistant)
	if err != nil || wrote {
		return Installed, err
	}
	b, err := t.ReadFile(FileName, maxMemory)
	if err != nil {
		// Not a regular file, or too large: not bridged's template.
		return Current, nil
	}
	old, ok := RenderedWith(name, string(b))
	if !ok || old == assistant {
		return Current, nil
	}
	text, err := Template(name, assistant)
	if err != nil {
		return Current, err
	}
	if err := t.WriteFile(FileName, []byte(text), 0o644); err != nil {
		return Current, fmt.Errorf("rename the assistant in the %s template: %w", name, err)
	}
	return Renamed, nil
}

// NamesAssistant reports whether text names assistant: the name as a whole
// word, as the templates use it ("You are Andy", "@Andy").
func NamesAssistant(text, assistant string) bool {
	if assistant == "" {
		return false
	}
	word := func(r byte) bool {
		return r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	for i := 0; ; {
		j := strings.Index(text[i:], assistant)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(assistant)
		if (start == 0 || !word(text[start-1])) && (end == len(text) || !word(text[end])) {
			return true
		}
		i = start + 1
	}
}
