package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// settingsTree is a config dir, a working directory and a managed dir with
// a settings file in every layer and a skill in each place skills load from.
func settingsTree(t *testing.T) (config, cwd, managed string) {
	t.Helper()
	config, cwd, managed = t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(config, "settings.json"), `{"permissions":{"allow":["Bash"]},"env":{"A":"user","U":"1"},
		"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch user-hook"}]}]}}`)
	writeFile(t, filepath.Join(config, "settings.local.json"), `{"env":{"UL":"1"}}`)
	writeFile(t, filepath.Join(config, "skills", "u", "SKILL.md"), "---\nname: u\nallowed-tools: WebFetch\n---\nbody\n")
	writeFile(t, filepath.Join(cwd, ".claude", "settings.json"), `{"permissions":{"deny":["Edit"],"allow":["NotebookEdit"]},"env":{"A":"project"}}`)
	writeFile(t, filepath.Join(cwd, ".claude", "settings.local.json"), `{"env":{"A":"local"}}`)
	writeFile(t, filepath.Join(cwd, "pkg", ".claude", "skills", "x", "SKILL.md"), "---\nname: x\nallowed-tools:\n  - Write\n  - \"Glob\"\n---\n")
	writeFile(t, filepath.Join(cwd, ".mcp.json"), `{"mcpServers":{"evil":{"command":"/bin/true"}}}`)
	return config, cwd, managed
}

func mustLoad(t *testing.T, o options, config, cwd, managed string) loaded {
	t.Helper()
	st, err := loadSettings(o, cwd, config, []string{envManagedDir + "=" + managed}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestLoadSettingsLayers(t *testing.T) {
	config, cwd, managed := settingsTree(t)
	base := options{allowedTools: []string{"Read"}, disallowedTools: []string{"TeamCreate"}}

	// No --setting-sources: every file layer loads, the highest value wins,
	// rules and hooks merge, skills and .mcp.json count.
	st := mustLoad(t, base, config, cwd, managed)
	for _, r := range []string{"Read", "Bash", "NotebookEdit", "WebFetch", "Write", "Glob"} {
		if !slices.Contains(st.allow, r) {
			t.Errorf("all sources: allow %q lacks %s", st.allow, r)
		}
	}
	if !slices.Contains(st.deny, "Edit") || !slices.Contains(st.deny, "TeamCreate") {
		t.Errorf("all sources: deny %q; want the project's Edit and --disallowedTools", st.deny)
	}
	if st.env["A"] != "local" || st.env["U"] != "1" || st.env["UL"] != "1" {
		t.Errorf("all sources: env %v; want A from the local layer, U and UL from the user's", st.env)
	}
	if len(st.hooks["SessionStart"]) != 1 || st.mcp == "" || len(st.skills) != 2 {
		t.Errorf("all sources: hooks %v, mcp %q, skills %v; want the user's hook, .mcp.json and both skills", st.hooks, st.mcp, st.skills)
	}

	// Only the user source.
	o := base
	o.settingSources = []string{"user"}
	st = mustLoad(t, o, config, cwd, managed)
	if st.env["A"] != "user" || slices.Contains(st.allow, "Write") || slices.Contains(st.deny, "Edit") || st.mcp != "" || len(st.skills) != 1 {
		t.Errorf("user only: env %v allow %q deny %q mcp %q skills %v; want the user layer and skill only", st.env, st.allow, st.deny, st.mcp, st.skills)
	}

	// No source at all: only the flag settings and --allowedTools; strict
	// MCP leaves .mcp.json out even with the project source.
	o = base
	o.settingSources = []string{}
	o.settings = `{"env":{"F":"flag"},"permissions":{"allow":["Grep"]}}`
	st = mustLoad(t, o, config, cwd, managed)
	if !slices.Equal(st.allow, []string{"Read", "Grep"}) || len(st.hooks) != 0 || st.env["F"] != "flag" || st.env["A"] != "" || len(st.skills) != 0 {
		t.Errorf("no sources: allow %q hooks %v env %v skills %v; want the flag layer and --allowedTools only", st.allow, st.hooks, st.env, st.skills)
	}
	o.settingSources = []string{"project"}
	o.strictMCP = true
	if st = mustLoad(t, o, config, cwd, managed); st.mcp != "" {
		t.Errorf("strict MCP: .mcp.json %q loaded", st.mcp)
	}

	// Managed settings: always loaded, their own rules and hooks only.
	writeFile(t, filepath.Join(managed, "managed-settings.json"), `{"allowManagedPermissionRulesOnly":true,"allowManagedHooksOnly":true,
		"permissions":{"allow":["Glob"],"deny":["Write"]},"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"true"}]}]}}`)
	writeFile(t, filepath.Join(managed, "managed-settings.d", "10-bypass.json"), `{"disableBypassPermissionsMode":"disable","env":{"A":"policy"}}`)
	st = mustLoad(t, base, config, cwd, managed)
	if slices.Contains(st.allow, "Read") || slices.Contains(st.allow, "Bash") || !slices.Contains(st.allow, "Glob") {
		t.Errorf("managed rules only: allow %q; want the managed rules (and skills'), not --allowedTools nor the files'", st.allow)
	}
	if !slices.Contains(st.deny, "Write") || !slices.Contains(st.deny, "TeamCreate") || slices.Contains(st.deny, "Edit") {
		t.Errorf("managed rules only: deny %q; want the managed deny and --disallowedTools", st.deny)
	}
	if len(st.hooks["SessionStart"]) != 0 || len(st.hooks["PreToolUse"]) != 1 {
		t.Errorf("managed hooks only: hooks %v; want the managed PreToolUse hook only", st.hooks)
	}
	if !st.noBypass || st.env["A"] != "policy" {
		t.Errorf("managed drop-in: noBypass %v env %v; want bypass off and the policy's A", st.noBypass, st.env)
	}
}

func TestSkillAllowedTools(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string][]string{
		"---\nallowed-tools: Bash, Read\n---\n":         {"Bash", "Read"},
		"---\nallowed-tools: [Bash, \"Write\"]\n---\n":  {"Bash", "Write"},
		"---\nallowed-tools:\n  - Bash\nname: x\n---\n": {"Bash"},
		"no front matter\nallowed-tools: Bash\n":        nil,
	} {
		p := filepath.Join(dir, "SKILL.md")
		writeFile(t, p, content)
		if got, _ := skillAllowedTools(p); !slices.Equal(got, want) {
			t.Errorf("%q: got %q; want %q", content, got, want)
		}
	}
}

// A planted user settings file runs its SessionStart hook, sets its env
// and pre-allows its tools, as the CLI would; with no setting sources and
// the managed lock, none of it.
func TestPlantedSettingsApplyOnlyFromLoadedSources(t *testing.T) {
	home, dir, managed := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(home, ".claude", "settings.json"), `{"permissions":{"allow":["Bash"]},"env":{"PLANTED":"yes"},
		"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch hooked"}]}]}}`)
	env := baseEnv(home, envManagedDir+"="+managed)

	p := startFake(t, dir, env, append(askArgs, "--setting-sources=project,user")...)
	p.sendUser("fake:bash touch made && echo planted=$PLANTED")
	res, lines := p.result()
	for _, l := range lines {
		if l["type"] == "control_request" {
			t.Fatalf("a pre-allowed command asked: %v", l)
		}
	}
	if res["result"] != "planted=yes" {
		t.Errorf("result %q; want the command run with the settings' env", res["result"])
	}
	for _, f := range []string{"hooked", "made"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v; want the hook and the command run", f, err)
		}
		os.Remove(filepath.Join(dir, f))
	}
	p.stdin.Close()
	p.wait()

	writeFile(t, filepath.Join(managed, "managed-settings.json"), `{"allowManagedPermissionRulesOnly":true,"allowManagedHooksOnly":true,"disableBypassPermissionsMode":"disable"}`)
	p = startFake(t, dir, env, append(askArgs, "--setting-sources=", "--strict-mcp-config")...)
	p.sendUser("fake:bash touch made && echo planted=$PLANTED")
	req, _ := p.until("can_use_tool", isType("control_request"))
	p.answer(req, map[string]any{"behavior": "deny", "message": "no"})
	if res, _ := p.result(); res["result"] != "tool error: no" {
		t.Errorf("result %q; want the host's deny", res["result"])
	}
	p.sendUser("fake:bash echo planted=$PLANTED")
	if res, _ := p.result(); res["result"] != "planted=" {
		t.Errorf("result %q; want no env from the unloaded settings", res["result"])
	}
	for _, f := range []string{"hooked", "made"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s exists; want neither the hook nor the command run", f)
		}
	}
}

// The SDK's hooks are callbacks of the initialize request, not settings
// hooks: the managed allowManagedHooksOnly (and a layer's disableAllHooks)
// leave them running, while a planted settings hook does not run.
func TestSDKHooksSurviveManagedHooksOnly(t *testing.T) {
	home, dir, managed := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(managed, "managed-settings.json"), `{"allowManagedHooksOnly":true,"allowManagedPermissionRulesOnly":true}`)
	writeFile(t, filepath.Join(home, ".claude", "settings.json"), `{"disableAllHooks":true,
		"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"touch settings-hook"}]}]}}`)
	p := startFake(t, dir, baseEnv(home, envManagedDir+"="+managed), "--setting-sources=user")
	p.send(`{"request_id":"i1","type":"control_request","request":{"subtype":"initialize","hooks":{"PreToolUse":[{"matcher":"Bash","hookCallbackIds":["hook_1"]}]}}}`)
	p.sendUser("fake:bash echo hi")
	req, _ := p.until("the hook callback", isType("control_request"))
	if body := req["request"].(map[string]any); body["subtype"] != "hook_callback" || body["callback_id"] != "hook_1" {
		t.Fatalf("got %v; want the SDK's PreToolUse callback", body)
	}
	p.answer(req, map[string]any{})
	if res, _ := p.result(); res["result"] != "hi" {
		t.Errorf("result %q; want hi", res["result"])
	}
	if _, err := os.Stat(filepath.Join(dir, "settings-hook")); err == nil {
		t.Error("the settings hook ran under allowManagedHooksOnly")
	}
}
