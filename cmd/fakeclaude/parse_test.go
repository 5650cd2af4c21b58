package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseDirectives(t *testing.T) {
	tests := []struct {
		name   string
		prompt string
		want   []directive
	}{
		{"none", "hello", nil},
		{"plain reply", "fake:reply hi there", []directive{{"reply", "hi there"}}},
		{"in order over lines", "fake:sleep 1s\nfake:reply done\nfake:pid",
			[]directive{{"sleep", "1s"}, {"reply", "done"}, {"pid", ""}}},
		{"anywhere in the text", "please fake:reply ok  \nthanks", []directive{{"reply", "ok"}}},
		{"two on one line", "fake:reply a fake:pid", []directive{{"reply", "a"}, {"pid", ""}}},
		{"unknown verb is text", "fake:dance now\nfake:replyX y", nil},
		{"bridged prompt, escaped", `<context timezone="UTC" now="2026-11-22T09:30:00Z"/>
<messages>
<message sender="Al &amp; Bo" time="2026-11-22T09:29:58Z">@Andy fake:tool send_message {&quot;text&quot;:&quot;a &lt;b&gt; &amp; c&quot;}</message>
</messages>`, []directive{{"tool", `send_message {"text":"a <b> & c"}`}}},
		{"several messages", `<messages>
<message sender="A" time="t">fake:reply one</message>
<message sender="B" time="t">fake:bash echo it&apos;s</message>
</messages>`, []directive{{"reply", "one"}, {"bash", "echo it's"}}},
		{"numeric entities", `<message sender="A" time="t">fake:reply x&#10;fake:pid &#x41;</message>`,
			[]directive{{"reply", "x"}, {"pid", "A"}}},
		{"directive inside the message text only", `<message sender="fake:reply no" time="t">fake:reply yes</message>`,
			[]directive{{"reply", "yes"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseDirectives(tc.prompt); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}

func TestDefaultReply(t *testing.T) {
	tests := []struct{ prompt, want string }{
		{"hello world", "echo: hello world"},
		{`<messages>
<message sender="A" time="t">first</message>
<message sender="B" time="t">@Andy what&apos;s &lt;up&gt;?</message>
</messages>`, "echo: @Andy what's <up>?"},
	}
	for _, tc := range tests {
		if got := defaultReply(userMsg{text: tc.prompt}); got != tc.want {
			t.Errorf("defaultReply(%q) = %q; want %q", tc.prompt, got, tc.want)
		}
	}
}

func TestUnescapeXML(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a &lt; b &gt; c", "a < b > c"},
		{"&amp;lt;", "&lt;"},
		{"&quot;&apos;", `"'`},
		{"&#65;&#x42;&#X43;", "ABC"},
		{"AT&T &unknown; & ;", "AT&T &unknown; & ;"},
		{"&#0; &#xFFFFFFFF;", "&#0; &#xFFFFFFFF;"},
	}
	for _, tc := range tests {
		if got := unescapeXML(tc.in); got != tc.want {
			t.Errorf("unescapeXML(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	bridged := []string{"--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
		"--permission-mode=bypassPermissions", "--allow-dangerously-skip-permissions",
		"--allowedTools=Bash,Read,mcp__bridge__*",
		"--mcp-config", `{"mcpServers":{"bridge":{"command":"/agent-runner","args":["mcp"],"env":{"BRIDGED_MCP_GROUP":"family"}}}}`,
		"--setting-sources=project,user", "--resume=abc", "--resume-session-at=def",
		"--add-dir=/workspace/extra/a", "--add-dir=/workspace/extra/b", "--model=claude-sonnet-4-5"}
	o, err := parseArgs(bridged)
	if err != nil {
		t.Fatalf("bridged's argv: %v", err)
	}
	if o.permissionMode != "bypassPermissions" || !o.allowSkip || o.resume != "abc" || o.resumeSessionAt != "def" ||
		o.model != "claude-sonnet-4-5" || len(o.addDirs) != 2 || o.mcpServers["bridge"].Env["BRIDGED_MCP_GROUP"] != "family" ||
		!reflect.DeepEqual(o.allowedTools, []string{"Bash", "Read", "mcp__bridge__*"}) ||
		!reflect.DeepEqual(o.settingSources, []string{"project", "user"}) {
		t.Errorf("got %+v; want every flag of bridged's argv", o)
	}

	base := []string{"--output-format", "stream-json", "--verbose", "--input-format", "stream-json"}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"fixture 16", []string{"-p", "--append-system-prompt", "APPENDED", "--model", "claude-sonnet-4-5"}, ""},
		{"fixture 12 space form", []string{"--permission-prompt-tool", "stdio", "--permission-mode", "default"}, ""},
		{"empty setting sources", []string{"--setting-sources="}, ""},
		{"unknown flag", []string{"--frobnicate"}, "unknown option '--frobnicate'"},
		{"positional prompt", []string{"hello"}, "unexpected argument 'hello'"},
		{"bad permission mode", []string{"--permission-mode=yolo"}, "argument 'yolo' is invalid"},
		{"missing value", []string{"--model"}, "argument missing"},
		{"value on a bool flag", []string{"--verbose=yes"}, "does not take a value"},
		{"resume-session-at alone", []string{"--resume-session-at=x"}, "requires --resume"},
		{"bad mcp config", []string{"--mcp-config", "{nope"}, "Invalid MCP configuration"},
		{"mcp server without command", []string{"--mcp-config", `{"mcpServers":{"x":{}}}`}, "command: Required"},
		{"bad setting source", []string{"--setting-sources=everything"}, "Invalid setting source"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseArgs(append(append([]string{}, base...), tc.args...))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got error %v; want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got error %v; want one containing %q", err, tc.wantErr)
			}
		})
	}
	if _, err := parseArgs([]string{"--output-format", "stream-json", "--input-format", "stream-json"}); err == nil ||
		!strings.Contains(err.Error(), "requires --verbose") {
		t.Errorf("got %v without --verbose; want the CLI's --verbose error", err)
	}
}

func TestBuiltinShell(t *testing.T) {
	env := []string{"HOME=/home/agent", "ANTHROPIC_API_KEY=sk-secret", "CLAUDE_CODE_OAUTH_TOKEN=tok", "PATH=/bin"}
	tests := []struct {
		cmd      string
		want     string
		wantCode int
	}{
		{"env", "HOME=/home/agent\nANTHROPIC_API_KEY=sk-secret\nCLAUDE_CODE_OAUTH_TOKEN=tok\nPATH=/bin\n", 0},
		{"unset ANTHROPIC_API_KEY CLAUDE_CODE_OAUTH_TOKEN; env", "HOME=/home/agent\nPATH=/bin\n", 0},
		{"unset ANTHROPIC_API_KEY CLAUDE_CODE_OAUTH_TOKEN 2>/dev/null; env", "HOME=/home/agent\nPATH=/bin\n", 0},
		{"export A=1 && echo hi > /dev/null && unset HOME PATH ANTHROPIC_API_KEY CLAUDE_CODE_OAUTH_TOKEN; env", "hi\nA=1\n", 0},
		{"curl example.com", "sh: 1: curl: not found\n", 127},
		{"false", "", 1},
	}
	for _, tc := range tests {
		got, code := builtinShell(tc.cmd, env)
		if got != tc.want || code != tc.wantCode {
			t.Errorf("builtinShell(%q) = %q, %d; want %q, %d", tc.cmd, got, code, tc.want, tc.wantCode)
		}
	}
	if env[1] != "ANTHROPIC_API_KEY=sk-secret" {
		t.Errorf("builtinShell changed the caller's environment")
	}
}

func TestSlugAndMatcher(t *testing.T) {
	if got := slug("/tmp/work/my.proj"); got != "-tmp-work-my-proj" {
		t.Errorf("slug = %q; want -tmp-work-my-proj", got)
	}
	if got := slug("/workspace/group"); got != "-workspace-group" {
		t.Errorf("slug = %q; want -workspace-group", got)
	}
	for _, tc := range []struct {
		pattern, tool string
		want          bool
	}{
		{"Bash", "Bash", true}, {"", "Bash", true}, {"*", "Bash", true}, {"Write|Bash", "Bash", true},
		{"Write|Edit", "Bash", false}, {"Ba.*", "Bash", true}, {"Bas", "Bash", false},
	} {
		if got := matches(tc.pattern, tc.tool); got != tc.want {
			t.Errorf("matches(%q, %q) = %v; want %v", tc.pattern, tc.tool, got, tc.want)
		}
	}
}
