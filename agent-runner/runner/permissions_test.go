package runner

import (
	"context"
	"encoding/json"
	"errors"
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
		{ProfileFull, claudecli.PermissionBypass, "", []string{"Bash", "Write", "WebFetch", ipc.BridgeTools}, nil, nil},
		{ProfileAsk, claudecli.PermissionDefault, "stdio", []string{"Read", "Grep", "WebSearch", ipc.BridgeTools}, []string{"Bash", "Write", "Edit", "WebFetch"}, nil},
		{ProfileReadOnly, claudecli.PermissionDefault, "stdio", []string{"Read", ipc.BridgeTools}, []string{"Bash", "Write"}, []string{"Write", "Edit", "WebFetch"}},
		{ProfileChat, claudecli.PermissionDefault, "stdio", []string{ipc.BridgeTools}, []string{"Read"}, []string{"Bash", "Read", "Write", "WebFetch", "WebSearch"}},
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
	// Dangling links, planted while the group was full: to its own
	// settings, to a directory that does not exist yet, relative ones.
	for name, target := range map[string]string{
		"to-settings":  filepath.Join(work, ".claude", "settings.json"),
		"to-ipc":       filepath.Join(extra, "ipc", "requests", "forged.json"),
		"rel-settings": ".claude/settings.local.json",
		"rel-up":       "../" + filepath.Base(extra) + "/x",
		"loop-a":       "loop-b",
		"loop-b":       "loop-a",
		"to-dir-link":  "dirlink/settings.json",
		"dirlink":      ".claude",
		"plain-link":   "sub/ok.txt",
	} {
		if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(work, "sub"), 0o755); err != nil {
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
		{"dangling link to the settings", req("Write", map[string]string{"file_path": filepath.Join(work, "to-settings")}), false, true, "not approved"},
		{"dangling link out of the folder", req("Write", map[string]string{"file_path": filepath.Join(work, "to-ipc")}), false, true, "not approved"},
		{"relative dangling link to the settings", req("Edit", map[string]string{"file_path": filepath.Join(work, "rel-settings")}), false, true, "not approved"},
		{"relative link up and out", req("Write", map[string]string{"file_path": filepath.Join(work, "rel-up")}), false, true, "not approved"},
		{"link loop", req("Write", map[string]string{"file_path": filepath.Join(work, "loop-a")}), false, true, "not approved"},
		{"through a dangling directory link", req("Write", map[string]string{"file_path": filepath.Join(work, "to-dir-link")}), false, true, "not approved"},
		{"nested .claude", req("Write", map[string]string{"file_path": filepath.Join(work, "pkg", ".claude", "skills", "x", "SKILL.md")}), false, true, "not approved"},
		{"nested .mcp.json", req("Write", map[string]string{"file_path": filepath.Join(work, "pkg", ".mcp.json")}), false, true, "not approved"},
		{"notebook in .claude", req("NotebookEdit", map[string]string{"notebook_path": filepath.Join(work, "a", ".claude", "n.ipynb")}), false, true, "not approved"},
		{"dangling link in the folder", req("Write", map[string]string{"file_path": filepath.Join(work, "plain-link")}), true, false, "plain-link"},
		{"a name that goes up and out", req("Write", map[string]string{"file_path": work + "/sub/../../x"}), false, true, "not approved"},
		{"up from a link's target", req("Write", map[string]string{"file_path": work + "/link/../" + filepath.Base(work) + "-x"}), false, true, "not approved"},
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

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	mk := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "d", "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mk("d/e", "de")
	mk("../../x", "d/e/up")
	mk("/nowhere/y", "abs")
	mk("self", "self")
	mk("d/e", "de2")
	for _, tc := range []struct{ in, want string }{
		{"de/new", filepath.Join(dir, "d", "e", "new")},
		{"d/e/up", filepath.Join(dir, "x")},
		{"de/up", filepath.Join(dir, "x")},
		{"abs", "/nowhere/y"},
		{"new/deeper/z", filepath.Join(dir, "new", "deeper", "z")},
		{"self", ""},
		{"file/x", ""},
		{"new/../x", ""},
		{"de2/../x", filepath.Join(dir, "d", "x")},
	} {
		got, err := resolve(dir + "/" + tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("resolve(%s) = %q; want it unresolved", tc.in, got)
			}
			continue
		}
		want, _ := filepath.EvalSymlinks(filepath.Dir(dir))
		want = filepath.Join(want, strings.TrimPrefix(tc.want, filepath.Dir(dir)))
		if tc.want == "/nowhere/y" {
			want = tc.want
		}
		if err != nil || got != want {
			t.Errorf("resolve(%s) = %q, %v; want %q", tc.in, got, err, want)
		}
	}
}

// The host's asker announces the call on stdout before it writes the
// request, and a refusal's words are what the model is told.
func TestHostAskerAnnouncesFirst(t *testing.T) {
	var order []string
	announce := func(ev ipc.Event) { order = append(order, string(ev.Type)+" "+ev.Tool+" "+ev.ToolUseID) }
	call := func(_ context.Context, req ipc.Request) (ipc.Response, error) {
		a := req.Args.(ipc.AskApprovalArgs)
		order = append(order, "request "+a.Tool+" "+a.ToolUseID)
		return ipc.ErrorResponse(req.ID, errors.New("approval refused: 3 approval requests of this group are open already")), nil
	}
	p := &permissions{profile: ProfileAsk, workDir: t.TempDir(), log: zerolog.Nop(), ask: hostAsker(call, announce)}
	b, _ := json.Marshal(map[string]string{"command": "make"})
	res, err := p.decide(context.Background(), claudecli.ToolPermissionRequest{ToolName: "Bash", Input: b, ToolUseID: "toolu_7"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"approval_wait Bash toolu_7", "request Bash toolu_7"}; !slices.Equal(order, want) {
		t.Errorf("order %q; want %q", order, want)
	}
	if res.Behavior != claudecli.BehaviorDeny || !strings.Contains(res.Message, "3 approval requests of this group are open already") {
		t.Errorf("result %+v; want denied with the host's words", res)
	}
	// A call without a usable id gets one of the runner's, the same in
	// the announcement and the request.
	order = nil
	if _, err := p.decide(context.Background(), claudecli.ToolPermissionRequest{ToolName: "Bash", Input: b}); err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || !strings.HasPrefix(order[0], "approval_wait Bash bridged-") || order[0][len("approval_wait"):] != order[1][len("request"):] {
		t.Errorf("order %q; want one made-up id in both", order)
	}
}
