package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// answer writes the host's answer to a control request.
func (p *proc) answer(req map[string]any, response map[string]any) {
	p.t.Helper()
	b, _ := json.Marshal(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": req["request_id"], "response": response}})
	p.send(string(b))
}

var askArgs = []string{"--permission-prompt-tool=stdio", "--permission-mode=default"}

func TestReadOnlyCommandRunsWithoutAsking(t *testing.T) {
	p := startFake(t, t.TempDir(), baseEnv(t.TempDir()), askArgs...)
	p.sendUser("fake:bash echo hi")
	res, lines := p.result()
	for _, l := range lines {
		if l["type"] == "control_request" {
			t.Fatalf("read-only command asked: %v", l)
		}
	}
	if res["result"] != "hi" {
		t.Errorf("result %q; want hi", res["result"])
	}
}

func TestWriteCommandAsksAndRunsTheUpdatedInput(t *testing.T) {
	dir := t.TempDir()
	p := startFake(t, dir, baseEnv(t.TempDir()), askArgs...)
	p.sendUser("fake:bash touch made && echo asked")
	req, _ := p.until("can_use_tool", isType("control_request"))
	body := req["request"].(map[string]any)
	if body["subtype"] != "can_use_tool" || body["tool_name"] != "Bash" || body["input"].(map[string]any)["command"] != "touch made && echo asked" {
		t.Fatalf("got %v; want can_use_tool for the command", body)
	}
	p.answer(req, map[string]any{"behavior": "allow", "updatedInput": map[string]any{"command": "touch other && echo updated"}})
	res, _ := p.result()
	if res["result"] != "updated" {
		t.Errorf("result %q; want the updated input's output", res["result"])
	}
	if _, err := os.Stat(filepath.Join(dir, "made")); err == nil {
		t.Error("the original command ran; want the updated input only")
	}
	if _, err := os.Stat(filepath.Join(dir, "other")); err != nil {
		t.Errorf("the updated command did not run: %v", err)
	}
}

func TestDenyReachesTheModelAsTheToolError(t *testing.T) {
	dir := t.TempDir()
	p := startFake(t, dir, baseEnv(t.TempDir()), askArgs...)
	p.sendUser("fake:write note.txt hello")
	req, _ := p.until("can_use_tool", isType("control_request"))
	if b := req["request"].(map[string]any); b["tool_name"] != "Write" || b["blocked_path"] != filepath.Join(dir, "note.txt") {
		t.Fatalf("got %v; want can_use_tool for Write with the blocked path", b)
	}
	p.answer(req, map[string]any{"behavior": "deny", "message": "not approved by the owner"})
	res, lines := p.result()
	if res["result"] != "tool error: not approved by the owner" {
		t.Errorf("result %q; want the deny message as the tool error", res["result"])
	}
	found := false
	for _, l := range lines {
		if l["type"] == "user" && strings.Contains(mustJSON(l), `"is_error":true`) && strings.Contains(mustJSON(l), "not approved by the owner") {
			found = true
		}
	}
	if !found {
		t.Error("no is_error tool result carrying the deny message")
	}
	if _, err := os.Stat(filepath.Join(dir, "note.txt")); err == nil {
		t.Error("the denied write happened")
	}
}

func TestFetchAsksAndDisallowedToolDoesNotExist(t *testing.T) {
	p := startFake(t, t.TempDir(), baseEnv(t.TempDir()), append(askArgs, "--disallowedTools=Bash")...)
	p.sendUser("fake:fetch https://example.com/x")
	req, _ := p.until("can_use_tool", isType("control_request"))
	if b := req["request"].(map[string]any); b["tool_name"] != "WebFetch" {
		t.Fatalf("got %v; want can_use_tool for WebFetch", b)
	}
	p.answer(req, map[string]any{"behavior": "allow"})
	if res, _ := p.result(); res["result"] != "fetched https://example.com/x" {
		t.Errorf("result %q", res["result"])
	}
	p.sendUser("fake:bash echo hi")
	if res, _ := p.result(); res["result"] != "tool error: No such tool available: Bash" {
		t.Errorf("result %q; want no such tool", res["result"])
	}
}

func TestAllowedToolAndBypassDoNotAsk(t *testing.T) {
	for _, args := range [][]string{
		append(append([]string{}, askArgs...), "--allowedTools=Bash,Write"),
		{"--permission-mode=bypassPermissions", "--allow-dangerously-skip-permissions"},
	} {
		p := startFake(t, t.TempDir(), baseEnv(t.TempDir(), "IS_SANDBOX=1"), args...)
		p.sendUser("fake:bash touch x && echo ran")
		res, lines := p.result()
		for _, l := range lines {
			if l["type"] == "control_request" {
				t.Fatalf("%v: asked: %v", args, l)
			}
		}
		if res["result"] != "ran" {
			t.Errorf("%v: result %q", args, res["result"])
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
