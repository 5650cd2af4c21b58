package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/google/uuid"
)

var builtinTools = []string{
	"Task", "Bash", "CronCreate", "CronDelete", "CronList", "Edit", "EnterWorktree", "ExitWorktree",
	"ListAgents", "Monitor", "NotebookEdit", "Read", "ReportFindings", "ScheduleWakeup", "SendMessage",
	"Skill", "TaskStop", "ToolSearch", "WebFetch", "WebSearch", "Workflow", "Write",
}

var slashCommands = []string{"compact", "context", "init", "mcp", "model", "usage", "clear", "config"}

func (f *fake) apiKeySource() string {
	switch {
	case getenv(f.env, "ANTHROPIC_API_KEY") != "":
		return "ANTHROPIC_API_KEY"
	case getenv(f.env, "CLAUDE_CODE_OAUTH_TOKEN") != "":
		return "CLAUDE_CODE_OAUTH_TOKEN"
	}
	return "none"
}

// initResponse is a trimmed but realistic answer to initialize (fixture 01).
func (f *fake) initResponse() map[string]any {
	var commands []any
	for _, c := range slashCommands {
		commands = append(commands, map[string]any{"name": c, "description": "", "argumentHint": "", "builtin": true})
	}
	model := func(value, resolved, name string) map[string]any {
		return map[string]any{"value": value, "resolvedModel": resolved, "displayName": name, "description": name,
			"supportsEffort": true, "supportedEffortLevels": []string{"low", "medium", "high", "xhigh", "max"}}
	}
	f.mu.Lock()
	mode := f.permMode
	f.mu.Unlock()
	return map[string]any{
		"commands": commands,
		"agents": []any{
			map[string]any{"name": "general-purpose", "description": "General-purpose agent"},
			map[string]any{"name": "Explore", "description": "Explores code", "model": "inherit"},
		},
		"output_style":            "default",
		"available_output_styles": []string{"default", "Concise", "Explanatory", "Learning"},
		"models": []any{
			model("default", defaultModel, "Default (recommended)"),
			model("sonnet", "claude-sonnet-5-5", "Sonnet"),
			model("haiku", "claude-haiku-5-5", "Haiku"),
		},
		"account":                 map[string]any{"tokenSource": "none", "apiKeySource": f.apiKeySource(), "apiProvider": "firstParty"},
		"pid":                     f.pid,
		"claude_code_version":     cliVersion,
		"current_permission_mode": mode,
		"session_state":           "idle",
		"fast_mode_state":         "off",
		"analytics_disabled":      true,
		"capabilities":            []string{"ui_surface_v1"},
	}
}

// emitInit prints the system/init line that opens every turn.
func (f *fake) emitInit() {
	servers, mcpTools := f.mcp.wait(f.ctx)
	tools := append(append([]string{}, builtinTools...), mcpTools...)
	f.mu.Lock()
	model, mode := f.model, f.permMode
	f.mu.Unlock()
	dirs := f.opts.addDirs
	if dirs == nil {
		dirs = []string{}
	}
	f.out.emit(map[string]any{
		"type": "system", "subtype": "init", "cwd": f.cwd, "session_id": f.sess.id,
		"tools": tools, "mcp_servers": servers, "model": model, "permissionMode": mode,
		"slash_commands": slashCommands, "apiKeySource": f.apiKeySource(),
		"claude_code_version": cliVersion, "output_style": "default",
		"agents": []string{"general-purpose", "Explore"}, "skills": f.skillNames(), "plugins": []any{},
		"uuid": uuid.NewString(), "original_cwd": f.cwd, "additional_directories": dirs,
		"memory_paths":          map[string]any{"auto": filepath.Join(filepath.Dir(f.sess.path), "memory") + "/"},
		"messaging_socket_path": fmt.Sprintf("/tmp/cc-socks/%d.sock", f.pid),
		"fast_mode_state":       "off", "analytics_disabled": true,
	})
}

// hookIDs returns the callback ids registered for event whose matcher
// accepts tool ("" for events without a tool).
func (f *fake) hookIDs(event, tool string) []hookMatcher {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []hookMatcher
	for _, m := range f.hooks[event] {
		if m.Matcher == nil || matches(*m.Matcher, tool) {
			out = append(out, m)
		}
	}
	return out
}

func hookTimeout(m hookMatcher) time.Duration {
	if m.Timeout != nil && *m.Timeout > 0 {
		return time.Duration(*m.Timeout * float64(time.Second))
	}
	return 60 * time.Second
}

// compactTurn plays fixture 05's /compact: status, PreCompact hook, status,
// init, compact boundary, summary, replay, and a result with empty text.
func (f *fake) compactTurn(t *turn, m userMsg, start time.Time) {
	f.sess.append(f.entry("user", "", map[string]any{"role": "user", "content": m.content}))
	f.out.emit(map[string]any{"type": "system", "subtype": "status", "status": "compacting",
		"session_id": f.sess.id, "uuid": uuid.NewString()})
	for _, h := range f.hookIDs("PreCompact", "") {
		for _, id := range h.HookCallbackIDs {
			_, err := f.request(t.ctx, map[string]any{
				"subtype": "hook_callback", "callback_id": id, "tool_use_id": uuid.NewString(),
				"input": map[string]any{
					"session_id": f.sess.id, "transcript_path": f.sess.path, "cwd": f.cwd,
					"prompt_id": t.promptID, "hook_event_name": "PreCompact",
					"trigger": "manual", "custom_instructions": nil,
				},
			}, hookTimeout(h))
			if f.ctx.Err() != nil {
				return
			}
			if f.interrupted(t, start, 0) {
				return
			}
			if err != nil {
				fmt.Fprintf(f.stderr, "PreCompact hook %s failed: %v\n", id, err)
			}
		}
	}
	f.out.emit(map[string]any{"type": "system", "subtype": "status", "status": nil, "compact_result": "success",
		"session_id": f.sess.id, "uuid": uuid.NewString()})
	f.emitInit()
	before := f.sess.lastUUID()
	summaryID := uuid.NewString()
	f.out.emit(map[string]any{"type": "system", "subtype": "compact_boundary", "session_id": f.sess.id,
		"uuid": uuid.NewString(), "logical_parent_uuid": before,
		"compact_metadata": map[string]any{"trigger": "manual", "pre_tokens": 19, "post_tokens": 2606}})
	summary := map[string]any{"role": "user", "content": "This session is being continued from a previous conversation that was compacted."}
	f.out.emit(map[string]any{"type": "user", "message": summary, "session_id": f.sess.id,
		"parent_tool_use_id": nil, "uuid": summaryID, "timestamp": timestamp(), "isReplay": false, "isSynthetic": true})
	e := f.entry("user", summaryID, summary)
	e["isCompactSummary"] = true
	f.sess.append(e)
	f.out.emit(map[string]any{"type": "user", "message": map[string]any{"role": "user",
		"content": "<local-command-stdout>Compacted PreCompact [callback] completed successfully</local-command-stdout>"},
		"session_id": f.sess.id, "parent_tool_use_id": nil, "uuid": uuid.NewString(), "timestamp": timestamp(), "isReplay": true})
	empty := ""
	f.result(resultFields{subtype: "success", text: &empty, start: start, calls: 0, localCommand: "compact"})
}

// skillNames are the names of the skills the loaded settings found.
func (f *fake) skillNames() []string {
	names := []string{}
	for _, s := range f.settings.skills {
		names = append(names, s.name)
	}
	return names
}
