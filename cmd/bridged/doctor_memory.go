package main

import (
	"strings"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/groups"
	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/home"
)

// checkMemory warns of a main or global CLAUDE.md the owner edited that
// still names the assistant's old name: a rename rewrites only the unedited
// templates. It reports nothing when none does.
func checkMemory(cfg *config.Config) []check {
	hm, err := home.New(cfg.Home, zerolog.Nop())
	if err != nil {
		return nil
	}
	old, stale, err := groups.Stale(hm, cfg.AssistantName)
	if err != nil {
		return []check{{name: "memory", status: "warn", detail: err.Error()}}
	}
	if len(stale) == 0 {
		return nil
	}
	return []check{{name: "memory", status: "warn",
		detail: strings.Join(stale, ", ") + " still names the old assistant " + old + " (the assistant is now " + cfg.AssistantName + "); edited files are left as they are",
		hint:   "edit it to name " + cfg.AssistantName + ", or remove it and restart bridged to install the template"}}
}
