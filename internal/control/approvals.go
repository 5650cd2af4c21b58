package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// Approvals is the approval service as the API uses it (internal/approvals).
type Approvals interface {
	List(ctx context.Context, openOnly bool, limit int) ([]store.Approval, error)
	Decide(ctx context.Context, id string, allow, always bool, by string) (store.Approval, error)
	Rules(ctx context.Context) ([]store.ApprovalRule, error)
	Forget(ctx context.Context, id int64) error
}

// Approval is an approval request and its decision (GET /v1/approvals).
type Approval struct {
	ID        string     `json:"id"`
	Folder    string     `json:"folder"`
	Tool      string     `json:"tool"`
	Subject   string     `json:"subject"`
	Rule      string     `json:"rule"`
	State     string     `json:"state"` // open, allowed or denied
	AskedAt   time.Time  `json:"asked_at"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	DecidedBy string     `json:"decided_by,omitempty"`
	Always    bool       `json:"always,omitempty"`
}

// ApprovalRule is a standing rule added by an approval with always.
type ApprovalRule struct {
	ID        int64     `json:"id"`
	Folder    string    `json:"folder"`
	Rule      string    `json:"rule"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by,omitempty"`
}

// ApprovalDecision decides a request (POST /v1/approvals/{id}/approve or
// deny); Always (approve only) adds its rule to the group's standing rules.
type ApprovalDecision struct {
	Always bool `json:"always,omitempty"`
}

func approvalOut(a store.Approval) Approval {
	out := Approval{ID: a.ID, Folder: string(a.Folder), Tool: a.Tool, Subject: a.Subject, Rule: a.Rule,
		State: string(a.State), AskedAt: a.AskedAt, DecidedBy: a.DecidedBy, Always: a.Always}
	if !a.DecidedAt.IsZero() {
		t := a.DecidedAt
		out.DecidedAt = &t
	}
	return out
}

func (s *Server) approvals(w http.ResponseWriter) (Approvals, bool) {
	if s.opts.Approvals == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("approvals are not available"))
		return nil, false
	}
	return s.opts.Approvals, true
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	ap, ok := s.approvals(w)
	if !ok {
		return
	}
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	as, err := ap.List(r.Context(), r.URL.Query().Get("open") == "1", max(limit, 0))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]Approval, 0, len(as))
	for _, a := range as {
		out = append(out, approvalOut(a))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request) {
	ap, ok := s.approvals(w)
	if !ok {
		return
	}
	var allow bool
	switch r.PathValue("action") {
	case "approve":
		allow = true
	case "deny":
	default:
		s.fail(w, r, fmt.Errorf("%w: unknown action %q (want approve or deny)", ErrInvalid, r.PathValue("action")))
		return
	}
	var d ApprovalDecision
	if r.ContentLength != 0 {
		if err := decode(w, r, &d); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	a, err := ap.Decide(r.Context(), r.PathValue("id"), allow, d.Always && allow, "cli")
	if err != nil {
		if a.ID != "" {
			s.fail(w, r, fmt.Errorf("%w: %w", ErrConflict, err))
			return
		}
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, approvalOut(a))
}

func (s *Server) listApprovalRules(w http.ResponseWriter, r *http.Request) {
	ap, ok := s.approvals(w)
	if !ok {
		return
	}
	rs, err := ap.Rules(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]ApprovalRule, 0, len(rs))
	for _, x := range rs {
		out = append(out, ApprovalRule{ID: x.ID, Folder: string(x.Folder), Rule: x.Rule, CreatedAt: x.CreatedAt, CreatedBy: x.CreatedBy})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) forgetApprovalRule(w http.ResponseWriter, r *http.Request) {
	ap, ok := s.approvals(w)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: rule id %q is not a number", ErrInvalid, r.PathValue("id")))
		return
	}
	if err := ap.Forget(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Approvals lists approval requests, newest first; openOnly keeps the open
// ones; limit 0 lists all.
func (c *Client) Approvals(ctx context.Context, openOnly bool, limit int) ([]Approval, error) {
	var out []Approval
	q := "?limit=" + strconv.Itoa(limit)
	if openOnly {
		q += "&open=1"
	}
	err := c.do(ctx, http.MethodGet, "/v1/approvals"+q, nil, &out)
	return out, err
}

// DecideApproval approves (with always: from now on) or denies request id.
func (c *Client) DecideApproval(ctx context.Context, id string, allow, always bool) (Approval, error) {
	action := "deny"
	if allow {
		action = "approve"
	}
	var out Approval
	err := c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/"+action, ApprovalDecision{Always: always}, &out)
	return out, err
}

// ApprovalRules lists the standing rules.
func (c *Client) ApprovalRules(ctx context.Context) ([]ApprovalRule, error) {
	var out []ApprovalRule
	err := c.do(ctx, http.MethodGet, "/v1/approvals/rules", nil, &out)
	return out, err
}

// ForgetApprovalRule removes standing rule id.
func (c *Client) ForgetApprovalRule(ctx context.Context, id int64) error {
	return c.do(ctx, http.MethodDelete, "/v1/approvals/rules/"+strconv.FormatInt(id, 10), nil, nil)
}
