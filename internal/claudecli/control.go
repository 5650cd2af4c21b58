package claudecli

import (
	"context"
	"encoding/json"
	"time"
)

// HookEvent names a hook event the CLI can call back for.
type HookEvent string

// The hook events bridged registers.
const (
	HookPreToolUse HookEvent = "PreToolUse"
	HookPreCompact HookEvent = "PreCompact"
)

// HookInput is the input of a hook_callback request. Fields not relevant to
// the event are empty; Raw holds the whole input.
type HookInput struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	HookEventName  HookEvent       `json:"hook_event_name"`
	PermissionMode string          `json:"permission_mode,omitempty"`
	ToolName       string          `json:"tool_name,omitempty"`
	ToolInput      json.RawMessage `json:"tool_input,omitempty"`
	ToolUseID      string          `json:"tool_use_id,omitempty"`
	Trigger        string          `json:"trigger,omitempty"`
	Raw            json.RawMessage `json:"-"`
}

// HookFunc answers one hook callback. The returned value is marshalled as the
// hook's JSON output (nil means {}, "no opinion"); an error is sent to the CLI
// as an error response. It must return when ctx ends (the CLI cancelled the
// request, or the process is going away).
type HookFunc func(ctx context.Context, in HookInput) (any, error)

// Hook registers Func for Event. Matcher narrows tool events to a tool name
// ("Bash"); empty matches everything. Timeout, when set, is sent to the CLI
// (whole seconds).
type Hook struct {
	Event   HookEvent
	Matcher string
	Timeout time.Duration
	Func    HookFunc
}

// HookOutput is the common shape of a hook's answer.
type HookOutput struct {
	Continue           *bool `json:"continue,omitempty"`
	HookSpecificOutput any   `json:"hookSpecificOutput,omitempty"`
}

// PreToolUseOutput is the hookSpecificOutput of a PreToolUse answer.
// UpdatedInput replaces the tool's input.
type PreToolUseOutput struct {
	HookEventName            HookEvent       `json:"hookEventName"`
	PermissionDecision       string          `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string          `json:"permissionDecisionReason,omitempty"`
	UpdatedInput             json.RawMessage `json:"updatedInput,omitempty"`
}

// ToolPermissionRequest is a can_use_tool request.
type ToolPermissionRequest struct {
	ToolName    string          `json:"tool_name"`
	DisplayName string          `json:"display_name,omitempty"`
	Input       json.RawMessage `json:"input"`
	Description string          `json:"description,omitempty"`
	ToolUseID   string          `json:"tool_use_id,omitempty"`
	BlockedPath string          `json:"blocked_path,omitempty"`
}

// Permission behaviours.
const (
	BehaviorAllow = "allow"
	BehaviorDeny  = "deny"
)

// PermissionResult answers can_use_tool. On allow, UpdatedInput must be set
// (echo the original input when nothing changes: some CLI versions reject an
// allow without it).
type PermissionResult struct {
	Behavior     string          `json:"behavior"`
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
	Interrupt    bool            `json:"interrupt,omitempty"`
	ToolUseID    string          `json:"toolUseID,omitempty"`
}

// CanUseToolFunc decides a can_use_tool request. It must return when ctx ends.
type CanUseToolFunc func(ctx context.Context, req ToolPermissionRequest) (PermissionResult, error)

// AllowAll allows every tool call with its original input.
func AllowAll(_ context.Context, req ToolPermissionRequest) (PermissionResult, error) {
	in := req.Input
	if len(in) == 0 || string(in) == "null" {
		in = json.RawMessage(`{}`)
	}
	return PermissionResult{Behavior: BehaviorAllow, UpdatedInput: in, ToolUseID: req.ToolUseID}, nil
}

// Wire envelopes written to stdin.

type userLine struct {
	Type            string      `json:"type"`
	Message         userPayload `json:"message"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	SessionID       string      `json:"session_id"`
}

type userPayload struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type controlRequestLine struct {
	RequestID string `json:"request_id"`
	Type      string `json:"type"`
	Request   any    `json:"request"`
}

type controlResponseLine struct {
	Type     string          `json:"type"`
	Response controlResponse `json:"response"`
}

type controlResponse struct {
	Subtype   string `json:"subtype"`
	RequestID string `json:"request_id"`
	Response  any    `json:"response,omitempty"`
	Error     string `json:"error,omitempty"`
}

type hookMatcher struct {
	Matcher         string   `json:"matcher,omitempty"`
	HookCallbackIDs []string `json:"hookCallbackIds"`
	Timeout         int      `json:"timeout,omitempty"`
}

type initializeRequest struct {
	Subtype            ControlSubtype              `json:"subtype"`
	Hooks              map[HookEvent][]hookMatcher `json:"hooks,omitempty"`
	AppendSystemPrompt string                      `json:"appendSystemPrompt,omitempty"`
}

type hookCallbackRequest struct {
	CallbackID string          `json:"callback_id"`
	Input      json.RawMessage `json:"input"`
	ToolUseID  string          `json:"tool_use_id"`
}
