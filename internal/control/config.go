package control

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// DaemonConfig is the running daemon's effective configuration (GET
// /v1/config): what it started with, which the files may no longer say.
type DaemonConfig struct {
	// Values is every configuration variable by name, as `bridged config`
	// prints it: secrets masked.
	Values map[string]string `json:"values"`
	// Credential is the Claude credential the daemon's proxy uses and what
	// the upstream said of it since the daemon started.
	Credential Credential `json:"credential"`
}

// Credential states.
const (
	// CredNone: no credential; the proxy answers every request 401.
	CredNone = "none"
	// CredUnused: no request went upstream since the daemon started.
	CredUnused = "unused"
	// CredAccepted: the upstream's latest verdict was a success.
	CredAccepted = "accepted"
	// CredRefused: the upstream's latest verdict was 401.
	CredRefused = "refused"
	// CredConfigured: read from the files and the environment with no
	// daemon running; nobody asked the upstream.
	CredConfigured = "configured"
)

// Credential is the state of the Claude credential.
type Credential struct {
	// Variable is the variable the credential came from
	// (ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN); "" for none.
	Variable string `json:"variable"`
	// Source is "daemon" (the running daemon's) or "files" (the env file
	// and the environment, no daemon running).
	Source string `json:"source"`
	// State is one of the Cred… constants.
	State        string     `json:"state"`
	Accepted     int64      `json:"accepted,omitempty"`
	Refused      int64      `json:"refused,omitempty"`
	LastAccepted *time.Time `json:"last_accepted,omitempty"`
	LastRefused  *time.Time `json:"last_refused,omitempty"`
}

// ConfigSource gives the daemon's effective configuration.
type ConfigSource interface {
	DaemonConfig() DaemonConfig
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) {
	if s.opts.Config == nil {
		writeError(w, http.StatusServiceUnavailable, errNoConfig)
		return
	}
	writeJSON(w, http.StatusOK, s.opts.Config.DaemonConfig())
}

// errNoConfig answers GET /v1/config of a server built without a
// ConfigSource.
var errNoConfig = errors.New("this daemon does not report its configuration")

// Config returns the running daemon's effective configuration.
func (c *Client) Config(ctx context.Context) (DaemonConfig, error) {
	var dc DaemonConfig
	err := c.do(ctx, http.MethodGet, "/v1/config", nil, &dc)
	return dc, err
}
