package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	if path, ok := writePath(req.ToolName, req.Input); ok && freeWrite(p.workDir, path) {
		log.Debug().Str("path", path).Msg("write in the group's own folder allowed")
		return allow(req.Input), nil
	}
	input := req.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage(`{}`)
	}
	useID := req.ToolUseID
	if !ipc.ValidToolUseID(useID) {
		// The host matches the request to its announcement by this id.
		useID = "bridged-" + ipc.NewName()
	}
	d, err := p.ask(ctx, ipc.AskApprovalArgs{Tool: req.ToolName, Input: input, ToolUseID: useID})
	if err != nil {
		if ctx.Err() != nil {
			return claudecli.PermissionResult{}, ctx.Err()
		}
		log.Warn().Err(err).Msg("approval not asked; tool call denied")
		var refused *refusedError
		if errors.As(err, &refused) && refused.msg != "" {
			return deny(refused.msg), nil
		}
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

// A write is judged where it lands: the path is resolved component by
// component, following every symbolic link on the way (dangling ones too),
// so a link in the group's folder to .claude/, to the IPC directory or to
// an extra mount is judged as its target. A path that cannot be resolved
// (a link loop, too many links, a component that is not a directory, an
// unreadable one) is asked, never allowed.

// maxLinks bounds the links followed for one path, as the kernel's
// MAXSYMLINKS does.
const maxLinks = 40

// errUnresolved: a path whose final target cannot be known.
var errUnresolved = errors.New("path cannot be resolved")

// resolve returns where a write to the absolute path lands: every link
// followed (relative ones from their own directory), the part that does
// not exist yet kept as named.
func resolve(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%w: %q is not absolute", errUnresolved, path)
	}
	todo := splitPath(path)
	cur := string(filepath.Separator)
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, os.ErrNotExist):
			// Nothing below a missing name can be a link; a ".." after it
			// fails the write, so it is not guessed at.
			if slices.Contains(todo, "..") {
				return "", fmt.Errorf("%w: %q goes up from a missing directory", errUnresolved, path)
			}
			return filepath.Join(append([]string{next}, todo...)...), nil
		case err != nil:
			return "", fmt.Errorf("%w: %w", errUnresolved, err)
		case fi.Mode()&os.ModeSymlink != 0:
			links++
			if links > maxLinks {
				return "", fmt.Errorf("%w: %q: more than %d links", errUnresolved, path, maxLinks)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", fmt.Errorf("%w: %w", errUnresolved, err)
			}
			if filepath.IsAbs(target) {
				cur = string(filepath.Separator)
			}
			todo = append(splitPath(target), todo...)
		case len(todo) > 0 && !fi.IsDir():
			return "", fmt.Errorf("%w: %q: %s is not a directory", errUnresolved, path, next)
		default:
			cur = next
		}
	}
	return cur, nil
}

func splitPath(p string) []string {
	return strings.Split(filepath.ToSlash(p), "/")
}

// guardedNames are the names the CLI reads as its own configuration
// anywhere in a project (settings, skills, agents, commands, MCP
// servers): a write to a path with one of them as a component asks.
var guardedNames = []string{".claude", ".mcp.json"}

// freeWrite reports whether a write to path may run without asking in the
// ask profile: where it lands (resolve) is in the group's folder dir and
// no component of it below dir is a guarded name.
//
// The path is judged twice: as the kernel reads it (a ".." after a link
// goes up from the link's target) and cleaned first (as a program that
// normalises the name before opening it would); both must be free.
func freeWrite(dir, path string) bool {
	if dir == "" {
		return false
	}
	d, err := resolve(filepath.Clean(dir))
	if err != nil {
		return false
	}
	return freeUnder(d, path) && freeUnder(d, filepath.Clean(path))
}

// freeUnder is freeWrite for one reading of path, d resolved.
func freeUnder(d, path string) bool {
	real, err := resolve(path)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(d, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return false
	}
	for _, c := range splitPath(rel) {
		if slices.Contains(guardedNames, c) {
			return false
		}
	}
	return true
}

// hostAsker asks the host through an ask_approval IPC request. The call
// is first announced on the runner's stdout (an approval_wait event): the
// host takes an ask_approval only for a call its container announced, so
// a request file planted in the IPC directory is refused. The host
// answers when the owner decides or its own timeout denies the call, so
// the wait is bounded by ctx only. A request the host refuses (too many
// open, not announced) is an error carrying the host's words.
func hostAsker(call func(ctx context.Context, req ipc.Request) (ipc.Response, error), announce func(ipc.Event)) Asker {
	return func(ctx context.Context, args ipc.AskApprovalArgs) (ipc.ApprovalDecision, error) {
		req := ipc.NewRequest(args)
		if err := req.Args.Validate(); err != nil {
			return ipc.ApprovalDecision{}, err
		}
		announce(ipc.Event{Type: ipc.EventApprovalWait, ToolUseID: args.ToolUseID, Tool: args.Tool})
		resp, err := call(ctx, req)
		if err != nil {
			return ipc.ApprovalDecision{}, err
		}
		if !resp.OK {
			return ipc.ApprovalDecision{}, &refusedError{msg: resp.Error}
		}
		var d ipc.ApprovalDecision
		if err := json.Unmarshal(resp.Data, &d); err != nil {
			return ipc.ApprovalDecision{}, fmt.Errorf("decode approval: %w", err)
		}
		return d, nil
	}
}

// refusedError is the host's refusal of an ask_approval: its words are
// the tool's error, for the model.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// MaxApprovalWait bounds the runner's wait for one approval: the host's
// timeout (BRIDGED_APPROVAL_TIMEOUT) settles it well before.
const MaxApprovalWait = 24 * time.Hour
