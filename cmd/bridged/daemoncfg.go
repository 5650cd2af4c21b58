package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/credproxy"
)

// daemonConfig is the daemon's control.ConfigSource: the configuration it
// started with and its proxy's verdicts on the credential.
type daemonConfig struct {
	cfg   *config.Config
	proxy *credproxy.Proxy
}

func (d daemonConfig) DaemonConfig() control.DaemonConfig {
	c := control.Credential{Variable: credVariable(d.cfg), Source: "daemon", State: control.CredNone}
	if d.proxy != nil && d.proxy.Mode() != credproxy.ModeNone {
		s := d.proxy.CredentialState()
		c.Accepted, c.Refused = s.Accepted, s.Refused
		c.LastAccepted, c.LastRefused = timePtr(s.LastAccepted), timePtr(s.LastRefused)
		switch {
		case s.RefusedNow():
			c.State = control.CredRefused
		case s.Accepted > 0:
			c.State = control.CredAccepted
		default:
			c.State = control.CredUnused
		}
	}
	return control.DaemonConfig{Values: d.cfg.Values(), Credential: c}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// credVariable is the variable the proxy takes its credential from (the
// API key wins), "" for none.
func credVariable(cfg *config.Config) string {
	for _, k := range []string{config.EnvAPIKey, config.EnvOAuthToken} {
		if cfg.Secrets[k] != "" {
			return k
		}
	}
	return ""
}

// filesCredential is the credential the files and the environment
// configure, for a stopped daemon.
func filesCredential(cfg *config.Config) control.Credential {
	c := control.Credential{Variable: credVariable(cfg), Source: "files", State: control.CredConfigured}
	if c.Variable == "" {
		c.State = control.CredNone
	}
	return c
}

// askDaemon returns the running daemon's configuration, or ok false when
// no daemon runs (or it is one that does not report it).
func askDaemon(ctx context.Context, cfg *config.Config) (dc control.DaemonConfig, ok bool, err error) {
	c := control.NewClient(cfg.Socket())
	running, err := daemonRunning(ctx, c, cfg.Socket())
	if err != nil || !running {
		return dc, false, err
	}
	hctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if dc, err = c.Config(hctx); err != nil {
		return dc, false, nil
	}
	return dc, true, nil
}

// credentialLine says how the agents reach Claude and what the upstream
// said of the credential: the running daemon's (c.Source "daemon") or the
// one the files configure.
func credentialLine(c control.Credential, upstream, network string) string {
	if c.State == control.CredNone {
		return "Claude API: NO CREDENTIAL: " + credproxy.NoCredentialMessage + " (until then the agents' API requests are answered 401)"
	}
	which := c.Variable + " is set"
	if c.Source == "daemon" {
		which = "the daemon's " + c.Variable
	}
	line := fmt.Sprintf("Claude API: %s through the daemon's credential proxy (%s; it never enters a container; network %s)", upstream, which, network)
	switch c.State {
	case control.CredRefused:
		line += fmt.Sprintf("\n  REFUSED: the upstream answered %d request(s) 401 since the daemon started, last at %s: the daemon's %s is not accepted. Fix it in the env file and restart bridged (the daemon reads it only at start).",
			c.Refused, c.LastRefused.Local().Format(time.TimeOnly), c.Variable)
	case control.CredAccepted:
		line += fmt.Sprintf("\n  accepted: %d request(s) succeeded since the daemon started", c.Accepted)
	case control.CredUnused:
		line += "\n  not used yet since the daemon started"
	case control.CredConfigured:
		line += "\n  set in the files; bridged is not running, so nobody has asked the upstream (`bridged doctor` does)"
	}
	return line
}

// filesValues is what the env file and the environment (and the command's
// own flags) set in files: a default is no value they hold, so a daemon
// started with a flag (`make run IMAGE=…`) is not said to be overruled by
// the files.
func filesValues(files *config.Config) map[string]string {
	out := map[string]string{}
	for k, v := range files.Values() {
		if files.Given[k] {
			out[k] = v
		}
	}
	return out
}

// differences lists the variables whose value the files give now differs
// from the running daemon's: they take effect at the next start.
func differences(daemon, files map[string]string) []string {
	var out []string
	for k, v := range daemon {
		if f, ok := files[k]; ok && f != v && k != "BRIDGED_ENV_FILE" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// daemonFiles is the configuration the files give now, to compare with a
// running daemon's: when the command was given no env file (--env-file,
// BRIDGED_ENV_FILE), the daemon's own is read, so that the answer is the
// same from any directory. cfg is what the command resolved; on any error
// it stands.
func (a *app) daemonFiles(fs *flag.FlagSet, cf *config.Flags, cfg *config.Config, daemon map[string]string) *config.Config {
	explicit := a.getenv("BRIDGED_ENV_FILE") != ""
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "env-file" })
	env := daemon["BRIDGED_ENV_FILE"]
	if explicit || env == "" || env == cfg.EnvFile {
		return cfg
	}
	files, err := cf.Resolve(func(k string) string {
		if k == "BRIDGED_ENV_FILE" {
			return env
		}
		return a.getenv(k)
	})
	if err != nil {
		return cfg
	}
	a.noteUnknown(files)
	return files
}

// printValues prints values one KEY=VALUE a line, sorted, each the files
// now give otherwise after a comment line saying so.
func printValues(w interface{ Write([]byte) (int, error) }, values, files map[string]string) {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	differ := map[string]bool{}
	if files != nil {
		for _, k := range differences(values, files) {
			differ[k] = true
		}
	}
	for _, k := range keys {
		if differ[k] {
			fmt.Fprintf(w, "# %s: the files now say %s, which takes effect when bridged restarts\n", k, strings.TrimSpace(files[k]))
		}
		fmt.Fprintf(w, "%s=%s\n", k, values[k])
	}
}

// withDaemonValues returns a copy of cfg with the settings the checks and
// status read taken from the running daemon's values; a value that does
// not parse keeps the files' (it is shown as is by `config`).
func withDaemonValues(cfg *config.Config, v map[string]string) *config.Config {
	c := *cfg
	set := func(k string, dst *string) {
		if s, ok := v[k]; ok {
			*dst = s
		}
	}
	set("BRIDGED_IMAGE", &c.Image)
	set("BRIDGED_ANTHROPIC_URL", &c.AnthropicURL)
	set("BRIDGED_CONTAINER_NETWORK", &c.ContainerNetwork)
	set("BRIDGED_MOUNT_ALLOWLIST", &c.MountAllowlist)
	set("BRIDGED_TRANSCRIBE_URL", &c.TranscribeURL)
	set("BRIDGED_TRANSCRIBE_MODEL", &c.TranscribeModel)
	if loc, err := time.LoadLocation(v["BRIDGED_TIMEZONE"]); err == nil {
		c.Timezone = loc
	}
	if d, err := time.ParseDuration(v["BRIDGED_IDLE_TIMEOUT"]); err == nil {
		c.IdleTimeout = d
	}
	if d, err := config.ParseRetention(v["BRIDGED_RETENTION"]); err == nil {
		c.Retention = d
	}
	if on, err := strconv.ParseBool(v["BRIDGED_REMOTE_CONTROL"]); err == nil {
		c.RemoteControl = on
	}
	set("BRIDGED_REMOTE_CONTROL_CLI", &c.RemoteControlCLI)
	return &c
}
