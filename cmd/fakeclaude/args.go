//lint:file-ignore ST1005 the errors are the real claude CLI's messages, word for word, as its callers see them

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// options are the parsed command-line flags.
type options struct {
	outputFormat       string
	inputFormat        string
	verbose            bool
	print              bool
	version            bool
	permissionMode     string
	skipPermissions    bool // --dangerously-skip-permissions
	allowSkip          bool // --allow-dangerously-skip-permissions
	allowedTools       []string
	disallowedTools    []string
	mcpServers         map[string]mcpServerConfig
	settingSources     []string // nil: the flag was not given (every source loads)
	strictMCP          bool     // --strict-mcp-config
	settings           string   // --settings: a file or inline JSON
	resume             string
	resumeSessionAt    string
	addDirs            []string
	model              string
	appendSystemPrompt string
	systemPrompt       string
	permissionPrompt   string
}

// mcpServerConfig is one entry of --mcp-config's mcpServers.
type mcpServerConfig struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

type flagKind int

const (
	boolFlag flagKind = iota
	valueFlag
	optionalValueFlag // --resume [id]
)

type flagSpec struct {
	kind flagKind
	set  func(o *options, v string) error
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

var permissionModes = []string{"acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "manual", "plan"}

func flagTable() map[string]flagSpec {
	str := func(dst func(o *options) *string) flagSpec {
		return flagSpec{kind: valueFlag, set: func(o *options, v string) error { *dst(o) = v; return nil }}
	}
	boolean := func(dst func(o *options) *bool) flagSpec {
		return flagSpec{kind: boolFlag, set: func(o *options, _ string) error { *dst(o) = true; return nil }}
	}
	allowed := flagSpec{kind: valueFlag, set: func(o *options, v string) error {
		o.allowedTools = append(o.allowedTools, splitList(v)...)
		return nil
	}}
	disallowed := flagSpec{kind: valueFlag, set: func(o *options, v string) error {
		o.disallowedTools = append(o.disallowedTools, splitList(v)...)
		return nil
	}}
	printFlag := boolean(func(o *options) *bool { return &o.print })
	versionFlag := boolean(func(o *options) *bool { return &o.version })
	return map[string]flagSpec{
		"--output-format":                      str(func(o *options) *string { return &o.outputFormat }),
		"--input-format":                       str(func(o *options) *string { return &o.inputFormat }),
		"--verbose":                            boolean(func(o *options) *bool { return &o.verbose }),
		"-p":                                   printFlag,
		"--print":                              printFlag,
		"-v":                                   versionFlag,
		"--version":                            versionFlag,
		"--dangerously-skip-permissions":       boolean(func(o *options) *bool { return &o.skipPermissions }),
		"--allow-dangerously-skip-permissions": boolean(func(o *options) *bool { return &o.allowSkip }),
		"--allowedTools":                       allowed,
		"--allowed-tools":                      allowed,
		"--disallowedTools":                    disallowed,
		"--disallowed-tools":                   disallowed,
		"--model":                              str(func(o *options) *string { return &o.model }),
		"--append-system-prompt":               str(func(o *options) *string { return &o.appendSystemPrompt }),
		"--system-prompt":                      str(func(o *options) *string { return &o.systemPrompt }),
		"--permission-prompt-tool":             str(func(o *options) *string { return &o.permissionPrompt }),
		"--resume-session-at":                  str(func(o *options) *string { return &o.resumeSessionAt }),
		"--settings":                           str(func(o *options) *string { return &o.settings }),
		"--strict-mcp-config":                  boolean(func(o *options) *bool { return &o.strictMCP }),
		"--permission-mode": {kind: valueFlag, set: func(o *options, v string) error {
			if !slices.Contains(permissionModes, v) {
				return fmt.Errorf("error: option '--permission-mode <mode>' argument '%s' is invalid. Allowed choices are %s.", v, strings.Join(permissionModes, ", "))
			}
			o.permissionMode = v
			return nil
		}},
		"--resume": {kind: optionalValueFlag, set: func(o *options, v string) error {
			if v == "" {
				return fmt.Errorf("Error: --resume without a session id (the interactive picker) is not supported in print mode")
			}
			o.resume = v
			return nil
		}},
		"--add-dir": {kind: valueFlag, set: func(o *options, v string) error {
			o.addDirs = append(o.addDirs, v)
			return nil
		}},
		"--setting-sources": {kind: valueFlag, set: func(o *options, v string) error {
			o.settingSources = []string{}
			for _, s := range splitList(v) {
				if !slices.Contains([]string{"user", "project", "local"}, s) {
					return fmt.Errorf("Error processing --setting-sources: Invalid setting source: %s. Valid options are: user, project, local", s)
				}
				o.settingSources = append(o.settingSources, s)
			}
			return nil
		}},
		"--mcp-config": {kind: valueFlag, set: func(o *options, v string) error {
			return o.addMCPConfig(v)
		}},
	}
}

// addMCPConfig reads an --mcp-config value: inline JSON or a file name.
func (o *options) addMCPConfig(v string) error {
	data := []byte(v)
	if !strings.HasPrefix(strings.TrimSpace(v), "{") {
		b, err := os.ReadFile(v)
		if err != nil {
			return fmt.Errorf("Error: Invalid MCP configuration: MCP config file not found: %s", v)
		}
		data = b
	}
	var cfg struct {
		MCPServers map[string]mcpServerConfig `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("Error: Invalid MCP configuration: %v", err)
	}
	if o.mcpServers == nil {
		o.mcpServers = map[string]mcpServerConfig{}
	}
	for name, s := range cfg.MCPServers {
		if s.Type != "" && s.Type != "stdio" {
			return fmt.Errorf("Error: Invalid MCP configuration: server %q: only stdio servers are supported by this fake", name)
		}
		if s.Command == "" {
			return fmt.Errorf("Error: Invalid MCP configuration: mcpServers.%s.command: Required", name)
		}
		o.mcpServers[name] = s
	}
	return nil
}

// parseArgs parses argv the way the CLI does for the flags bridged uses:
// --flag=value and --flag value both work, unknown flags are refused.
func parseArgs(args []string) (options, error) {
	var o options
	table := flagTable()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			return o, fmt.Errorf("Error: unexpected argument '%s': with --input-format stream-json the prompt comes on stdin", a)
		}
		name, val, hasEq := strings.Cut(a, "=")
		spec, ok := table[name]
		if !ok {
			return o, fmt.Errorf("error: unknown option '%s'", name)
		}
		switch spec.kind {
		case boolFlag:
			if hasEq {
				return o, fmt.Errorf("error: option '%s' does not take a value", name)
			}
		case valueFlag:
			if !hasEq {
				if i+1 >= len(args) {
					return o, fmt.Errorf("error: option '%s <value>' argument missing", name)
				}
				i++
				val = args[i]
			}
		case optionalValueFlag:
			if !hasEq && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				val = args[i]
			}
		}
		if err := spec.set(&o, val); err != nil {
			return o, err
		}
	}
	if o.version {
		return o, nil
	}
	if o.inputFormat != "stream-json" {
		return o, fmt.Errorf("Error: this fake claude reads only --input-format stream-json (got %q)", o.inputFormat)
	}
	if o.outputFormat != "stream-json" {
		return o, fmt.Errorf("Error: this fake claude writes only --output-format stream-json (got %q)", o.outputFormat)
	}
	if !o.verbose {
		return o, fmt.Errorf("Error: When using --print, --output-format=stream-json requires --verbose")
	}
	if o.resumeSessionAt != "" && o.resume == "" {
		return o, fmt.Errorf("Error: --resume-session-at requires --resume")
	}
	if o.permissionMode == "" {
		o.permissionMode = "default"
		if o.skipPermissions {
			o.permissionMode = "bypassPermissions"
		}
	}
	return o, nil
}

// bypass reports whether the run skips permission checks, which the CLI
// refuses as root.
func (o options) bypass() bool {
	return o.permissionMode == "bypassPermissions" || o.skipPermissions || o.allowSkip
}
