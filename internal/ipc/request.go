package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/bridged-app/bridged/internal/schedule"
)

// RequestType is the name of the MCP tool that wrote the request.
type RequestType string

// The request types of DESIGN §8.
const (
	TypeSendMessage   RequestType = "send_message"
	TypeScheduleTask  RequestType = "schedule_task"
	TypeListTasks     RequestType = "list_tasks"
	TypeUpdateTask    RequestType = "update_task"
	TypePauseTask     RequestType = "pause_task"
	TypeResumeTask    RequestType = "resume_task"
	TypeCancelTask    RequestType = "cancel_task"
	TypeRegisterGroup RequestType = "register_group"
	TypeListGroups    RequestType = "list_groups"
	// TypeAskApproval is written by the runner, not by an MCP tool: a tool
	// call the group's profile sends to the owner (see AskApprovalArgs).
	TypeAskApproval RequestType = "ask_approval"
)

// Args is the payload of a request; each tool has its own type.
type Args interface {
	Validate() error
	requestType() RequestType
}

// ScheduleKind is how a task repeats (see package schedule).
type ScheduleKind = schedule.Kind

// The schedule kinds.
const (
	ScheduleCron     = schedule.Cron
	ScheduleInterval = schedule.Interval
	ScheduleOnce     = schedule.Once
)

// ContextMode says whether a task resumes the group's session.
type ContextMode string

// The context modes.
const (
	ContextGroup    ContextMode = "group"
	ContextIsolated ContextMode = "isolated"
)

// SendMessageArgs are send_message's arguments. File, when given, is a
// file in the group's workspace sent with the message (Text is its
// caption): a path relative to the workspace, or an absolute one under
// /workspace/group, the workspace as the agent sees it.
type SendMessageArgs struct {
	Text       string `json:"text"`
	TargetChat string `json:"target_chat,omitempty"`
	File       string `json:"file,omitempty"`
}

// MaxFileArgBytes bounds send_message's file argument.
const MaxFileArgBytes = 1024

// ScheduleTaskArgs are schedule_task's arguments. The schedule value is
// checked by the schedule package, which needs the timezone.
type ScheduleTaskArgs struct {
	Prompt        string       `json:"prompt"`
	ScheduleType  ScheduleKind `json:"schedule_type"`
	ScheduleValue string       `json:"schedule_value"`
	ContextMode   ContextMode  `json:"context_mode,omitempty"`
	TargetGroup   string       `json:"target_group,omitempty"`
}

// ListTasksArgs are list_tasks's (empty) arguments.
type ListTasksArgs struct{}

// UpdateTaskArgs are update_task's arguments; nil fields are left unchanged.
type UpdateTaskArgs struct {
	TaskID        string        `json:"task_id"`
	Prompt        *string       `json:"prompt,omitempty"`
	ScheduleType  *ScheduleKind `json:"schedule_type,omitempty"`
	ScheduleValue *string       `json:"schedule_value,omitempty"`
}

// TaskIDArgs are the arguments of pause_task, resume_task and cancel_task.
type TaskIDArgs struct {
	TaskID string `json:"task_id"`
	kind   RequestType
}

// RegisterGroupArgs are register_group's arguments.
type RegisterGroupArgs struct {
	Chat            string `json:"chat"`
	Name            string `json:"name"`
	Folder          string `json:"folder"`
	Trigger         string `json:"trigger,omitempty"`
	RequiresTrigger *bool  `json:"requires_trigger,omitempty"`
}

// ListGroupsArgs are list_groups's arguments.
type ListGroupsArgs struct {
	Refresh bool `json:"refresh,omitempty"`
}

// AskApprovalArgs ask the owner whether a tool call may run: the CLI's
// can_use_tool request, as the runner got it. The host answers with an
// ApprovalDecision once the owner (or the timeout) decided.
type AskApprovalArgs struct {
	Tool      string          `json:"tool"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
}

// ApprovalDecision is the data of an ask_approval response.
type ApprovalDecision struct {
	Allow bool `json:"allow"`
	// Message says why, for the model, when the call is denied.
	Message string `json:"message,omitempty"`
	// ID is the approval request's short id ("" when a standing rule
	// allowed the call without asking).
	ID string `json:"id,omitempty"`
}

// MaxApprovalInputBytes bounds an ask_approval's tool input.
const MaxApprovalInputBytes = 256 << 10

func (AskApprovalArgs) requestType() RequestType { return TypeAskApproval }

// Validate checks ask_approval's arguments.
func (a AskApprovalArgs) Validate() error {
	if !ValidToolName(a.Tool) {
		return invalidf("tool name %q is not an identifier (letters, digits, _ and -, at most %d bytes)", clip(a.Tool), MaxToolName)
	}
	if len(a.Input) > MaxApprovalInputBytes {
		return invalidf("input is %d bytes, over the %d-byte limit", len(a.Input), MaxApprovalInputBytes)
	}
	if t := bytes.TrimSpace(a.Input); len(t) == 0 || t[0] != '{' {
		return invalidf("input must be a JSON object")
	}
	if !ValidToolUseID(a.ToolUseID) {
		return invalidf("tool_use_id %q is not an identifier (letters, digits, _ and -, at most %d bytes)", clip(a.ToolUseID), MaxToolUseID)
	}
	return nil
}

// ErrApprovalRefused is wrapped by the errors of an ask_approval that is
// refused before the owner is asked (too many open, a planted request):
// the response says why, and the runner denies the tool call with it.
var ErrApprovalRefused = errors.New("approval refused")

// Bounds of the names of a tool call.
const (
	MaxToolName  = 64
	MaxToolUseID = 128
)

// ValidToolName reports whether name is a tool's name: an identifier of
// ASCII letters, digits, "_" and "-" (mcp__server__tool included), at most
// MaxToolName bytes, starting with a letter.
func ValidToolName(name string) bool {
	return len(name) <= MaxToolName && identifier(name)
}

// ValidToolUseID reports whether id is a tool call's id: an identifier of
// ASCII letters, digits, "_" and "-", at most MaxToolUseID bytes.
func ValidToolUseID(id string) bool {
	return len(id) <= MaxToolUseID && identifier(id)
}

func identifier(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// clip quotes at most 40 bytes of a refused name in an error.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func (SendMessageArgs) requestType() RequestType   { return TypeSendMessage }
func (ScheduleTaskArgs) requestType() RequestType  { return TypeScheduleTask }
func (ListTasksArgs) requestType() RequestType     { return TypeListTasks }
func (UpdateTaskArgs) requestType() RequestType    { return TypeUpdateTask }
func (a TaskIDArgs) requestType() RequestType      { return a.kind }
func (RegisterGroupArgs) requestType() RequestType { return TypeRegisterGroup }
func (ListGroupsArgs) requestType() RequestType    { return TypeListGroups }

// Validate checks send_message's arguments.
func (a SendMessageArgs) Validate() error {
	if err := checkText("text", a.Text, true); err != nil {
		return err
	}
	if len(a.File) > MaxFileArgBytes {
		return invalidf("file is %d bytes, over the %d-byte limit", len(a.File), MaxFileArgBytes)
	}
	if err := checkText("file", a.File, false); err != nil {
		return err
	}
	return checkText("target_chat", a.TargetChat, false)
}

// ValidKind reports whether k is a known schedule kind.
func ValidKind(k ScheduleKind) bool { return k.Valid() }

// Validate checks schedule_task's arguments, except the schedule value's syntax.
func (a ScheduleTaskArgs) Validate() error {
	if err := checkText("prompt", a.Prompt, true); err != nil {
		return err
	}
	if !ValidKind(a.ScheduleType) {
		return invalidf("schedule_type must be cron, interval or once, not %q", a.ScheduleType)
	}
	if strings.TrimSpace(a.ScheduleValue) == "" {
		return invalidf("schedule_value is empty")
	}
	switch a.ContextMode {
	case "", ContextGroup, ContextIsolated:
	default:
		return invalidf("context_mode must be group or isolated, not %q", a.ContextMode)
	}
	return nil
}

// Validate checks list_tasks's arguments.
func (ListTasksArgs) Validate() error { return nil }

// Validate checks update_task's arguments.
func (a UpdateTaskArgs) Validate() error {
	if strings.TrimSpace(a.TaskID) == "" {
		return invalidf("task_id is empty")
	}
	if a.Prompt != nil {
		if err := checkText("prompt", *a.Prompt, true); err != nil {
			return err
		}
	}
	if (a.ScheduleType == nil) != (a.ScheduleValue == nil) {
		return invalidf("schedule_type and schedule_value must be changed together")
	}
	if a.ScheduleType != nil && !ValidKind(*a.ScheduleType) {
		return invalidf("schedule_type must be cron, interval or once, not %q", *a.ScheduleType)
	}
	if a.Prompt == nil && a.ScheduleType == nil {
		return invalidf("nothing to update: give prompt or schedule_type and schedule_value")
	}
	return nil
}

// Validate checks a task id argument.
func (a TaskIDArgs) Validate() error {
	if strings.TrimSpace(a.TaskID) == "" {
		return invalidf("task_id is empty")
	}
	return nil
}

// Validate checks register_group's arguments (the folder name is checked again
// by the store, which owns the rule).
func (a RegisterGroupArgs) Validate() error {
	if strings.TrimSpace(a.Chat) == "" {
		return invalidf("chat is empty")
	}
	if strings.TrimSpace(a.Name) == "" {
		return invalidf("name is empty")
	}
	if strings.TrimSpace(a.Folder) == "" {
		return invalidf("folder is empty")
	}
	return nil
}

// Validate checks list_groups's arguments.
func (ListGroupsArgs) Validate() error { return nil }

// Request is requests/<id>.json: {"id":"…","type":"…","args":{…}}.
type Request struct {
	ID   string
	Type RequestType
	Args Args
}

type requestEnvelope struct {
	ID   string          `json:"id"`
	Type RequestType     `json:"type"`
	Args json.RawMessage `json:"args"`
}

// The length is checked apart: a bounded repetition ({0,127}) compiles to a
// program the daemon would hold for its whole life.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidID reports whether id is safe to use as a file-name stem: at most 128
// letters, digits, '.', '_' or '-', starting with a letter or digit.
func ValidID(id string) bool { return len(id) <= 128 && idPattern.MatchString(id) }

// NewRequest builds a request with a fresh id.
func NewRequest(args Args) Request {
	return Request{ID: NewName(), Type: args.requestType(), Args: args}
}

// NewTaskIDRequest builds a pause_task, resume_task or cancel_task request.
func NewTaskIDRequest(t RequestType, taskID string) (Request, error) {
	switch t {
	case TypePauseTask, TypeResumeTask, TypeCancelTask:
	default:
		return Request{}, invalidf("%s does not take a task id alone", t)
	}
	return NewRequest(TaskIDArgs{TaskID: taskID, kind: t}), nil
}

// MarshalJSON encodes the request envelope.
func (r Request) MarshalJSON() ([]byte, error) {
	args, err := json.Marshal(r.Args)
	if err != nil {
		return nil, err
	}
	return json.Marshal(requestEnvelope{ID: r.ID, Type: r.Type, Args: args})
}

// FileName is the request's (and its response's) file name.
func (r Request) FileName() string { return r.ID + ".json" }

// DecodeRequest decodes a request file in two steps (envelope, then the args
// for its type, unknown fields rejected) and validates it. When the envelope's
// id is readable but the rest is not, the returned Request still carries the
// id so the caller can answer it.
func DecodeRequest(data []byte) (Request, error) {
	var env requestEnvelope
	if err := decodeStrict(data, &env); err != nil {
		return Request{}, err
	}
	r := Request{ID: env.ID, Type: env.Type}
	if !ValidID(env.ID) {
		return Request{Type: env.Type}, invalidf("request id %q is not a valid id", env.ID)
	}
	raw := env.Args
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = []byte("{}")
	}
	var err error
	switch env.Type {
	case TypeSendMessage:
		r.Args, err = decodeArgs(raw, SendMessageArgs{})
	case TypeScheduleTask:
		r.Args, err = decodeArgs(raw, ScheduleTaskArgs{})
	case TypeListTasks:
		r.Args, err = decodeArgs(raw, ListTasksArgs{})
	case TypeUpdateTask:
		r.Args, err = decodeArgs(raw, UpdateTaskArgs{})
	case TypePauseTask, TypeResumeTask, TypeCancelTask:
		r.Args, err = decodeArgs(raw, TaskIDArgs{kind: env.Type})
	case TypeRegisterGroup:
		r.Args, err = decodeArgs(raw, RegisterGroupArgs{})
	case TypeListGroups:
		r.Args, err = decodeArgs(raw, ListGroupsArgs{})
	case TypeAskApproval:
		r.Args, err = decodeArgs(raw, AskApprovalArgs{})
	default:
		return r, invalidf("unknown request type %q", env.Type)
	}
	if err != nil {
		return r, fmt.Errorf("%s args: %w", env.Type, err)
	}
	if err := r.Args.Validate(); err != nil {
		return r, fmt.Errorf("%s args: %w", env.Type, err)
	}
	return r, nil
}

// decodeArgs decodes raw strictly into a copy of zero and returns it as a
// value, so callers can type-switch on values.
func decodeArgs[T Args](raw []byte, zero T) (Args, error) {
	if err := decodeStrict(raw, &zero); err != nil {
		return nil, err
	}
	return zero, nil
}
