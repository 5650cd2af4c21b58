package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// toolDirective runs fake:tool <name> <json>. It returns the reply text, and
// false when the turn was interrupted before the tool answered.
func (f *fake) toolDirective(t *turn, arg string) (string, bool) {
	name, args, _ := strings.Cut(arg, " ")
	name, args = strings.TrimSpace(name), strings.TrimSpace(args)
	if name == "" {
		return "tool error: fake:tool needs a tool name", true
	}
	if args == "" {
		args = "{}"
	}
	if !json.Valid([]byte(args)) {
		return fmt.Sprintf("tool error: arguments %q are not JSON", args), true
	}
	server, tool, err := f.mcp.resolve(name)
	if err != nil {
		return "tool error: " + err.Error(), true
	}
	id := "toolu_fake" + shortID()
	f.assistant([]any{map[string]any{"type": "tool_use", "id": id, "name": "mcp__" + server + "__" + tool, "input": json.RawMessage(args)}},
		map[string]any{"tool_use_meta": []any{map[string]any{"id": id, "display_name": tool, "server_display_name": server, "tool_name": tool}}})
	t.inTool = true
	defer func() { t.inTool = false }()
	text, isErr, err := f.mcp.call(t.ctx, server, tool, json.RawMessage(args))
	if err != nil {
		if t.ctx.Err() != nil {
			return "", false
		}
		text, isErr = err.Error(), true
	}
	content := []any{map[string]any{"type": "text", "text": text}}
	f.toolResult(id, content, isErr, content, "config")
	if isErr {
		return "tool error: " + text, true
	}
	return text, true
}

// hookOutput is the part of a hook callback's answer the fake acts on.
type hookOutput struct {
	Continue           *bool  `json:"continue"`
	Decision           string `json:"decision"`
	Reason             string `json:"reason"`
	StopReason         string `json:"stopReason"`
	HookSpecificOutput *struct {
		PermissionDecision       string         `json:"permissionDecision"`
		PermissionDecisionReason string         `json:"permissionDecisionReason"`
		UpdatedInput             map[string]any `json:"updatedInput"`
	} `json:"hookSpecificOutput"`
}

// bashDirective runs fake:bash <command> like the Bash tool: the PreToolUse
// hooks registered for Bash see the input first and may rewrite or refuse it.
func (f *fake) bashDirective(t *turn, command string) (string, bool) {
	id := "toolu_fake" + shortID()
	if f.disallowed("Bash") {
		return f.noSuchTool(id, "Bash"), true
	}
	input := map[string]any{"command": command}
	readOnly := readOnlyCommand(command)
	hookAllow := false
	f.assistant([]any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": input}}, nil)
	t.inTool = true
	defer func() { t.inTool = false }()

	source := "config"
	f.mu.Lock()
	mode := f.permMode
	f.mu.Unlock()
	for _, h := range f.hookIDs("PreToolUse", "Bash") {
		for _, cb := range h.HookCallbackIDs {
			raw, err := f.request(t.ctx, map[string]any{
				"subtype": "hook_callback", "callback_id": cb, "tool_use_id": id,
				"input": map[string]any{
					"session_id": f.sess.id, "transcript_path": f.sess.path, "cwd": f.cwd,
					"prompt_id": t.promptID, "permission_mode": mode, "effort": map[string]any{"level": "medium"},
					"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": input, "tool_use_id": id,
				},
			}, hookTimeout(h))
			if t.ctx.Err() != nil {
				return "", false
			}
			if err != nil {
				return f.bashRefused(id, "PreToolUse hook failed: "+err.Error()), true
			}
			var out hookOutput
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, &out); err != nil {
					return f.bashRefused(id, "PreToolUse hook answered with invalid output: "+err.Error()), true
				}
			}
			hs := out.HookSpecificOutput
			switch {
			case out.Continue != nil && !*out.Continue:
				return f.bashRefused(id, "stopped by hook: "+out.StopReason), true
			case out.Decision == "block":
				return f.bashRefused(id, "blocked by hook: "+out.Reason), true
			case hs != nil && hs.PermissionDecision == "deny":
				return f.bashRefused(id, "denied by hook: "+hs.PermissionDecisionReason), true
			}
			if hs != nil && hs.UpdatedInput != nil {
				if c, ok := hs.UpdatedInput["command"].(string); ok && c != "" {
					input = hs.UpdatedInput
					command = c
				}
			}
			if hs != nil && hs.PermissionDecision == "allow" {
				hookAllow = true
			}
			source = "hook"
		}
	}
	d := f.permit(t, id, "Bash", input, hookAllow, readOnly, "")
	if d.stop {
		return "", false
	}
	if d.refuse != "" {
		return f.refused(id, d.refuse), true
	}
	if c, ok := d.input["command"].(string); ok && c != "" {
		command = c
	}
	if !hookAllow {
		source = d.source
	}

	out, code, err := f.runCommand(t.ctx, command)
	if t.ctx.Err() != nil {
		return "", false
	}
	if err != nil {
		return f.bashRefused(id, err.Error()), true
	}
	text := strings.TrimRight(out, "\n")
	f.toolResult(id, text, code != 0, map[string]any{"stdout": out, "stderr": "", "interrupted": false,
		"isImage": false, "noOutputExpected": false}, source)
	if code != 0 {
		return fmt.Sprintf("tool error: exit status %d: %s", code, text), true
	}
	return text, true
}

func (f *fake) bashRefused(id, msg string) string {
	f.toolResult(id, msg, true, "Error: "+msg, "hook")
	return "tool error: " + msg
}

// runCommand runs command with /bin/sh -c in the fake's environment (the
// test image carries busybox as /bin/sh), or with the built-in interpreter
// when there is no shell or FAKECLAUDE_NO_SHELL=1.
func (f *fake) runCommand(ctx context.Context, command string) (string, int, error) {
	env := append([]string{}, f.env...)
	if getenv(f.env, "FAKECLAUDE_NO_SHELL") != "1" {
		if _, err := os.Stat("/bin/sh"); err == nil {
			cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
			cmd.Env = env
			cmd.Dir = f.cwd
			cmd.WaitDelay = time.Second
			out, err := cmd.CombinedOutput()
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				return string(out), exitErr.ExitCode(), nil
			}
			return string(out), 0, err
		}
	}
	out, code := builtinShell(command, env)
	return out, code, nil
}

// matches reports whether a hook matcher accepts tool: "" and "*" match
// everything, "A|B" lists names, anything else is a regular expression.
func matches(pattern, tool string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	for _, p := range strings.Split(pattern, "|") {
		if p == tool {
			return true
		}
	}
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	return err == nil && re.MatchString(tool)
}
