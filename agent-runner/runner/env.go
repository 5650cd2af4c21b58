package runner

import (
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Credential variables: claude gets only a placeholder in one of them (the
// real credential stays in the host's proxy), and every Bash command starts
// by unsetting them all the same.
var credentialVars = []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}

// strippedVars never pass from the runner's environment to claude: markers
// that would make the CLI think it is nested, Node debugging knobs (as the SDK
// does), and credentials, which never come from the environment.
var strippedVars = map[string]bool{
	"CLAUDECODE":              true,
	"CLAUDE_CODE_ENTRYPOINT":  true,
	"NODE_OPTIONS":            true,
	"DEBUG":                   true,
	"ANTHROPIC_API_KEY":       true,
	"CLAUDE_CODE_OAUTH_TOKEN": true,
	"ANTHROPIC_AUTH_TOKEN":    true,
}

// strippedPrefixes are the runner's own configuration.
var strippedPrefixes = []string{"BRIDGED_AGENT_", "BRIDGED_MCP_"}

// fixedVars are always set for claude, overriding the runner's environment.
var fixedVars = [][2]string{
	{"DISABLE_AUTOUPDATER", "1"},
	{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"},
	{"CLAUDE_CODE_MAX_RETRIES", "3"},
	// Turns on system/session_state_changed, which tells when the CLI is idle.
	{"CLAUDE_CODE_SDK_READS_SESSION_STATE", "1"},
	// Load CLAUDE.md from the --add-dir directories.
	{"CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD", "1"},
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// claudeEnv builds claude's complete environment from the runner's own
// (HOME, PATH, IS_SANDBOX, … pass through), the fixed settings and the API
// variables (base URL and placeholder credential). It returns the
// environment and the sorted names of the API variables it set. Names that
// are not plain variable names are dropped and reported in skipped.
func claudeEnv(environ []string, secrets map[string]string) (env, secretNames, skipped []string) {
	override := make(map[string]bool)
	for _, kv := range fixedVars {
		override[kv[0]] = true
	}
	for name := range secrets {
		if !envName.MatchString(name) || strings.ContainsRune(secrets[name], 0) {
			skipped = append(skipped, name)
			continue
		}
		override[name] = true
		secretNames = append(secretNames, name)
	}
	sort.Strings(secretNames)
	sort.Strings(skipped)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || strippedVars[name] || override[name] || hasPrefix(name, strippedPrefixes) {
			continue
		}
		env = append(env, kv)
	}
	for _, kv := range fixedVars {
		env = append(env, kv[0]+"="+kv[1])
	}
	for _, name := range secretNames {
		env = append(env, name+"="+secrets[name])
	}
	return env, secretNames, skipped
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// unsetPrefix is prepended to every Bash command: the credential variables
// (and any other secret the run input named) are gone before the command runs.
func unsetPrefix(secretNames []string) string {
	names := append([]string(nil), credentialVars...)
	for _, n := range secretNames {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return "unset " + strings.Join(names, " ") + "; "
}
