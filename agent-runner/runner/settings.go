package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/claudecli"
	"github.com/bridged-app/bridged/internal/ipc"
)

// MaxGroupMemory bounds the group's CLAUDE.md appended to the system prompt
// outside the full profile; a longer file is cut there.
const MaxGroupMemory = 64 << 10

// settingsConfig sets where c's settings come from. The full profile loads
// the user and project settings (the agent may do anything anyway). Every
// other profile loads no file the agent can write: no setting sources (no
// user, project or local settings, skills, agents, commands, CLAUDE.md), no
// MCP server but the runner's own (--strict-mcp-config), and bridged's own
// settings as flag settings (--settings). The daemon's managed settings,
// which the CLI always loads, lock the rest (ipc.ContainerManagedSettings).
func settingsConfig(c *claudecli.Config, profile string) error {
	if normProfile(profile) == ProfileFull {
		c.SettingSources = []string{"project", "user"}
		return nil
	}
	b, err := json.Marshal(struct {
		Env map[string]string `json:"env"`
	}{ipc.SettingsEnv()})
	if err != nil {
		return fmt.Errorf("encode settings: %w", err)
	}
	c.SettingSources = []string{}
	c.StrictMCPConfig = true
	c.Settings = string(b)
	return nil
}

// groupMemory reads the group's CLAUDE.md at path, at most MaxGroupMemory
// bytes of it; a missing file, or anything but a regular file, is "".
func groupMemory(path string, log zerolog.Logger) string {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return ""
	case err != nil:
		log.Warn().Err(err).Msg("group CLAUDE.md unreadable; not appended")
		return ""
	case !fi.Mode().IsRegular():
		log.Warn().Str("mode", fi.Mode().String()).Msg("group CLAUDE.md is not a regular file; not appended")
		return ""
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		log.Warn().Err(err).Msg("group CLAUDE.md unreadable; not appended")
		return ""
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxGroupMemory+1))
	if err != nil {
		log.Warn().Err(err).Msg("group CLAUDE.md unreadable; not appended")
		return ""
	}
	if len(data) > MaxGroupMemory {
		log.Warn().Int("limit", MaxGroupMemory).Msg("group CLAUDE.md over its limit; the rest not appended")
		data = data[:MaxGroupMemory]
	}
	return string(data)
}
