package claudecli

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

func recordedArgv(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(fixture(name + ".argv.json"))
	if err != nil {
		t.Fatal(err)
	}
	var argv []string
	if err := json.Unmarshal(data, &argv); err != nil {
		t.Fatal(err)
	}
	return argv
}

// The argv built for the options of a recorded SDK run is the argv the SDK
// built, flag for flag and in order.
func TestArgsMatchRecordings(t *testing.T) {
	tests := []struct {
		fixture string
		cfg     Config
	}{
		{"01-single-turn", Config{}},
		{"02-multi-turn", Config{Model: "claude-sonnet-4-5", SettingSources: []string{}}},
		{"03-resume", Config{Resume: "2c8e9ed0-c57e-4605-bc4c-d8315a8f81a4"}},
		{"03b-resume-session-at", Config{
			Resume:          "1136e566-5921-4965-90a3-7838ed10d293",
			SettingSources:  []string{},
			ResumeSessionAt: "4f5b6dc0-01c7-4986-8bca-4ebac800429b",
		}},
		{"04-mcp-tool", Config{
			MCPServers:                      map[string]MCPServer{"bridge": {Command: "python3", Args: []string{"<TOOLS>/mcp_bridge.py"}}},
			PermissionMode:                  PermissionBypass,
			AllowDangerouslySkipPermissions: true,
		}},
		{"05-hooks", Config{}},
		{"06-can-use-tool", Config{PermissionPromptTool: "stdio", PermissionMode: PermissionDefault}},
		{"17c-raw-midturn-during-tool", Config{PermissionMode: PermissionBypass, AllowDangerouslySkipPermissions: true}},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			got, err := tc.cfg.Args()
			if err != nil {
				t.Fatal(err)
			}
			if want := recordedArgv(t, tc.fixture); !reflect.DeepEqual(got, want) {
				t.Errorf("argv\n got %q\nwant %q", got, want)
			}
		})
	}
}

// bridged's full option set comes out in the SDK's order.
func TestArgsOrder(t *testing.T) {
	cfg := Config{
		Model:                           "m",
		Resume:                          "sid",
		AllowedTools:                    []string{"Bash", "mcp__bridge__*"},
		MCPServers:                      map[string]MCPServer{"bridge": {Command: "/app/agent-runner", Args: []string{"mcp"}, Env: map[string]string{"K": "V"}}},
		SettingSources:                  []string{"project", "user"},
		PermissionMode:                  PermissionBypass,
		AllowDangerouslySkipPermissions: true,
		AddDirs:                         []string{"/workspace/extra/a", "/workspace/extra/b"},
		ResumeSessionAt:                 "uuid",
	}
	got, err := cfg.Args()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
		"--model=m",
		"--resume=sid",
		"--allowedTools=Bash,mcp__bridge__*",
		"--mcp-config", `{"mcpServers":{"bridge":{"command":"/app/agent-runner","args":["mcp"],"env":{"K":"V"}}}}`,
		"--setting-sources=project,user",
		"--permission-mode=bypassPermissions",
		"--allow-dangerously-skip-permissions",
		"--add-dir=/workspace/extra/a",
		"--add-dir=/workspace/extra/b",
		"--resume-session-at=uuid",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("argv\n got %q\nwant %q", got, want)
	}
	// A profile that loads no settings file: empty sources, only the
	// --mcp-config servers, the flag settings last.
	got, err = Config{SettingSources: []string{}, StrictMCPConfig: true, PermissionMode: PermissionDefault, Settings: `{"env":{}}`}.Args()
	if err != nil {
		t.Fatal(err)
	}
	want = append(want[:5:5], "--setting-sources=", "--strict-mcp-config", "--permission-mode=default", `--settings={"env":{}}`)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("argv\n got %q\nwant %q", got, want)
	}
	if _, err := (Config{ResumeSessionAt: "uuid"}).Args(); err == nil {
		t.Error("resume-session-at without resume accepted; the CLI rejects it")
	}
}
