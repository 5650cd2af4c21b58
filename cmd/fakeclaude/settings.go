//lint:file-ignore ST1005 the errors are the real claude CLI's messages, word for word, as its callers see them

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Settings are loaded as the CLI loads them (its settings, permissions and
// hooks documentation; ../../../shared/reference/claude-settings.md): the
// file layers, lowest first, are user ($CLAUDE_CONFIG_DIR or ~/.claude:
// settings.json, then settings.local.json), project (<cwd>/.claude/
// settings.json) and local (<cwd>/.claude/settings.local.json), each only
// when --setting-sources names it (all of them when the flag is absent);
// above them the --settings flag (a file or inline JSON), then the managed
// settings (/etc/claude-code/managed-settings.json, then
// managed-settings.d/*.json in name order), which always load.
//
// Merged: a single value (a key of env) from the highest layer that sets
// it; permission rules from every layer, a deny anywhere winning; hooks
// from every layer, unless the managed settings set allowManagedHooksOnly
// (managed hooks only) or a layer sets disableAllHooks. Managed
// allowManagedPermissionRulesOnly keeps the managed rules only: those of
// the other layers and of --allowedTools are dropped (--disallowedTools
// stay: a narrowing). Managed disableBypassPermissionsMode "disable" turns
// bypass mode off.
//
// Applied: allow rules (a tool name, or a prefix ending in "*") run a tool
// without asking; a deny rule naming a whole tool takes the tool away;
// SessionStart command hooks run once at start-up and PreToolUse command
// hooks before each built-in tool call (with /bin/sh, in the working
// directory, the hook input on stdin; exit 2 or a permissionDecision "deny"
// refuses, "allow" allows); env is set for the fake itself and everything
// it runs. Skills (user: <config>/skills/*/SKILL.md; project: every
// .claude/skills/*/SKILL.md under the working directory) whose front matter
// has allowed-tools run those tools without asking; .mcp.json in the
// working directory adds its servers unless --strict-mcp-config. Only
// loaded sources count: user skills with the user source, project skills
// and .mcp.json with the project source. The SDK's hooks (the initialize
// request's callbacks) are not settings hooks and always run.

// envManagedDir overrides the managed settings' directory (unit tests only).
const envManagedDir = "FAKECLAUDE_MANAGED_DIR"

// defaultManagedDir is where the CLI reads managed settings on Linux.
const defaultManagedDir = "/etc/claude-code"

// Bounds of what the loader reads.
const (
	maxSettingsFile = 1 << 20
	maxSkillFiles   = 1000
	maxSkillWalk    = 50_000
)

// settingsLayer is one settings file as the fake reads it.
type settingsLayer struct {
	Permissions struct {
		Allow []string `json:"allow"`
		Deny  []string `json:"deny"`
		Ask   []string `json:"ask"`
	} `json:"permissions"`
	Hooks                           map[string][]hookGroup `json:"hooks"`
	Env                             map[string]string      `json:"env"`
	DisableAllHooks                 bool                   `json:"disableAllHooks"`
	AllowManagedPermissionRulesOnly bool                   `json:"allowManagedPermissionRulesOnly"`
	AllowManagedHooksOnly           bool                   `json:"allowManagedHooksOnly"`
	DisableBypassPermissionsMode    string                 `json:"disableBypassPermissionsMode"`
}

// hookGroup is one matcher of a settings hook event.
type hookGroup struct {
	Matcher string        `json:"matcher"`
	Hooks   []commandHook `json:"hooks"`
}

// commandHook is one hook of a settings file; only "command" hooks run.
type commandHook struct {
	Type    string  `json:"type"`
	Command string  `json:"command"`
	Timeout float64 `json:"timeout"`
}

// skill is a skill the fake found, with its allowed tools.
type skill struct {
	name         string
	allowedTools []string
}

// loaded is the merged result of every loaded layer.
type loaded struct {
	allow    []string // rules that run a tool without asking (--allowedTools included unless dropped)
	deny     []string
	hooks    map[string][]hookGroup
	env      map[string]string
	skills   []skill
	mcp      string // the .mcp.json to load, "" for none
	noBypass bool
}

// loadSettings loads the layers for a fake started with opts in cwd.
func loadSettings(opts options, cwd, configDir string, env []string, warn io.Writer) (loaded, error) {
	sources := opts.settingSources
	if sources == nil {
		sources = []string{"user", "project", "local"}
	}
	has := func(s string) bool { return slices.Contains(sources, s) }
	type named struct {
		source string
		s      settingsLayer
	}
	var layers []named
	read := func(source, path string) {
		s, ok, err := readSettingsFile(path)
		if err != nil {
			fmt.Fprintf(warn, "Settings file %s is invalid and was skipped: %v\n", path, err)
			return
		}
		if ok {
			layers = append(layers, named{source, s})
		}
	}
	if has("user") {
		read("user", filepath.Join(configDir, "settings.json"))
		read("user", filepath.Join(configDir, "settings.local.json"))
	}
	if has("project") {
		read("project", filepath.Join(cwd, ".claude", "settings.json"))
	}
	if has("local") {
		read("local", filepath.Join(cwd, ".claude", "settings.local.json"))
	}
	if opts.settings != "" {
		var s settingsLayer
		data := []byte(opts.settings)
		if !strings.HasPrefix(strings.TrimSpace(opts.settings), "{") {
			b, err := os.ReadFile(opts.settings)
			if err != nil {
				return loaded{}, fmt.Errorf("Error: Settings file not found: %s", opts.settings)
			}
			data = b
		}
		if err := json.Unmarshal(data, &s); err != nil {
			return loaded{}, fmt.Errorf("Error: Invalid JSON provided to --settings: %v", err)
		}
		layers = append(layers, named{"flag", s})
	}
	managedDir := getenv(env, envManagedDir)
	if managedDir == "" {
		managedDir = defaultManagedDir
	}
	var policy settingsLayer
	read("policy", filepath.Join(managedDir, "managed-settings.json"))
	dropIns, _ := filepath.Glob(filepath.Join(managedDir, "managed-settings.d", "*.json"))
	sort.Strings(dropIns)
	for _, p := range dropIns {
		read("policy", p)
	}
	for _, l := range layers {
		if l.source == "policy" {
			policy.AllowManagedPermissionRulesOnly = policy.AllowManagedPermissionRulesOnly || l.s.AllowManagedPermissionRulesOnly
			policy.AllowManagedHooksOnly = policy.AllowManagedHooksOnly || l.s.AllowManagedHooksOnly
			if l.s.DisableBypassPermissionsMode == "disable" {
				policy.DisableBypassPermissionsMode = "disable"
			}
		}
	}

	out := loaded{hooks: map[string][]hookGroup{}, env: map[string]string{}, noBypass: policy.DisableBypassPermissionsMode == "disable"}
	if !policy.AllowManagedPermissionRulesOnly {
		out.allow = append(out.allow, opts.allowedTools...)
	}
	out.deny = append(out.deny, opts.disallowedTools...)
	hooksOff := false
	for _, l := range layers {
		for k, v := range l.s.Env {
			out.env[k] = v
		}
		if l.s.DisableAllHooks {
			hooksOff = true
		}
		if l.source == "policy" || !policy.AllowManagedPermissionRulesOnly {
			out.allow = append(out.allow, l.s.Permissions.Allow...)
			out.deny = append(out.deny, l.s.Permissions.Deny...)
		}
		if l.source == "policy" || !policy.AllowManagedHooksOnly {
			for ev, gs := range l.s.Hooks {
				out.hooks[ev] = append(out.hooks[ev], gs...)
			}
		}
	}
	if hooksOff {
		out.hooks = map[string][]hookGroup{}
	}
	if has("user") {
		out.skills = append(out.skills, findSkills(filepath.Join(configDir, "skills"), false)...)
	}
	if has("project") {
		out.skills = append(out.skills, findSkills(cwd, true)...)
		if !opts.strictMCP {
			if fi, err := os.Stat(filepath.Join(cwd, ".mcp.json")); err == nil && fi.Mode().IsRegular() {
				out.mcp = filepath.Join(cwd, ".mcp.json")
			}
		}
	}
	for _, s := range out.skills {
		out.allow = append(out.allow, s.allowedTools...)
	}
	return out, nil
}

// readSettingsFile reads one settings file; a missing one is not loaded.
func readSettingsFile(path string) (settingsLayer, bool, error) {
	var s settingsLayer
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSettingsFile+1))
	if err != nil {
		return s, false, err
	}
	if len(data) > maxSettingsFile {
		return s, false, fmt.Errorf("over %d bytes", maxSettingsFile)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, false, err
	}
	return s, true, nil
}

// findSkills returns the skills under dir: dir/*/SKILL.md for a user
// skills directory, every .claude/skills/*/SKILL.md at any depth for a
// project (the walk follows no link and is bounded).
func findSkills(dir string, project bool) []skill {
	var out []skill
	add := func(skillsDir string) {
		entries, err := os.ReadDir(skillsDir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if len(out) >= maxSkillFiles {
				return
			}
			p := filepath.Join(skillsDir, e.Name(), "SKILL.md")
			if tools, ok := skillAllowedTools(p); ok {
				out = append(out, skill{name: e.Name(), allowedTools: tools})
			}
		}
	}
	if !project {
		add(dir)
		return out
	}
	seen := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		seen++
		if err != nil || seen > maxSkillWalk {
			return filepath.SkipDir
		}
		if d.IsDir() && d.Name() == ".claude" {
			add(filepath.Join(p, "skills"))
			return filepath.SkipDir
		}
		return nil
	})
	return out
}

// skillAllowedTools reads a SKILL.md's front matter: allowed-tools as a
// comma or space separated value, a [list], or "- item" lines below it.
func skillAllowedTools(path string) ([]string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxSettingsFile))
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != "---" {
		return nil, true
	}
	var tools []string
	inList := false
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "---" {
			break
		}
		if inList {
			if item, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok {
				tools = append(tools, strings.Trim(strings.TrimSpace(item), `"'`))
				continue
			}
			inList = false
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(key) != "allowed-tools" {
			continue
		}
		val = strings.Trim(strings.TrimSpace(val), "[]")
		if val == "" {
			inList = true
			continue
		}
		for _, t := range splitList(val) {
			tools = append(tools, strings.Trim(t, `"'`))
		}
	}
	return tools, true
}

// runSessionStart runs the SessionStart command hooks of the loaded
// settings, at start-up.
func (f *fake) runSessionStart(ctx context.Context) {
	source := "startup"
	if f.opts.resume != "" {
		source = "resume"
	}
	for _, g := range f.settings.hooks["SessionStart"] {
		for _, h := range g.Hooks {
			if _, _, err := f.runCommandHook(ctx, h, map[string]any{
				"session_id": f.sess.id, "transcript_path": f.sess.path, "cwd": f.cwd,
				"hook_event_name": "SessionStart", "source": source,
			}); err != nil {
				fmt.Fprintf(f.stderr, "SessionStart hook failed: %v\n", err)
			}
		}
	}
}

// preToolUse runs the PreToolUse command hooks of the loaded settings for
// tool; it returns whether one allowed the call and, when one refused it,
// the reason.
func (f *fake) preToolUse(ctx context.Context, id, tool string, input map[string]any) (allow bool, deny string) {
	for _, g := range f.settings.hooks["PreToolUse"] {
		if !matches(g.Matcher, tool) {
			continue
		}
		for _, h := range g.Hooks {
			out, code, err := f.runCommandHook(ctx, h, map[string]any{
				"session_id": f.sess.id, "transcript_path": f.sess.path, "cwd": f.cwd,
				"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input, "tool_use_id": id,
			})
			switch {
			case err != nil:
				fmt.Fprintf(f.stderr, "PreToolUse hook failed: %v\n", err)
				continue
			case code == 2:
				return false, "blocked by hook: " + strings.TrimSpace(out)
			case code != 0:
				continue
			}
			var o hookOutput
			if json.Unmarshal([]byte(out), &o) != nil || o.HookSpecificOutput == nil {
				continue
			}
			switch o.HookSpecificOutput.PermissionDecision {
			case "deny":
				return false, "denied by hook: " + o.HookSpecificOutput.PermissionDecisionReason
			case "allow":
				allow = true
			}
		}
	}
	return allow, ""
}

// runCommandHook runs one command hook with /bin/sh, input as JSON on its
// stdin, in the working directory and the fake's environment; it returns
// its stdout and exit status.
func (f *fake) runCommandHook(ctx context.Context, h commandHook, input map[string]any) (string, int, error) {
	if h.Type != "command" || h.Command == "" {
		return "", 0, nil
	}
	timeout := 60 * time.Second
	if h.Timeout > 0 {
		timeout = time.Duration(h.Timeout * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	in, _ := json.Marshal(input)
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", h.Command)
	cmd.Env = f.env
	cmd.Dir = f.cwd
	cmd.Stdin = strings.NewReader(string(in))
	cmd.WaitDelay = time.Second
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return out.String() + errOut.String(), exitErr.ExitCode(), nil
	}
	return out.String(), 0, err
}
