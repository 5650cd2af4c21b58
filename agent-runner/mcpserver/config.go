// Package mcpserver is the stdio MCP server "bridge" that `agent-runner mcp`
// runs inside a group's container (DESIGN §8, §9).
//
// Each tool validates its arguments, checks what this group may do, then writes
// a request file into the group's IPC namespace (requests/<id>.json) and waits
// for the host's answer in responses/<id>.json. The agent is told exactly what
// happened: the task id and next run of a scheduled task, the host's error text,
// or that the host did not answer in time. On the kubernetes engine
// (Config.Channel) the request is posted to the host over the run's channel
// instead, and sent again with its id after a dropped connection.
//
// Identity (group folder, chat, main or not) comes only from Config, which
// agent-runner fills from the environment of the MCP server entry in
// --mcp-config; tool arguments never change it. stdout carries JSON-RPC only:
// logs go to stderr.
package mcpserver

import (
	"fmt"
	"os"
	"strings"
	"time"
	_ "time/tzdata" // the container image has no zoneinfo

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// Environment variables read by ConfigFromEnv.
const (
	EnvIPCDir   = "BRIDGED_MCP_IPC_DIR"
	EnvGroup    = "BRIDGED_MCP_GROUP"
	EnvChat     = "BRIDGED_MCP_CHAT"
	EnvIsMain   = "BRIDGED_MCP_IS_MAIN"
	EnvTimezone = "BRIDGED_MCP_TIMEZONE"
	EnvTimeout  = "BRIDGED_MCP_TIMEOUT"
)

// DefaultTimeout is how long a tool waits for the host's response.
const DefaultTimeout = 30 * time.Second

// Config is the server's identity and settings.
type Config struct {
	// IPCDir is the root of the group's IPC namespace (/workspace/ipc).
	IPCDir string
	// Channel, when set (ipc.EnvChannel, the kubernetes engine), is the
	// base URL of the run's IPC channel (the runner's loopback forwarder):
	// the requests go there instead of into IPCDir.
	Channel string
	// Group is the group's folder name.
	Group string
	// Chat is the chat id the group is registered for.
	Chat string
	// IsMain is true for the main group, which may act on other groups.
	IsMain bool
	// Timezone is the configured timezone: cron expressions and local times
	// are read in it.
	Timezone *time.Location
	// Timeout bounds the wait for the host's response to one request.
	Timeout time.Duration
	// Log receives the server's logs; the zero value logs nothing.
	// ConfigFromEnv sets a JSON logger on stderr.
	Log zerolog.Logger
}

// ConfigFromEnv reads the configuration from the BRIDGED_MCP_* variables.
// An invalid or missing value is an error naming the variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{
		IPCDir:  strings.TrimSpace(getenv(EnvIPCDir)),
		Channel: strings.TrimSpace(getenv(ipc.EnvChannel)),
		Group:   strings.TrimSpace(getenv(EnvGroup)),
		Chat:    strings.TrimSpace(getenv(EnvChat)),
		Timeout: DefaultTimeout,
	}
	for _, req := range []struct{ name, val string }{
		{EnvIPCDir, cfg.IPCDir}, {EnvGroup, cfg.Group}, {EnvChat, cfg.Chat},
	} {
		if req.val == "" {
			return Config{}, fmt.Errorf("%s is not set", req.name)
		}
	}
	switch v := strings.TrimSpace(getenv(EnvIsMain)); strings.ToLower(v) {
	case "1", "true":
		cfg.IsMain = true
	case "", "0", "false":
	default:
		return Config{}, fmt.Errorf("%s=%q: want 1 or 0", EnvIsMain, v)
	}
	tz := strings.TrimSpace(getenv(EnvTimezone))
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return Config{}, fmt.Errorf("%s=%q: %w", EnvTimezone, tz, err)
	}
	cfg.Timezone = loc
	if v := strings.TrimSpace(getenv(EnvTimeout)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("%s=%q: want a positive Go duration such as 30s", EnvTimeout, v)
		}
		cfg.Timeout = d
	}
	cfg.Log = zerolog.New(os.Stderr).With().Timestamp().
		Str("component", "mcp").Str("group", cfg.Group).Logger()
	return cfg, nil
}

func (c Config) validate() error {
	if c.IPCDir == "" && c.Channel == "" {
		return errNoWay
	}
	if c.Group == "" || c.Chat == "" {
		return fmt.Errorf("no group identity")
	}
	return nil
}

func (c Config) location() *time.Location {
	if c.Timezone == nil {
		return time.UTC
	}
	return c.Timezone
}

func (c Config) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}
