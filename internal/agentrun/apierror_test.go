package agentrun

import (
	"errors"
	"testing"

	"github.com/bridged-app/bridged/internal/groupqueue"
)

// Errors that waiting cannot heal are refusals, never retried; overload,
// rate limits, server errors and lost connections are not.
func TestClassifyAPIError(t *testing.T) {
	for _, c := range []struct {
		status int
		typ    string
		text   string
		kind   string
	}{
		{401, "authentication_error", "API Error: 401 invalid x-api-key", "authentication"},
		{0, "", "Invalid API key · Please run /login", "authentication"},
		{403, "permission_error", "API Error: 403", "permission"},
		{400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API.", "billing"},
		{402, "", "payment required", "billing"},
		{400, "invalid_request_error", "API Error: 400 bad request", "invalid request"},
		{404, "not_found_error", "model: nope", "invalid request"},
		{529, "overloaded_error", "API Error: Repeated 529 Overloaded errors", ""},
		{500, "api_error", "API Error: 500", ""},
		{429, "rate_limit_error", "API Error: 429", ""},
		{0, "", "API Error: connection refused", ""},
	} {
		r := classifyAPIError(c.status, c.typ, c.text)
		switch {
		case c.kind == "" && r != nil:
			t.Errorf("%d %s %q: refusal %q; want it retried", c.status, c.typ, c.text, r.Kind)
		case c.kind != "" && (r == nil || r.Kind != c.kind):
			t.Errorf("%d %s %q: %+v; want kind %q", c.status, c.typ, c.text, r, c.kind)
		case r != nil && !errors.Is(r, groupqueue.ErrNoRetry):
			t.Errorf("%+v does not end the retries", r)
		}
	}
	o := Outcome{AgentErr: "x", Refusal: classifyAPIError(401, "authentication_error", "x")}
	if r, ok := AsAPIRefusal(o.Failure()); !ok || r.Kind != "authentication" {
		t.Errorf("Failure() = %v; want it to carry the refusal", o.Failure())
	}
}
