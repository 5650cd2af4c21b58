package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// A built-in tool call is settled as the CLI settles it (fixtures 06, 07,
// 07b, 12): a disallowed tool does not exist; a PreToolUse hook's allow, an
// allowed tool, bypass mode or a read-only command runs; otherwise, with
// --permission-prompt-tool stdio, a can_use_tool request decides (allow runs
// the answer's updatedInput when it has one; deny becomes the tool's error,
// the message the model sees); without it the call is denied.

// decision is how a tool call was settled.
type decision struct {
	input  map[string]any // what runs
	refuse string         // non-empty: the tool's error
	source string         // tool_result_meta's permission source
	stop   bool           // the turn was interrupted while asking
}

// disallowed reports whether tool was removed: by --disallowedTools or a
// deny rule of the loaded settings naming the whole tool.
func (f *fake) disallowed(tool string) bool {
	return slices.ContainsFunc(f.settings.deny, func(r string) bool { return ruleMatches(r, tool) })
}

// allowed reports whether an allow rule (--allowedTools, the loaded
// settings, a loaded skill's allowed-tools) lets tool run without asking.
func (f *fake) allowed(tool string) bool {
	return slices.ContainsFunc(f.settings.allow, func(r string) bool { return ruleMatches(r, tool) })
}

// ruleMatches matches a tool rule: a name, or a prefix ending in "*"
// ("mcp__bridge__*"). Rules with content ("Bash(ls:*)") are not the fake's.
func ruleMatches(rule, tool string) bool {
	rule = strings.TrimSpace(rule)
	if p, ok := strings.CutSuffix(rule, "*"); ok && !strings.Contains(p, "(") {
		return strings.HasPrefix(tool, p)
	}
	return rule == tool
}

// permit settles one built-in tool call (after the PreToolUse hooks; hookAllow
// says one of them allowed it). readOnly says the call changes nothing (a
// read-only Bash command), which the CLI runs without asking.
func (f *fake) permit(t *turn, id, tool string, input map[string]any, hookAllow, readOnly bool, blockedPath string) decision {
	f.mu.Lock()
	mode := f.permMode
	f.mu.Unlock()
	if !hookAllow {
		allow, deny := f.preToolUse(t.ctx, id, tool, input)
		if deny != "" {
			return decision{refuse: deny, source: "hook"}
		}
		hookAllow = allow
	}
	switch {
	case hookAllow:
		return decision{input: input, source: "hook"}
	case f.allowed(tool):
		return decision{input: input, source: "config"}
	case mode == "bypassPermissions" || f.opts.skipPermissions:
		return decision{input: input, source: "config"}
	case readOnly:
		return decision{input: input, source: "config"}
	case mode == "acceptEdits" && (tool == "Write" || tool == "Edit"):
		return decision{input: input, source: "config"}
	case mode == "dontAsk" || f.opts.permissionPrompt != "stdio":
		return decision{refuse: fmt.Sprintf("Permission to use %s has been denied because Claude Code is running in don't ask mode.", tool), source: "config"}
	}
	req := map[string]any{
		"subtype": "can_use_tool", "tool_name": tool, "display_name": tool, "input": input,
		"permission_suggestions": []any{}, "tool_use_id": id,
	}
	if d, ok := input["description"].(string); ok {
		req["description"] = d
	}
	if blockedPath != "" {
		req["blocked_path"] = blockedPath
	}
	raw, err := f.request(t.ctx, req, 24*time.Hour)
	if t.ctx.Err() != nil {
		return decision{stop: true}
	}
	if err != nil {
		return decision{refuse: "Tool permission request failed: Error: " + err.Error(), source: "config"}
	}
	var ans struct {
		Behavior     string         `json:"behavior"`
		UpdatedInput map[string]any `json:"updatedInput"`
		Message      string         `json:"message"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return decision{refuse: "Tool permission request failed: Error: " + err.Error(), source: "config"}
	}
	switch ans.Behavior {
	case "allow":
		if len(ans.UpdatedInput) > 0 {
			input = ans.UpdatedInput
		}
		return decision{input: input, source: "user_temporary"}
	case "deny":
		return decision{refuse: ans.Message, source: "user_reject"}
	}
	return decision{refuse: fmt.Sprintf("Tool permission request failed: Error: unknown behavior %q", ans.Behavior), source: "config"}
}

// refused prints the tool result of a call that did not run, as fixture 07b.
func (f *fake) refused(id, msg string) string {
	f.toolResult(id, msg, true, "Error: "+msg, "user_reject")
	return "tool error: " + msg
}

var (
	readOnlyCommands = map[string]bool{
		"echo": true, "cat": true, "ls": true, "pwd": true, "head": true, "tail": true, "wc": true,
		"grep": true, "env": true, "printenv": true, "date": true, "whoami": true, "id": true,
		"true": true, "false": true, "stat": true, "test": true, "[": true, "printf": true, "which": true,
		"uname": true, "hostname": true, "sort": true, "uniq": true, "basename": true, "dirname": true,
	}
	segmentSep = regexp.MustCompile(`&&|\|\||;|\||\n`)
)

// readOnlyCommand reports whether command changes nothing, the way the CLI
// lets `echo hi` run in default mode without asking (fixture 06 notes):
// every part is a known read-only program, with no output redirection and
// no command substitution.
func readOnlyCommand(command string) bool {
	if strings.ContainsAny(command, ">`") || strings.Contains(command, "$(") {
		return false
	}
	for _, seg := range segmentSep.Split(command, -1) {
		fields := strings.Fields(seg)
		if len(fields) == 0 {
			continue
		}
		if !readOnlyCommands[fields[0]] {
			return false
		}
	}
	return true
}

// writeDirective runs fake:write <path> <text>: the Write tool, settled by
// the permission pipeline; the file is written with the input that runs.
func (f *fake) writeDirective(t *turn, arg string) (string, bool) {
	path, content, _ := strings.Cut(strings.TrimSpace(arg), " ")
	if path == "" {
		return "tool error: fake:write needs a path", true
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(f.cwd, path)
	}
	id := "toolu_fake" + shortID()
	if f.disallowed("Write") {
		return f.noSuchTool(id, "Write"), true
	}
	input := map[string]any{"file_path": path, "content": content}
	f.assistant([]any{map[string]any{"type": "tool_use", "id": id, "name": "Write", "input": input}}, nil)
	t.inTool = true
	defer func() { t.inTool = false }()
	d := f.permit(t, id, "Write", input, false, false, path)
	if d.stop {
		return "", false
	}
	if d.refuse != "" {
		return f.refused(id, d.refuse), true
	}
	p, _ := d.input["file_path"].(string)
	c, _ := d.input["content"].(string)
	if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
		msg := err.Error()
		f.toolResult(id, msg, true, "Error: "+msg, d.source)
		return "tool error: " + msg, true
	}
	text := "File created successfully at: " + p
	f.toolResult(id, text, false, map[string]any{"type": "create", "filePath": p, "content": c}, d.source)
	return "wrote " + p, true
}

// fetchDirective runs fake:fetch <url>: the WebFetch tool, settled by the
// permission pipeline. Nothing is fetched (tests have no network): the
// reply names the URL that would have been.
func (f *fake) fetchDirective(t *turn, arg string) (string, bool) {
	u := strings.TrimSpace(arg)
	if _, err := url.Parse(u); err != nil || u == "" {
		return "tool error: fake:fetch needs a URL", true
	}
	id := "toolu_fake" + shortID()
	if f.disallowed("WebFetch") {
		return f.noSuchTool(id, "WebFetch"), true
	}
	input := map[string]any{"url": u, "prompt": "summarise"}
	f.assistant([]any{map[string]any{"type": "tool_use", "id": id, "name": "WebFetch", "input": input}}, nil)
	t.inTool = true
	defer func() { t.inTool = false }()
	d := f.permit(t, id, "WebFetch", input, false, false, "")
	if d.stop {
		return "", false
	}
	if d.refuse != "" {
		return f.refused(id, d.refuse), true
	}
	got, _ := d.input["url"].(string)
	text := "fetched " + got
	f.toolResult(id, text, false, map[string]any{"url": got, "code": 200}, d.source)
	return text, true
}

// noSuchTool answers a call of a tool the CLI does not have (disallowed):
// the model only sees an error.
func (f *fake) noSuchTool(id, tool string) string {
	msg := "No such tool available: " + tool
	f.assistant([]any{map[string]any{"type": "tool_use", "id": id, "name": tool, "input": map[string]any{}}}, nil)
	f.toolResult(id, "<tool_use_error>"+msg+"</tool_use_error>", true, "Error: "+msg, "config")
	return "tool error: " + msg
}
