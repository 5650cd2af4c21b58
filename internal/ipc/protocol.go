package ipc

import (
	"encoding/json"
	"fmt"
)

// RunInput is the one JSON object the host writes to a container's stdin
// (DESIGN §7). It carries no credential: the Claude credential never enters a
// container (DESIGN §14); claude reaches the API through the host's
// credential proxy (see EnvAPISocket).
type RunInput struct {
	Prompt        string `json:"prompt"`
	SessionID     string `json:"session_id,omitempty"`
	ResumeAt      string `json:"resume_at,omitempty"`
	Group         string `json:"group"`
	Chat          string `json:"chat"`
	IsMain        bool   `json:"is_main"`
	IsTask        bool   `json:"is_task"`
	AssistantName string `json:"assistant_name"`
	Timezone      string `json:"timezone"`
	Model         string `json:"model,omitempty"`
	// Tools is the group's tool profile (full, ask, read-only, chat);
	// empty is full.
	Tools string `json:"tools,omitempty"`
	// ApprovalKey is a random key of this container's run that the runner
	// puts in each approval_wait line (Event.Key). Only the runner reads
	// its stdin, once, so a line another process of the container writes
	// to the container's stdout (through the init's /proc/1/fd/1) cannot
	// carry it. It is never logged.
	ApprovalKey string `json:"approval_key,omitempty"`
	// ProxyToken, on an engine whose Pods reach the credential proxy over
	// TCP (EnvAPIAddr), is this run's token: the runner starts each
	// connection to the proxy with ProxyTokenLine and it. It is not the
	// credential (the proxy adds that) and dies with the run; it travels
	// only here, never in the Pod's spec. It is never logged.
	ProxyToken string `json:"proxy_token,omitempty"`
}

// The host's credential proxy as a container sees it: a unix socket in a
// read-only directory, named to the runner by environment variables (the
// runner keeps BRIDGED_AGENT_* out of claude's environment).
const (
	// ContainerProxyDir is where the proxy's socket directory is mounted.
	ContainerProxyDir = "/run/bridged-proxy"
	// ProxySocketName is the socket's name in that directory.
	ProxySocketName = "api.sock"
	// EnvAPISocket names the proxy socket; unset, claude gets no API
	// settings from the runner.
	EnvAPISocket = "BRIDGED_AGENT_API_SOCKET"
	// EnvAPIAuth is the kind of credential the host holds: APIAuthAPIKey,
	// APIAuthOAuth or APIAuthNone. The runner gives claude a placeholder of
	// the same kind.
	EnvAPIAuth = "BRIDGED_AGENT_API_AUTH"
	// EnvNoFile is the runner's open-file limit: it lowers its own
	// RLIMIT_NOFILE (soft and hard) to it before anything else runs, so the
	// limit holds where the engine drops the container's nofile ulimit
	// (rootless Podman before 5.5).
	EnvNoFile = "BRIDGED_AGENT_NOFILE"
	// EnvAPIAddr is the proxy's host:port across nodes (the kubernetes
	// engine, decision record 36), in place of EnvAPISocket; the run's
	// token is RunInput.ProxyToken.
	EnvAPIAddr = "BRIDGED_AGENT_API_ADDR"
	// ProxyTokenLine starts each connection to EnvAPIAddr, followed by the
	// token and a newline; the proxy then serves HTTP on the rest.
	ProxyTokenLine = "BRIDGED-PROXY "
)

// Values of EnvAPIAuth.
const (
	APIAuthAPIKey = "api-key"
	APIAuthOAuth  = "oauth"
	APIAuthNone   = "none"
)

// Validate checks the input the runner received.
func (in RunInput) Validate() error {
	if err := checkText("prompt", in.Prompt, true); err != nil {
		return err
	}
	if in.Group == "" {
		return invalidf("group is empty")
	}
	if in.AssistantName == "" {
		return invalidf("assistant_name is empty")
	}
	return nil
}

// DecodeRunInput decodes the runner's stdin object.
func DecodeRunInput(data []byte) (RunInput, error) {
	var in RunInput
	if err := decodeStrict(data, &in); err != nil {
		return RunInput{}, err
	}
	return in, in.Validate()
}

// EventType is the type of a line on the runner's stdout.
type EventType string

// The runner's stdout event types.
const (
	EventSession EventType = "session"
	EventResult  EventType = "result"
	EventError   EventType = "error"
	// EventApprovalWait announces a tool call the runner is about to ask
	// the owner about (ToolUseID, Tool), before it writes the ask_approval
	// request: the host takes an ask_approval only for a call announced
	// this way by the group's live container, each once.
	EventApprovalWait EventType = "approval_wait"
	// EventFetched tells that the agent fetched a web page (Tool
	// "WebFetch", What its URL) or searched the web (Tool "WebSearch",
	// What its query) during the turn: its input came from the web too.
	EventFetched EventType = "fetched"
)

// MaxFetchedBytes bounds a fetched event's What.
const MaxFetchedBytes = 300

// Usage is token usage copied from the CLI's result message.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens,omitempty"`
}

// Event is one line of the runner's stdout. Which fields are set depends on
// Type: session → SessionID (and Fresh when an unknown session was replaced);
// result → Text, IsError, SessionID, LastUUID, CostUSD, Usage, DurationMS,
// NumTurns (and for a turn that ended on an API error, APIErrorStatus and
// APIErrorType); error → Message, Retryable; approval_wait → ToolUseID,
// Tool; fetched → Tool, What.
type Event struct {
	Type       EventType `json:"type"`
	SessionID  string    `json:"session_id,omitempty"`
	Fresh      bool      `json:"fresh,omitempty"`
	Text       string    `json:"text,omitempty"`
	IsError    bool      `json:"is_error,omitempty"`
	LastUUID   string    `json:"last_uuid,omitempty"`
	CostUSD    float64   `json:"cost_usd,omitempty"`
	Usage      *Usage    `json:"usage,omitempty"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	NumTurns   int       `json:"num_turns,omitempty"`
	Message    string    `json:"message,omitempty"`
	Retryable  bool      `json:"retryable,omitempty"`
	// APIErrorStatus is the HTTP status of the API error that ended a
	// failed turn (0: none or unknown); APIErrorType its error type.
	APIErrorStatus int    `json:"api_error_status,omitempty"`
	APIErrorType   string `json:"api_error_type,omitempty"`
	// ToolUseID and Tool name the tool call of an approval_wait.
	ToolUseID string `json:"tool_use_id,omitempty"`
	Tool      string `json:"tool,omitempty"`
	// Key is the run's RunInput.ApprovalKey, in an approval_wait.
	Key string `json:"key,omitempty"`
	// What is a fetched event's URL or search query.
	What string `json:"what,omitempty"`
}

// DecodeEvent decodes one stdout line. Unknown fields are tolerated here (the
// runner may be newer than the host); unknown types are an error the caller
// logs and skips.
func DecodeEvent(line []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return Event{}, invalidf("event: %v", err)
	}
	switch ev.Type {
	case EventSession, EventResult, EventError:
		return ev, nil
	case EventApprovalWait:
		if !ValidToolName(ev.Tool) || !ValidToolUseID(ev.ToolUseID) {
			return ev, invalidf("approval_wait: tool %q or tool_use_id %q is not an identifier", clip(ev.Tool), clip(ev.ToolUseID))
		}
		return ev, nil
	case EventFetched:
		if (ev.Tool != "WebFetch" && ev.Tool != "WebSearch") || len(ev.What) > MaxFetchedBytes {
			return ev, invalidf("fetched: tool %q is not WebFetch or WebSearch, or its %d bytes are over %d", clip(ev.Tool), len(ev.What), MaxFetchedBytes)
		}
		return ev, nil
	default:
		return ev, fmt.Errorf("%w: unknown event type %q", ErrInvalid, ev.Type)
	}
}
