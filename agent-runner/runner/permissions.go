package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/claudecli"
	"github.com/bridged-app/bridged/internal/ipc"
)

// Tool profiles, as ipc.RunInput.Tools names them (README "Permissions").
const (
	ProfileFull     = ipc.ProfileFull
	ProfileAsk      = ipc.ProfileAsk
	ProfileReadOnly = ipc.ProfileReadOnly
	ProfileChat     = ipc.ProfileChat
)

// bridgeTools are bridged's own MCP tools.
var bridgeTools = "mcp__" + MCPServerName + "__*"

// profileConfig sets c's permission flags for profile (ipc.ProfileRules,
// which the daemon's managed settings repeat). The CLI settles a tool call
// in the order disallowed → allowed → mode → can_use_tool; every profile
// but full turns can_use_tool on (--permission-prompt-tool stdio), and the
// runner's permissions.decide answers it.
func profileConfig(c *claudecli.Config, profile string) {
	c.AllowedTools, c.DisallowedTools = ipc.ProfileRules(profile)
	if normProfile(profile) == ProfileFull {
		c.PermissionMode = claudecli.PermissionBypass
		c.AllowDangerouslySkipPermissions = true
		return
	}
	c.PermissionMode = claudecli.PermissionDefault
	c.PermissionPromptTool = "stdio"
}

// normProfile maps an unknown or empty profile to full, the behaviour of
// a host that does not name one.
func normProfile(p string) string { return ipc.NormProfile(p) }

// Asker asks the host (the owner) about one tool call; it blocks until the
// host answers or ctx ends.
type Asker func(ctx context.Context, args ipc.AskApprovalArgs) (ipc.ApprovalDecision, error)

// permissions answers the CLI's can_use_tool requests for a profile.
type permissions struct {
	profile string
	workDir string // the group's own folder: writes there run freely (ask)
	prefix  string // unsets the credentials before a Bash command
	ask     Asker
	log     zerolog.Logger
}

// Denial messages the model sees as the tool's error.
const (
	msgReadOnly = "not allowed: this chat's agent is read-only (no writes, no commands that change anything)"
	msgChat     = "not allowed: this chat's agent has no tools but bridged's own"
	msgNoAnswer = "not approved: the owner's approval could not be asked"
)

// decide answers one can_use_tool request.
func (p *permissions) decide(ctx context.Context, req claudecli.ToolPermissionRequest) (claudecli.PermissionResult, error) {
	deny := func(msg string) claudecli.PermissionResult {
		return claudecli.PermissionResult{Behavior: claudecli.BehaviorDeny, Message: msg, ToolUseID: req.ToolUseID}
	}
	allow := func(input json.RawMessage) claudecli.PermissionResult {
		return claudecli.PermissionResult{Behavior: claudecli.BehaviorAllow, UpdatedInput: p.runnable(req.ToolName, input), ToolUseID: req.ToolUseID}
	}
	log := p.log.With().Str("tool", req.ToolName).Str("profile", p.profile).Logger()
	switch p.profile {
	case ProfileReadOnly:
		log.Info().Msg("tool call refused: read-only profile")
		return deny(msgReadOnly), nil
	case ProfileChat:
		log.Info().Msg("tool call refused: chat profile")
		return deny(msgChat), nil
	case ProfileAsk:
	default:
		return allow(req.Input), nil
	}
	if strings.HasPrefix(req.ToolName, "mcp__"+MCPServerName+"__") {
		return allow(req.Input), nil
	}
	if path, ok := writePath(req.ToolName, req.Input); ok && within(p.workDir, path) && !guarded(p.workDir, path) {
		log.Debug().Str("path", path).Msg("write in the group's own folder allowed")
		return allow(req.Input), nil
	}
	input := req.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage(`{}`)
	}
	d, err := p.ask(ctx, ipc.AskApprovalArgs{Tool: req.ToolName, Input: input, ToolUseID: req.ToolUseID})
	if err != nil {
		if ctx.Err() != nil {
			return claudecli.PermissionResult{}, ctx.Err()
		}
		log.Warn().Err(err).Msg("approval not asked; tool call denied")
		return deny(msgNoAnswer), nil
	}
	if !d.Allow {
		msg := d.Message
		if msg == "" {
			msg = "not approved by the owner"
		}
		log.Info().Str("approval", d.ID).Msg("tool call denied by the owner")
		return deny(msg), nil
	}
	log.Info().Str("approval", d.ID).Msg("tool call approved by the owner")
	return allow(input), nil
}

// runnable is the input that runs: a Bash command gets the credential
// prefix (the Bash hook does this in the full profile only, where it may
// also allow the call).
func (p *permissions) runnable(tool string, input json.RawMessage) json.RawMessage {
	if tool != "Bash" || p.prefix == "" {
		return input
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(input, &m); err != nil || m == nil {
		return input
	}
	var cmd string
	if err := json.Unmarshal(m["command"], &cmd); err != nil {
		return input
	}
	if strings.HasPrefix(cmd, p.prefix) {
		return input
	}
	b, _ := json.Marshal(p.prefix + cmd)
	m["command"] = b
	out, err := json.Marshal(m)
	if err != nil {
		return input
	}
	return out
}

// writePath returns the file a write tool writes.
func writePath(tool string, input json.RawMessage) (string, bool) {
	var in struct {
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
	}
	switch tool {
	case "Write", "Edit", "MultiEdit", "NotebookEdit":
	default:
		return "", false
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return "", false
	}
	path := in.FilePath
	if tool == "NotebookEdit" {
		path = in.NotebookPath
	}
	return path, path != ""
}

// within reports whether path is dir or under it, after following the
// symbolic links of the part of path that exists (a link in the group's
// folder to an extra mount is not the group's folder).
func within(dir, path string) bool {
	if dir == "" || !filepath.IsAbs(path) {
		return false
	}
	path = filepath.Clean(path)
	real := resolveExisting(path)
	d := resolveExisting(filepath.Clean(dir))
	return real == d || strings.HasPrefix(real, d+string(filepath.Separator))
}

// guarded reports whether path is one of the files of the group's folder
// that the CLI reads as its own settings at the next start (.claude/,
// .mcp.json): a write there could widen the profile, so it asks.
func guarded(dir, path string) bool {
	real := resolveExisting(filepath.Clean(path))
	d := resolveExisting(filepath.Clean(dir))
	for _, g := range []string{".claude", ".mcp.json"} {
		gp := filepath.Join(d, g)
		if real == gp || strings.HasPrefix(real, gp+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// resolveExisting follows the links of the longest existing prefix of path.
func resolveExisting(path string) string {
	rest := ""
	for p := path; ; {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return path
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// hostAsker asks the host through an ask_approval IPC request. The host
// answers when the owner decides or its own timeout denies the call, so
// the wait is bounded by ctx only.
func hostAsker(call func(ctx context.Context, req ipc.Request) (ipc.Response, error)) Asker {
	return func(ctx context.Context, args ipc.AskApprovalArgs) (ipc.ApprovalDecision, error) {
		resp, err := call(ctx, ipc.NewRequest(args))
		if err != nil {
			return ipc.ApprovalDecision{}, err
		}
		if !resp.OK {
			return ipc.ApprovalDecision{}, errors.New(resp.Error)
		}
		var d ipc.ApprovalDecision
		if err := json.Unmarshal(resp.Data, &d); err != nil {
			return ipc.ApprovalDecision{}, fmt.Errorf("decode approval: %w", err)
		}
		return d, nil
	}
}

// MaxApprovalWait bounds the runner's wait for one approval: the host's
// timeout (BRIDGED_APPROVAL_TIMEOUT) settles it well before.
const MaxApprovalWait = 24 * time.Hour
