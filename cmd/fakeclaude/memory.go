package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// memoryDirective runs fake:memory: the CLAUDE.md memory the CLI loads at
// start, each file as "memory <path>:" and its text. It reads the working
// directory's CLAUDE.md and, when the environment sets
// CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD=1, each --add-dir
// directory's; a missing file is left out, and "memory: none" says that
// none was found.
func (f *fake) memoryDirective() string {
	dirs := []string{f.cwd}
	if getenv(f.env, "CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD") == "1" {
		dirs = append(dirs, f.opts.addDirs...)
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
	if len(parts) == 0 {
		return "memory: none"
	}
	return strings.Join(parts, "\n")
}
