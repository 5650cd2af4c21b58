package claudecli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// streamFlags always come first, exactly as the SDK writes them.
var streamFlags = [...]string{"--output-format", "stream-json", "--verbose", "--input-format", "stream-json"}

// Permission modes accepted by --permission-mode.
const (
	PermissionDefault = "default"
	PermissionBypass  = "bypassPermissions"
)

// MCPServer is one stdio MCP server in --mcp-config.
type MCPServer struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Config holds the CLI options bridged uses. Args turns them into argv in the
// SDK's order; zero values are left out.
type Config struct {
	Model string
	// PermissionPromptTool is "stdio" to have can_use_tool requests sent to
	// the host.
	PermissionPromptTool string
	Resume               string
	AllowedTools         []string
	// DisallowedTools are removed from the model's tools.
	DisallowedTools []string
	MCPServers      map[string]MCPServer
	// SettingSources: nil leaves the flag out; an empty non-nil slice gives
	// "--setting-sources=" (load no filesystem settings).
	SettingSources []string
	// StrictMCPConfig: only the servers of --mcp-config, none from .mcp.json
	// or any settings file.
	StrictMCPConfig                 bool
	PermissionMode                  string
	AllowDangerouslySkipPermissions bool
	AddDirs                         []string
	ResumeSessionAt                 string
	// Settings is passed with --settings: a settings file or inline JSON
	// (the CLI's flag settings, loaded whatever SettingSources says).
	Settings string
}

// Args returns the argv after the executable: the three stream-json flags,
// then each option in `--flag=value` form in the order the SDK uses.
func (c Config) Args() ([]string, error) {
	args := append([]string(nil), streamFlags[:]...)
	add := func(flag, value string) {
		if value != "" {
			args = append(args, flag+"="+value)
		}
	}
	add("--model", c.Model)
	add("--permission-prompt-tool", c.PermissionPromptTool)
	add("--resume", c.Resume)
	add("--allowedTools", strings.Join(c.AllowedTools, ","))
	add("--disallowedTools", strings.Join(c.DisallowedTools, ","))
	if len(c.MCPServers) > 0 {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(struct {
			MCPServers map[string]MCPServer `json:"mcpServers"`
		}{c.MCPServers}); err != nil {
			return nil, fmt.Errorf("encode mcp config: %w", err)
		}
		args = append(args, "--mcp-config", strings.TrimSuffix(buf.String(), "\n"))
	}
	if c.SettingSources != nil {
		args = append(args, "--setting-sources="+strings.Join(c.SettingSources, ","))
	}
	if c.StrictMCPConfig {
		args = append(args, "--strict-mcp-config")
	}
	add("--permission-mode", c.PermissionMode)
	if c.AllowDangerouslySkipPermissions {
		args = append(args, "--allow-dangerously-skip-permissions")
	}
	for _, d := range c.AddDirs {
		add("--add-dir", d)
	}
	if c.ResumeSessionAt != "" && c.Resume == "" {
		return nil, fmt.Errorf("resume-session-at needs resume")
	}
	add("--resume-session-at", c.ResumeSessionAt)
	add("--settings", c.Settings)
	return args, nil
}
