package main

import (
	"strings"

	"github.com/bridged-app/bridged/internal/control"
)

// The --json outputs. Field names are snake_case and stable: new fields may
// be added, none is renamed or removed. Lists are never null.

// groupsJSON is `groups list --json`.
type groupsJSON struct {
	Groups []control.Group `json:"groups"`
}

// chatsJSON is `groups list --available --json`.
type chatsJSON struct {
	Chats []control.Chat `json:"chats"`
}

// tasksJSON is `tasks list --json`.
type tasksJSON struct {
	Tasks []control.Task `json:"tasks"`
}

// runsJSON is `tasks runs --json ID`.
type runsJSON struct {
	Task string            `json:"task"`
	Runs []control.TaskRun `json:"runs"`
}

// checkJSON is one check of `doctor --json`.
type checkJSON struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn or fail
	Detail string `json:"detail"`
	Hint   string `json:"hint,omitempty"`
}

// doctorJSON is `doctor --json`: ok is false when a check failed.
type doctorJSON struct {
	OK     bool        `json:"ok"`
	Checks []checkJSON `json:"checks"`
}

func doctorOutput(checks []check) doctorJSON {
	out := doctorJSON{OK: true, Checks: make([]checkJSON, 0, len(checks))}
	for _, c := range checks {
		st := strings.ToLower(c.status)
		out.OK = out.OK && st != "fail"
		out.Checks = append(out.Checks, checkJSON{Name: c.name, Status: st, Detail: c.detail, Hint: c.hint})
	}
	return out
}

// configJSON is `config --json`: each variable's effective value as
// `config` prints it (secrets masked), under its name without BRIDGED_,
// lower-cased: "max_containers", "anthropic_api_key", "env_file"; and
// "source": "daemon" (the running daemon's, with "credential_state") or
// "files".
func configJSON(values map[string]string) map[string]string {
	out := make(map[string]string)
	for k, v := range values {
		out[strings.ToLower(strings.TrimPrefix(k, "BRIDGED_"))] = v
	}
	return out
}

// nonNil returns s, or an empty slice for nil (JSON [] rather than null).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
