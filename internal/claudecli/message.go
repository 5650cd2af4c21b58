package claudecli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MessageType is the "type" field of a line the CLI prints.
type MessageType string

// The stdout message types the CLI is known to print on a pipe.
const (
	TypeSystem               MessageType = "system"
	TypeAssistant            MessageType = "assistant"
	TypeUser                 MessageType = "user"
	TypeResult               MessageType = "result"
	TypeControlRequest       MessageType = "control_request"
	TypeControlResponse      MessageType = "control_response"
	TypeControlCancelRequest MessageType = "control_cancel_request"
	TypeKeepAlive            MessageType = "keep_alive"
)

// SystemSubtype is the "subtype" of a system message.
type SystemSubtype string

// The system subtypes bridged knows. Others (task_started, hook_response, …)
// are parsed as System with only the common fields set.
const (
	SystemInit                SystemSubtype = "init"
	SystemAPIRetry            SystemSubtype = "api_retry"
	SystemStatus              SystemSubtype = "status"
	SystemCompactBoundary     SystemSubtype = "compact_boundary"
	SystemSessionStateChanged SystemSubtype = "session_state_changed"
)

// Known reports whether bridged knows this system subtype.
func (s SystemSubtype) Known() bool {
	switch s {
	case SystemInit, SystemAPIRetry, SystemStatus, SystemCompactBoundary, SystemSessionStateChanged:
		return true
	}
	return false
}

// Session states reported by system/session_state_changed (only when the
// child's environment has CLAUDE_CODE_SDK_READS_SESSION_STATE=1).
const (
	StateRunning        = "running"
	StateIdle           = "idle"
	StateRequiresAction = "requires_action"
)

// Message is one parsed stdout line. Type says which of the pointers is set;
// for a type bridged does not know, none is and Raw holds the line.
type Message struct {
	Type MessageType
	Raw  json.RawMessage

	System          *System
	Assistant       *Assistant
	User            *User
	Result          *Result
	ControlRequest  *ControlRequest
	ControlResponse *ControlResponse
	ControlCancel   *ControlCancel
}

// Known reports whether the message's type (and, for system messages, its
// subtype) is one bridged knows.
func (m Message) Known() bool {
	switch m.Type {
	case TypeSystem:
		return m.System != nil && m.System.Subtype.Known()
	case TypeAssistant, TypeUser, TypeResult, TypeControlRequest, TypeControlResponse,
		TypeControlCancelRequest, TypeKeepAlive:
		return true
	}
	return false
}

// SessionID returns the session id the message carries, if any.
func (m Message) SessionID() string {
	switch {
	case m.System != nil:
		return m.System.SessionID
	case m.Assistant != nil:
		return m.Assistant.SessionID
	case m.User != nil:
		return m.User.SessionID
	case m.Result != nil:
		return m.Result.SessionID
	}
	return ""
}

// System is a system message. Which fields are set depends on Subtype.
type System struct {
	Subtype   SystemSubtype `json:"subtype"`
	SessionID string        `json:"session_id"`
	UUID      string        `json:"uuid"`

	// init
	Cwd               string            `json:"cwd,omitempty"`
	Model             string            `json:"model,omitempty"`
	PermissionMode    string            `json:"permissionMode,omitempty"`
	Tools             []string          `json:"tools,omitempty"`
	MCPServers        []MCPServerStatus `json:"mcp_servers,omitempty"`
	ClaudeCodeVersion string            `json:"claude_code_version,omitempty"`

	// session_state_changed
	State string `json:"state,omitempty"`

	// api_retry
	Attempt      int    `json:"attempt,omitempty"`
	MaxRetries   int    `json:"max_retries,omitempty"`
	RetryDelayMS int64  `json:"retry_delay_ms,omitempty"`
	ErrorStatus  int    `json:"error_status,omitempty"`
	Error        string `json:"error,omitempty"`

	// status: "compacting", or null when it ends.
	Status        *string `json:"status,omitempty"`
	CompactResult string  `json:"compact_result,omitempty"`

	// compact_boundary
	CompactMetadata *CompactMetadata `json:"compact_metadata,omitempty"`
}

// MCPServerStatus is one entry of system/init's mcp_servers.
type MCPServerStatus struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// CompactMetadata describes a compaction.
type CompactMetadata struct {
	Trigger    string `json:"trigger"`
	PreTokens  int64  `json:"pre_tokens"`
	PostTokens int64  `json:"post_tokens"`
}

// Assistant is one model message.
type Assistant struct {
	SessionID       string     `json:"session_id"`
	UUID            string     `json:"uuid"`
	ParentToolUseID *string    `json:"parent_tool_use_id"`
	Message         APIMessage `json:"message"`
	// Error is set on synthetic messages that report an API failure
	// (server_error, rate_limit, authentication_failed, …).
	Error string `json:"error,omitempty"`
}

// Text joins the message's text blocks.
func (a *Assistant) Text() string { return joinText(a.Message.Content) }

// APIMessage is the Anthropic message inside an assistant line.
type APIMessage struct {
	ID      string         `json:"id"`
	Model   string         `json:"model"`
	Role    string         `json:"role"`
	Content []ContentBlock `json:"content"`
}

// ContentBlock is one block of a message's content. Only the fields bridged
// looks at are decoded.
type ContentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

func joinText(blocks []ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// User is a user line printed by the CLI: a tool result, a replayed local
// command's output, a compaction summary or an interruption marker. The
// host's own messages are not echoed.
type User struct {
	SessionID       string      `json:"session_id"`
	UUID            string      `json:"uuid"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	Message         UserMessage `json:"message"`
	IsReplay        bool        `json:"isReplay,omitempty"`
	IsSynthetic     bool        `json:"isSynthetic,omitempty"`
}

// UserMessage is a user message whose content is either a string or a list
// of content blocks.
type UserMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Text returns the message's text: the string content, or its text blocks
// joined.
func (u UserMessage) Text() string {
	c := bytes.TrimSpace(u.Content)
	if len(c) == 0 {
		return ""
	}
	if c[0] == '"' {
		var s string
		if json.Unmarshal(c, &s) == nil {
			return s
		}
		return ""
	}
	var blocks []ContentBlock
	if json.Unmarshal(c, &blocks) == nil {
		return joinText(blocks)
	}
	return ""
}

// Result ends a turn: the agent is idle again. Judge it by IsError, never by
// Subtype (an API failure arrives as subtype "success" with is_error true).
type Result struct {
	Subtype        string   `json:"subtype"`
	IsError        bool     `json:"is_error"`
	Result         string   `json:"result"`
	Errors         []string `json:"errors,omitempty"`
	SessionID      string   `json:"session_id"`
	UUID           string   `json:"uuid"`
	DurationMS     int64    `json:"duration_ms"`
	DurationAPIMS  int64    `json:"duration_api_ms"`
	NumTurns       int      `json:"num_turns"`
	TerminalReason string   `json:"terminal_reason,omitempty"`
	LocalCommand   string   `json:"local_command,omitempty"`
	// APIErrorStatus and APIErrorType are the API's answer when the turn
	// ended on an API error (terminal_reason "api_error"): the HTTP status
	// (0 when none) and the error's type ("authentication_error" …).
	APIErrorStatus int    `json:"api_error_status,omitempty"`
	APIErrorType   string `json:"api_error_type,omitempty"`
	ResultIndex    int    `json:"result_index"`
	// TotalCostUSD adds up across the turns of one process.
	TotalCostUSD float64 `json:"total_cost_usd"`
	Usage        Usage   `json:"usage"`
	// ModelUsageSinceLastResult is this turn's usage per model.
	ModelUsageSinceLastResult map[string]ModelUsage `json:"model_usage_since_last_result,omitempty"`
}

// Usage is a result's token usage.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// ModelUsage is one model's share of a turn.
type ModelUsage struct {
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostUSD      float64 `json:"costUSD"`
}

// unknownSessionText is what the CLI says when --resume names a session its
// HOME does not hold.
const unknownSessionText = "No conversation found with session ID"

// UnknownSession reports whether the result is the CLI's start-up failure for
// a --resume id it does not know.
func (r *Result) UnknownSession() bool {
	if !r.IsError {
		return false
	}
	for _, e := range r.Errors {
		if strings.Contains(e, unknownSessionText) {
			return true
		}
	}
	return false
}

// Text is what a person should see for this result: the result text, or for
// a failed turn without one, its errors joined (the CLI's internal
// "[ede_diagnostic] …" lines left out).
func (r *Result) Text() string {
	if r.Result != "" || !r.IsError {
		return r.Result
	}
	var errs []string
	for _, e := range r.Errors {
		if !strings.HasPrefix(e, "[ede_diagnostic]") {
			errs = append(errs, e)
		}
	}
	return strings.Join(errs, "; ")
}

// TurnCostUSD returns this turn's cost from model_usage_since_last_result,
// and false when the CLI did not report it.
func (r *Result) TurnCostUSD() (float64, bool) {
	if r.ModelUsageSinceLastResult == nil {
		return 0, false
	}
	var sum float64
	for _, m := range r.ModelUsageSinceLastResult {
		sum += m.CostUSD
	}
	return sum, true
}

// ControlRequest is a request from the CLI to the host.
type ControlRequest struct {
	RequestID string `json:"request_id"`
	// Subtype is copied from Request.subtype.
	Subtype ControlSubtype `json:"-"`
	// Request is the raw request body, subtype included.
	Request json.RawMessage `json:"request"`
}

// ControlSubtype names a control request.
type ControlSubtype string

// Control request subtypes.
const (
	ControlInitialize ControlSubtype = "initialize"
	ControlInterrupt  ControlSubtype = "interrupt"
	ControlCanUseTool ControlSubtype = "can_use_tool"
	ControlHook       ControlSubtype = "hook_callback"
)

// ControlResponse is the CLI's answer to a request from the host.
type ControlResponse struct {
	Subtype   string          `json:"subtype"` // success or error
	RequestID string          `json:"request_id"`
	Response  json.RawMessage `json:"response,omitempty"`
	Error     string          `json:"error,omitempty"`
	ErrorCode string          `json:"error_code,omitempty"`
}

// ControlCancel abandons a pending request from the CLI; it must not be
// answered afterwards.
type ControlCancel struct {
	RequestID string `json:"request_id"`
}

// ErrNotJSON is returned by Parse for a line that is not a JSON object.
var ErrNotJSON = errors.New("not a JSON object")

// Parse decodes one stdout line. Key order is not relied on. A line of an
// unknown type is returned with only Type and Raw set and no error; an error
// means the line is not JSON at all, or a known type whose fields do not
// decode.
func Parse(line []byte) (Message, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Message{}, ErrNotJSON
	}
	var env struct {
		Type     MessageType     `json:"type"`
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	m := Message{Type: env.Type, Raw: json.RawMessage(append([]byte(nil), line...))}
	var err error
	switch env.Type {
	case TypeSystem:
		m.System = new(System)
		err = json.Unmarshal(line, m.System)
	case TypeAssistant:
		m.Assistant = new(Assistant)
		err = json.Unmarshal(line, m.Assistant)
	case TypeUser:
		m.User = new(User)
		err = json.Unmarshal(line, m.User)
	case TypeResult:
		m.Result = new(Result)
		err = json.Unmarshal(line, m.Result)
	case TypeControlRequest:
		m.ControlRequest = new(ControlRequest)
		if err = json.Unmarshal(line, m.ControlRequest); err == nil {
			var sub struct {
				Subtype ControlSubtype `json:"subtype"`
			}
			if len(m.ControlRequest.Request) > 0 {
				err = json.Unmarshal(m.ControlRequest.Request, &sub)
			}
			m.ControlRequest.Subtype = sub.Subtype
		}
	case TypeControlResponse:
		m.ControlResponse = new(ControlResponse)
		if len(env.Response) > 0 {
			err = json.Unmarshal(env.Response, m.ControlResponse)
		}
	case TypeControlCancelRequest:
		m.ControlCancel = new(ControlCancel)
		err = json.Unmarshal(line, m.ControlCancel)
	}
	if err != nil {
		return Message{Type: m.Type, Raw: m.Raw}, fmt.Errorf("decode %s message: %w", env.Type, err)
	}
	return m, nil
}
