package agentrun

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/prompt"
)

// APIRefusal is an error of the Claude API that waiting cannot heal: the
// credential was refused, the key lacks a permission, the account has no
// credit, or the request itself is invalid. A turn that ends on one fails
// at once: it is not retried (the error wraps groupqueue.ErrNoRetry) and
// its messages are not run again later; the chat is told the fix.
type APIRefusal struct {
	Status int    // HTTP status (0: not known)
	Type   string // the API's error type, e.g. "authentication_error"
	Kind   string // "authentication", "permission", "billing", "invalid request"
	Text   string // the CLI's error text, one line
}

func (e *APIRefusal) Error() string {
	return fmt.Sprintf("the Claude API refused the request (%s): %s", e.Label(), prompt.Clip(e.Text, 200))
}

// Is makes the queue end the retry sequence at once.
func (e *APIRefusal) Is(target error) bool { return target == groupqueue.ErrNoRetry }

// Label is the kind with the status, e.g. "authentication, 401".
func (e *APIRefusal) Label() string {
	if e.Status == 0 {
		return e.Kind
	}
	return fmt.Sprintf("%s, %d", e.Kind, e.Status)
}

// Fix says what the owner must do, one sentence.
func (e *APIRefusal) Fix() string {
	switch e.Kind {
	case "authentication":
		return "the API key (or OAuth token) was refused: set a valid ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN) in bridged's .env and restart bridged"
	case "permission":
		return "the credential is not allowed this request: check the key's workspace and model access in the Claude Console, or use another key, then restart bridged"
	case "billing":
		return "the account has no credit left: add credit (Claude Console, Plans & Billing) or use another key"
	default:
		return "the API rejected the request as invalid: check the group's model and settings (BRIDGED_ANTHROPIC_URL, .claude/settings.json) and the run log under data/logs"
	}
}

// Notice is the line the chat gets when a turn failed on e.
func (e *APIRefusal) Notice() string {
	return fmt.Sprintf("Sorry, I could not answer: %s (%s). This message will not be tried again.", e.Fix(), e.Label())
}

// AsAPIRefusal returns the APIRefusal err wraps, if any.
func AsAPIRefusal(err error) (*APIRefusal, bool) {
	var r *APIRefusal
	ok := errors.As(err, &r)
	return r, ok
}

// classifyAPIError returns the refusal a failed turn's API error is, nil for
// one that may heal by waiting (overload, rate limit, server errors, a lost
// connection). status and typ are the result's api_error_status and
// api_error_type; text its error text.
func classifyAPIError(status int, typ, text string) *APIRefusal {
	kind := ""
	lower := strings.ToLower(text)
	switch {
	case typ == "billing_error" || status == 402 || strings.Contains(lower, "credit balance is too low"):
		kind = "billing"
	case typ == "authentication_error" || status == 401 || strings.Contains(lower, "invalid api key"):
		kind = "authentication"
	case typ == "permission_error" || status == 403:
		kind = "permission"
	case typ == "invalid_request_error" || typ == "not_found_error" || typ == "request_too_large" ||
		status == 400 || status == 404 || status == 413:
		kind = "invalid request"
	default:
		return nil
	}
	return &APIRefusal{Status: status, Type: typ, Kind: kind, Text: prompt.OneLine(text)}
}
