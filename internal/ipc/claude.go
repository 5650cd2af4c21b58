package ipc

import "maps"

// What claude reads as its configuration comes from bridged alone (DESIGN
// §16): outside the full profile the runner loads no settings file the
// agent can write, and the daemon mounts a managed (policy) settings file
// of its own, read-only, where the CLI looks for one. Both sides build it
// from what is below.

// Tool profiles, as RunInput.Tools names them; empty or unknown is full.
const (
	ProfileFull     = "full"
	ProfileAsk      = "ask"
	ProfileReadOnly = "read-only"
	ProfileChat     = "chat"
)

// NormProfile maps an unknown or empty profile to full, the behaviour of a
// host that does not name one.
func NormProfile(p string) string {
	switch p {
	case ProfileAsk, ProfileReadOnly, ProfileChat:
		return p
	}
	return ProfileFull
}

// ContainerManagedSettings is where claude reads its managed settings on
// Linux; the daemon mounts its own file there, read-only.
const ContainerManagedSettings = "/etc/claude-code/managed-settings.json"

// BridgeTools is the permission rule naming every tool of bridged's own MCP
// server (named "bridge" in the runner's --mcp-config).
const BridgeTools = "mcp__bridge__*"

// quietTools run without asking in the ask and read-only profiles: they
// read, search, plan or run sub-agents (whose own tool calls go through the
// same rules).
var quietTools = []string{
	"Read", "Glob", "Grep", "WebSearch", "Task", "TaskOutput", "TaskStop",
	"TodoWrite", "ToolSearch", "Skill",
}

// BuiltinTools is every built-in tool bridged lets an agent have.
func BuiltinTools() []string {
	return []string{
		"Bash", "Read", "Write", "Edit", "Glob", "Grep", "WebSearch", "WebFetch",
		"Task", "TaskOutput", "TaskStop", "TeamCreate", "TeamDelete", "SendMessage",
		"TodoWrite", "ToolSearch", "Skill", "NotebookEdit",
	}
}

// ProfileRules returns the permission rules of profile: allow, the tools
// that run without asking, and deny, the tools the agent does not have.
// Every other tool call is settled by the runner's can_use_tool answer.
// Write tools (Write, Edit, NotebookEdit) and WebFetch are never allowed
// outside full.
func ProfileRules(profile string) (allow, deny []string) {
	switch NormProfile(profile) {
	case ProfileAsk:
		return append(append([]string{}, quietTools...), "TeamCreate", "TeamDelete", "SendMessage", BridgeTools), nil
	case ProfileReadOnly:
		return append(append([]string{}, quietTools...), BridgeTools),
			[]string{"Write", "Edit", "NotebookEdit", "WebFetch", "TeamCreate", "TeamDelete", "SendMessage"}
	case ProfileChat:
		return []string{BridgeTools}, BuiltinTools()
	}
	return append(BuiltinTools(), BridgeTools), nil
}

// settingsEnv is the environment a group's claude gets from bridged's
// settings (nanoclaw's settings.json): agent teams on, CLAUDE.md files of
// --add-dir directories read, auto memory on.
var settingsEnv = map[string]string{
	"CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS":         "1",
	"CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD": "1",
	"CLAUDE_CODE_DISABLE_AUTO_MEMORY":              "0",
}

// SettingsEnv returns the env block of bridged's claude settings: written
// into the group's settings.json (the full profile loads it) and passed
// with --settings in the other profiles, which load no settings file.
func SettingsEnv() map[string]string { return maps.Clone(settingsEnv) }
