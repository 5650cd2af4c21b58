package credproxy

import (
	"errors"
	"net/http"
	"sync"
	"time"
)

// OAuthWarning is said at start and by doctor when the credential is a
// Claude subscription's OAuth token.
const OAuthWarning = "CLAUDE_CODE_OAUTH_TOKEN is a Claude subscription token: since April 2026 a subscription token used by a third-party harness such as bridged is billed as extra usage, not from the plan; an API key (ANTHROPIC_API_KEY, from console.anthropic.com) is recommended"

// ErrRefused is wrapped by Check's error when the upstream refused the
// credential (401 or 403).
var ErrRefused = errors.New("credential refused")

// refusedError is Check's error for a refused credential.
type refusedError string

func (e refusedError) Error() string        { return string(e) }
func (e refusedError) Is(target error) bool { return target == ErrRefused }

// CredentialState is what the upstream said of the credential since the
// proxy started: how many forwarded requests it accepted (2xx) and refused
// as unauthenticated (401), and when it last did each. A key added to the
// env file without a restart, or revoked, shows here as refusals: the
// daemon still uses the credential it started with.
type CredentialState struct {
	Accepted     int64
	Refused      int64
	LastAccepted time.Time
	LastRefused  time.Time
}

// RefusedNow reports whether the upstream's latest verdict on the
// credential was a refusal.
func (s CredentialState) RefusedNow() bool {
	return s.Refused > 0 && !s.LastRefused.Before(s.LastAccepted)
}

// credTally counts the upstream's verdicts on the credential.
type credTally struct {
	mu sync.Mutex
	s  CredentialState
}

// note records the status of one forwarded request.
func (c *credTally) note(code int, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case code == http.StatusUnauthorized:
		c.s.Refused++
		c.s.LastRefused = now
	case code/100 == 2:
		c.s.Accepted++
		c.s.LastAccepted = now
	}
}

// CredentialState returns the upstream's verdicts on the credential since
// the proxy started.
func (p *Proxy) CredentialState() CredentialState {
	p.tally.mu.Lock()
	defer p.tally.mu.Unlock()
	return p.tally.s
}
