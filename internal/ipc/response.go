package ipc

import (
	"encoding/json"
	"fmt"
)

// Response is responses/<id>.json.
type Response struct {
	ID    string          `json:"id"`
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data,omitempty"`
	Error string          `json:"error,omitempty"`
}

// Validate checks a response.
func (r Response) Validate() error {
	if !ValidID(r.ID) {
		return invalidf("response id %q is not a valid id", r.ID)
	}
	if !r.OK && r.Error == "" {
		return invalidf("a failed response must say why")
	}
	return nil
}

// OKResponse builds a successful response carrying data (which may be nil).
func OKResponse(id string, data any) (Response, error) {
	r := Response{ID: id, OK: true}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return Response{}, fmt.Errorf("encode response data: %w", err)
		}
		r.Data = b
	}
	return r, nil
}

// ErrorResponse builds a failed response.
func ErrorResponse(id string, err error) Response {
	return Response{ID: id, OK: false, Error: err.Error()}
}

// DecodeResponse decodes and validates a response file.
func DecodeResponse(data []byte) (Response, error) {
	var r Response
	if err := decodeStrict(data, &r); err != nil {
		return Response{}, err
	}
	return r, r.Validate()
}

// Response data shapes, shared so both sides agree on them.

// TaskInfo describes a task in list_tasks and schedule_task answers.
type TaskInfo struct {
	ID            string       `json:"id"`
	Group         string       `json:"group"`
	Prompt        string       `json:"prompt"`
	ScheduleType  ScheduleKind `json:"schedule_type"`
	ScheduleValue string       `json:"schedule_value"`
	ContextMode   ContextMode  `json:"context_mode"`
	Status        string       `json:"status"`
	NextRun       string       `json:"next_run,omitempty"` // RFC 3339 in the configured timezone
	LastRun       string       `json:"last_run,omitempty"`
	LastResult    string       `json:"last_result,omitempty"`
}

// GroupInfo describes a chat in list_groups answers.
type GroupInfo struct {
	Chat       string `json:"chat"`
	Name       string `json:"name"`
	Folder     string `json:"folder,omitempty"` // empty when not registered
	Registered bool   `json:"registered"`
	IsMain     bool   `json:"is_main,omitempty"`
	// Kind says who is on the other side: "group" (a WhatsApp group),
	// "person" (a direct chat with one person) or "local" (a terminal
	// chat of `bridged chat`).
	Kind string `json:"kind,omitempty"`
}

// Chat kinds of GroupInfo.
const (
	ChatGroup  = "group"
	ChatPerson = "person"
	ChatLocal  = "local"
)

// SendResult answers send_message.
type SendResult struct {
	OutboxID int64  `json:"outbox_id"`
	Chat     string `json:"chat"`
	// File, when a file was sent, is its name and size as queued.
	File *FileInfo `json:"file,omitempty"`
}

// FileInfo describes a file queued with a message.
type FileInfo struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // image, audio or document
	Size int64  `json:"size"`
}
