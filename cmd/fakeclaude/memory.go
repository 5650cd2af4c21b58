package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// memoryDirective runs fake:memory: the memory the CLI was given, as
// "memory <path>:" and each CLAUDE.md file's text, then "system prompt
// appended:" and the text appended to the system prompt (by
// --append-system-prompt, and by initialize's appendSystemPrompt). Like the CLI, it reads
// the working directory's CLAUDE.md only when the project settings source
// loads (--setting-sources absent or naming project), and each --add-dir
// directory's too when CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD=1. A
// missing file is left out; "memory: none" says there was nothing.
func (f *fake) memoryDirective() string {
	var dirs []string
	if f.opts.settingSources == nil || slices.Contains(f.opts.settingSources, "project") {
		dirs = append(dirs, f.cwd)
		if getenv(f.env, "CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD") == "1" {
			dirs = append(dirs, f.opts.addDirs...)
		}
	}
	var parts []string
	for _, d := range dirs {
		p := filepath.Join(d, "CLAUDE.md")
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("memory %s:\n%s", p, strings.TrimRight(string(b), "\n")))
	}
	f.mu.Lock()
	appended := []string{f.opts.appendSystemPrompt, f.initAppend}
	f.mu.Unlock()
	for _, s := range appended {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, "system prompt appended:\n"+s)
		}
	}
	if len(parts) == 0 {
		return "memory: none"
	}
	return strings.Join(parts, "\n")
}
