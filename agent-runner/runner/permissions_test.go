package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/claudecli"
	"github.com/bridged-app/bridged/internal/ipc"
)

func TestProfileFlags(t *testing.T) {
	for _, tc := range []struct {
		profile, mode, prompt string
		allowed, notAllowed   []string
		disallowed            []string
	}{
		{ProfileFull, claudecli.PermissionBypass, "", []string{"Bash", "Write", "WebFetch", bridgeTools}, nil, nil},
		{ProfileAsk, claudecli.PermissionDefault, "stdio", []string{"Read", "Grep", "WebSearch", bridgeTools}, []string{"Bash", "Write", "Edit", "WebFetch"}, nil},
		{ProfileReadOnly, claudecli.PermissionDefault, "stdio", []string{"Read", bridgeTools}, []string{"Bash", "Write"}, []string{"Write", "Edit", "WebFetch"}},
		{ProfileChat, claudecli.PermissionDefault, "stdio", []string{bridgeTools}, []string{"Read"}, []string{"Bash", "Read", "Write", "WebFetch", "WebSearch"}},
	} {
		var c claudecli.Config
		profileConfig(&c, tc.profile)
		if c.PermissionMode != tc.mode || c.PermissionPromptTool != tc.prompt {
			t.Errorf("%s: mode %q prompt %q; want %q %q", tc.profile, c.PermissionMode, c.PermissionPromptTool, tc.mode, tc.prompt)
		}
		for _, x := range tc.allowed {
			if !slices.Contains(c.AllowedTools, x) {
				t.Errorf("%s: %s not allowed", tc.profile, x)
			}
		}
		for _, x := range tc.notAllowed {
			if slices.Contains(c.AllowedTools, x) {
				t.Errorf("%s: %s pre-allowed", tc.profile, x)
			}
		}
		for _, x := range tc.disallowed {
			if !slices.Contains(c.DisallowedTools, x) {
				t.Errorf("%s: %s not disallowed", tc.profile, x)
			}
		}
	}
}

func TestDecide(t *testing.T) {
	work := t.TempDir()
	extra := t.TempDir()
	if err := os.Symlink(extra, filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	var asked []string
	p := &permissions{profile: ProfileAsk, workDir: work, prefix: "unset X; ", log: zerolog.Nop(),
		ask: func(_ context.Context, a ipc.AskApprovalArgs) (ipc.ApprovalDecision, error) {
			asked = append(asked, a.Tool+" "+string(a.Input))
			if strings.Contains(string(a.Input), "ok-me") {
				return ipc.ApprovalDecision{Allow: true, ID: "abcd"}, nil
			}
			return ipc.ApprovalDecision{Message: "not approved by the owner"}, nil
		}}
	req := func(tool string, input any) claudecli.ToolPermissionRequest {
		b, _ := json.Marshal(input)
		return claudecli.ToolPermissionRequest{ToolName: tool, Input: b, ToolUseID: "tu"}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		req      claudecli.ToolPermissionRequest
		allow    bool
		asks     bool
		contains string // in the updated input (allow) or message (deny)
	}{
		{"write in own folder", req("Write", map[string]string{"file_path": filepath.Join(work, "a.txt")}), true, false, "a.txt"},
		{"write through a link to a mount", req("Write", map[string]string{"file_path": filepath.Join(work, "link", "a.txt")}), false, true, "not approved"},
		{"write to the agent's settings", req("Edit", map[string]string{"file_path": filepath.Join(work, ".claude", "settings.json")}), false, true, "not approved"},
		{"write elsewhere", req("Write", map[string]string{"file_path": "/workspace/extra/x"}), false, true, "not approved"},
		{"approved command gets the prefix", req("Bash", map[string]string{"command": "touch ok-me"}), true, true, "unset X; touch ok-me"},
		{"denied command", req("Bash", map[string]string{"command": "rm -rf /"}), false, true, "not approved by the owner"},
		{"web fetch", req("WebFetch", map[string]string{"url": "https://x"}), false, true, "not approved"},
		{"bridge tool", req("mcp__bridge__send_message", map[string]string{"text": "hi"}), true, false, "hi"},
	} {
		asked = nil
		res, err := p.decide(ctx, tc.req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (res.Behavior == claudecli.BehaviorAllow) != tc.allow || (len(asked) > 0) != tc.asks {
			t.Errorf("%s: %+v, asked %v; want allow=%v asks=%v", tc.name, res, asked, tc.allow, tc.asks)
		}
		got := res.Message
		if tc.allow {
			got = string(res.UpdatedInput)
		}
		if !strings.Contains(got, tc.contains) {
			t.Errorf("%s: %q does not contain %q", tc.name, got, tc.contains)
		}
	}
	for _, profile := range []string{ProfileReadOnly, ProfileChat} {
		asked = nil
		q := &permissions{profile: profile, workDir: work, ask: p.ask, log: zerolog.Nop()}
		res, _ := q.decide(ctx, req("Write", map[string]string{"file_path": filepath.Join(work, "a")}))
		if res.Behavior != claudecli.BehaviorDeny || len(asked) != 0 {
			t.Errorf("%s: %+v asked %v; want denied without asking", profile, res, asked)
		}
	}
}
