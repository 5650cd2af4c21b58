package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/claudecli"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/rs/zerolog"
)

func TestClaudeEnv(t *testing.T) {
	environ := []string{
		"HOME=/home/agent",
		"PATH=/usr/bin",
		"IS_SANDBOX=1",
		"CLAUDECODE=1",
		"NODE_OPTIONS=--inspect",
		"ANTHROPIC_API_KEY=from-the-runner",
		"BRIDGED_AGENT_IPC_DIR=/workspace/ipc",
		"CLAUDE_CODE_MAX_RETRIES=50",
		"ANTHROPIC_BASE_URL=http://127.0.0.1:1",
	}
	secrets := map[string]string{
		"ANTHROPIC_API_KEY":       "sk-secret",
		"CLAUDE_CODE_OAUTH_TOKEN": "tok",
		"BAD NAME":                "x",
	}
	env, names, skipped := claudeEnv(environ, secrets)
	want := []string{
		"HOME=/home/agent",
		"PATH=/usr/bin",
		"IS_SANDBOX=1",
		"ANTHROPIC_BASE_URL=http://127.0.0.1:1",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=3",
		"CLAUDE_CODE_SDK_READS_SESSION_STATE=1",
		"CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD=1",
		"ANTHROPIC_API_KEY=sk-secret",
		"CLAUDE_CODE_OAUTH_TOKEN=tok",
	}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("env\n got %q\nwant %q", env, want)
	}
	if !reflect.DeepEqual(names, []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}) {
		t.Errorf("secret names %q", names)
	}
	if !reflect.DeepEqual(skipped, []string{"BAD NAME"}) {
		t.Errorf("skipped %q; want the unusable name", skipped)
	}
}

func TestUnsetPrefix(t *testing.T) {
	tests := []struct {
		names []string
		want  string
	}{
		{nil, "unset ANTHROPIC_API_KEY CLAUDE_CODE_OAUTH_TOKEN; "},
		{[]string{"ANTHROPIC_API_KEY", "GITHUB_TOKEN"}, "unset ANTHROPIC_API_KEY CLAUDE_CODE_OAUTH_TOKEN GITHUB_TOKEN; "},
	}
	for _, tc := range tests {
		if got := unsetPrefix(tc.names); got != tc.want {
			t.Errorf("unsetPrefix(%q) = %q; want %q", tc.names, got, tc.want)
		}
	}
}

func TestBashHookRewritesCommand(t *testing.T) {
	hook := bashHook(unsetPrefix(nil), zerolog.Nop())
	tests := []struct {
		name  string
		input string
		want  string // updatedInput, or "" for no opinion
	}{
		{
			name:  "keeps other fields",
			input: `{"command":"env | sort","description":"show env","timeout":5000}`,
			want:  `{"command":"unset ANTHROPIC_API_KEY CLAUDE_CODE_OAUTH_TOKEN; env | sort","description":"show env","timeout":5000}`,
		},
		{name: "not an object", input: `"env"`},
		{name: "no command", input: `{"description":"x"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := hook(context.Background(), claudecli.HookInput{ToolName: "Bash", ToolInput: json.RawMessage(tc.input)})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(out)
			var got struct {
				HookSpecificOutput struct {
					HookEventName string          `json:"hookEventName"`
					UpdatedInput  json.RawMessage `json:"updatedInput"`
				} `json:"hookSpecificOutput"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if string(b) != "{}" {
					t.Errorf("answer %s; want {}", b)
				}
				return
			}
			var g, w any
			_ = json.Unmarshal(got.HookSpecificOutput.UpdatedInput, &g)
			_ = json.Unmarshal([]byte(tc.want), &w)
			if !reflect.DeepEqual(g, w) || got.HookSpecificOutput.HookEventName != "PreToolUse" {
				t.Errorf("answer %s; want updatedInput %s", b, tc.want)
			}
		})
	}
}

func newArchiver(t *testing.T) *archiver {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return &archiver{
		dir:       filepath.Join(t.TempDir(), "conversations"),
		assistant: "Jarvis",
		loc:       loc,
		now:       func() time.Time { return time.Date(2026, 11, 22, 23, 30, 0, 0, time.UTC) },
		log:       zerolog.Nop(),
	}
}

func TestArchiveRecordedTranscript(t *testing.T) {
	a := newArchiver(t)
	transcript := filepath.Join("..", "testdata", "session-transcript.jsonl")
	out, err := a.hook(context.Background(), claudecli.HookInput{TranscriptPath: transcript, Trigger: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(out); string(b) != `{"continue":true}` {
		t.Errorf("PreCompact answer %s; want {\"continue\":true}", b)
	}
	// 23:30 UTC is already the 23rd in Berlin.
	path := filepath.Join(a.dir, "2026-11-23-hello-world.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("archive: %v", err)
	}
	want := "# Conversation\n\nArchived: Nov 23, 2026 12:30 AM CET\n\n---\n\n" +
		"**User**: hello world\n\n**Jarvis**: pong: hello world\n\n" +
		"**User**: what did I say before?\n\n**Jarvis**: pong: what did I say before?\n\n"
	if string(data) != want {
		t.Errorf("archive\n got %q\nwant %q", data, want)
	}
	// A second compaction the same day does not overwrite the first.
	second, err := a.archive(transcript)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(second) != "2026-11-23-hello-world-2.md" {
		t.Errorf("second archive %s; want a new file", second)
	}
}

func TestArchiveTitles(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  string // file name; "" for no file
	}{
		{
			name: "summary wins",
			lines: []string{
				`{"type":"summary","summary":"Trip to Lisbon: plans & costs"}`,
				`{"type":"user","message":{"role":"user","content":"hi"}}`,
			},
			want: "2026-11-23-trip-to-lisbon-plans-costs.md",
		},
		{
			name: "bridged prompt markup is stripped",
			lines: []string{
				`{"type":"user","message":{"role":"user","content":"<context timezone=\"UTC\" now=\"x\"/>\n<messages>\n<message sender=\"Al\" time=\"t\">What&apos;s the plan?</message>\n</messages>"}}`,
				`{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]}}`,
			},
			want: "2026-11-23-what-s-the-plan.md",
		},
		{
			name:  "no words gives the time",
			lines: []string{`{"type":"user","message":{"role":"user","content":"!!!"}}`},
			want:  "2026-11-23-conversation-0030.md",
		},
		{
			name:  "nothing to archive",
			lines: []string{`{"type":"queue-operation"}`, `not json`, `{"type":"user","isMeta":true,"message":{"role":"user","content":"meta"}}`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newArchiver(t)
			transcript := filepath.Join(t.TempDir(), "s.jsonl")
			if err := os.WriteFile(transcript, []byte(strings.Join(tc.lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			path, err := a.archive(transcript)
			if err != nil {
				t.Fatal(err)
			}
			if got := filepath.Base(path); tc.want == "" && path != "" || tc.want != "" && got != tc.want {
				t.Errorf("archive %q; want %q", path, tc.want)
			}
		})
	}
	if _, err := newArchiver(t).archive(filepath.Join(t.TempDir(), "missing.jsonl")); err == nil {
		t.Error("missing transcript archived without error")
	}
}

func TestSlugify(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Hello, World!", "hello-world"},
		{"  --Ünïcode naïve--  ", "n-code-na-ve"},
		{strings.Repeat("abc ", 30), strings.TrimRight(strings.Repeat("abc-", 13)[:50], "-")},
		{"", ""},
	}
	for _, tc := range tests {
		if got := slugify(tc.in); got != tc.want {
			t.Errorf("slugify(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestAllowedToolsIncludeBridge(t *testing.T) {
	if allow, _ := ipc.ProfileRules(ProfileFull); !slices.Contains(allow, "mcp__bridge__*") {
		t.Errorf("allowed tools %v lack the bridge server's tools", allow)
	}
}
