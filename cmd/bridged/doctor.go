package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/channel/telegram"
	"github.com/bridged-app/bridged/internal/channel/whatsapp"
	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/termsafe"
	"github.com/bridged-app/bridged/internal/transcribe"
)

// check is one line of `bridged doctor`.
type check struct {
	name   string
	status string // "ok", "warn" or "FAIL"
	detail string
	hint   string
}

func (a *app) cmdDoctor(ctx context.Context, args []string) error {
	fs := a.newFlagSet("doctor", "doctor [--json] [flags]")
	asJSON := fs.Bool("json", false, "print the checks as JSON")
	cf := config.Register(fs)
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	cfg, err := cf.Resolve(a.getenv)
	if err != nil {
		if *asJSON {
			if err := writeJSON(a.stdout, doctorOutput([]check{{name: "config", status: "FAIL", detail: err.Error()}})); err != nil {
				return err
			}
			return errChecksFailed
		}
		fmt.Fprintf(a.stdout, "%-12s FAIL  %v\n", "config", err)
		return errChecksFailed
	}
	a.noteUnknown(cfg)
	// A running daemon is asked for the configuration it started with: the
	// checks describe it, not the files, which may have changed since.
	dc, running, err := askDaemon(ctx, cfg)
	if err != nil {
		running = false
	}
	files := cfg
	if running {
		files = a.daemonFiles(fs, cf, cfg, dc.Values)
	}
	cred := checkCredentials(cfg)
	conf := check{name: "config", status: "ok", detail: "bridged is not running: the checks describe the files (env file " + or(cfg.EnvFile, "none: ./.env is read when present") + ") and the environment"}
	if running {
		cfg = withDaemonValues(cfg, dc.Values)
		cred = checkDaemonCredential(dc.Credential, files)
		conf.detail = "bridged is running: the checks describe the configuration it started with (`bridged config` prints it)"
		if diff := differences(dc.Values, filesValues(files)); len(diff) > 0 {
			conf.status, conf.detail = "warn", conf.detail+"; the files now say otherwise for "+strings.Join(diff, ", ")
			conf.hint = "restart bridged for the files to take effect"
		}
	}
	if len(files.Unknown) > 0 {
		conf.status, conf.detail = "warn", conf.detail+"; "+strings.Join(files.Unknown, "; ")
	}
	checks := []check{conf}
	checks = append(checks, checkHome(cfg)...)
	checks = append(checks, checkMemory(cfg)...)
	checks = append(checks, checkDockerAndImage(ctx, cfg)...)
	upstream := checkUpstream(ctx, files, nil)
	if running && dc.Credential.State != control.CredNone && credVariable(files) == "" {
		// `export ANTHROPIC_API_KEY=…; make run`, and doctor in another
		// shell: the daemon has what this command cannot see.
		upstream = check{name: "api", status: "ok", detail: "not asked from here: the running daemon's " + dc.Credential.Variable +
			" came from its own environment, which this command does not see (the credentials line says what the upstream answered the daemon)"}
	}
	checks = append(checks, cred, upstream, checkTranscribe(ctx, cfg, nil), checkPairing(ctx, cfg), checkTelegram(ctx, cfg), checkAllowlist(cfg), checkContainerUser(cfg, os.Geteuid(), "/etc/passwd"),
		checkClock(cfg), checkDaemon(ctx, cfg))
	checks = append(checks, checkRemoteControl(cfg, exec.LookPath))
	checks = append(checks, checkSystemd(a.getenv, a.unitPaths())...)
	lib, found := whatsapp.BuiltLibrary()
	checks = append(checks, checkWhatsmeow(lib, found, buildTime(), time.Now()))
	if *asJSON {
		out := doctorOutput(checks)
		if err := writeJSON(a.stdout, out); err != nil {
			return err
		}
		if !out.OK {
			return errChecksFailed
		}
		return nil
	}
	failed := false
	for _, c := range checks {
		fmt.Fprintf(a.stdout, "%-12s %-4s  %s\n", c.name, c.status, termsafe.Text(c.detail))
		if c.hint != "" && c.status != "ok" {
			fmt.Fprintf(a.stdout, "%-12s       → %s\n", "", c.hint)
		}
		failed = failed || c.status == "FAIL"
	}
	if failed {
		return errChecksFailed
	}
	return nil
}

func checkHome(cfg *config.Config) []check {
	fi, err := os.Stat(cfg.Home)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []check{{name: "home", status: "warn", detail: cfg.Home + " does not exist yet", hint: "`bridged run` creates it"}}
	case err != nil:
		return []check{{name: "home", status: "FAIL", detail: err.Error()}}
	case !fi.IsDir():
		return []check{{name: "home", status: "FAIL", detail: cfg.Home + " is not a directory"}}
	}
	probe, err := os.CreateTemp(cfg.Home, ".doctor-*")
	if err != nil {
		return []check{{name: "home", status: "FAIL", detail: cfg.Home + " is not writable: " + err.Error(), hint: "run bridged as the owner of its home"}}
	}
	probe.Close()
	os.Remove(probe.Name())
	out := []check{{name: "home", status: "ok", detail: cfg.Home + " is writable"}}
	paths := []string{filepath.Join(cfg.Home, "store"), cfg.DataDir()}
	for _, db := range []string{cfg.StoreDB(), cfg.WhatsAppDB()} {
		paths = append(paths, db, db+"-wal", db+"-shm")
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if fi.Mode().Perm()&0o077 != 0 {
			out = append(out, check{name: "permissions", status: "warn",
				detail: fmt.Sprintf("%s is readable by others (mode %o)", p, fi.Mode().Perm()),
				hint:   "chmod go-rwx " + p + " (it holds messages and WhatsApp keys)"})
		}
	}
	if len(out) == 1 {
		out = append(out, check{name: "permissions", status: "ok", detail: "store and data are private to their owner"})
	}
	return out
}

func checkDockerAndImage(ctx context.Context, cfg *config.Config) []check {
	if cfg.Engine == container.EngineKubernetes {
		return checkKube(ctx, cfg)
	}
	d, err := container.NewDockerWith(nopLogger(), container.DockerOptions{Engine: cfg.Engine})
	if err != nil {
		return []check{{name: "docker", status: "FAIL", detail: err.Error(), hint: "check DOCKER_HOST"}}
	}
	defer d.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.Ping(cctx); err != nil {
		return []check{
			{name: "docker", status: "FAIL", detail: "the engine does not answer: " + err.Error(), hint: "start Docker, and add this user to the docker group"},
			{name: "image", status: "FAIL", detail: "cannot check " + cfg.Image + " without Docker"},
		}
	}
	out := []check{{name: "docker", status: "ok", detail: "the engine answers"}}
	if info, err := d.Info(cctx); err != nil {
		out = append(out, check{name: "engine", status: "FAIL", detail: err.Error(), hint: "set BRIDGED_ENGINE to the engine that answers, or point DOCKER_HOST at the other"})
	} else if info.Engine == container.EnginePodman {
		out = append(out, podmanChecks(info, cfg, os.Geteuid(), "/var/lib/systemd/linger")...)
		out = append(out, podmanInitCheck(podmanInitPath))
	}
	ok, err := d.ImageExists(cctx, cfg.Image)
	switch {
	case err != nil:
		out = append(out, check{name: "image", status: "FAIL", detail: err.Error()})
	case !ok:
		out = append(out, check{name: "image", status: "FAIL", detail: cfg.Image + " is not in Docker", hint: "build it with `make image` (needs Docker Hub and npm; without them `make test-image` builds bridged-agent:test, a scripted fake), or set BRIDGED_IMAGE"})
	default:
		out = append(out, check{name: "image", status: "ok", detail: cfg.Image})
	}
	return out
}

func checkCredentials(cfg *config.Config) check {
	if k := credVariable(cfg); k != "" {
		if k == config.EnvOAuthToken {
			return check{name: "credentials", status: "warn", detail: k + " is set (" + config.Mask(cfg.Secrets[k]) + ")", hint: credproxy.OAuthWarning}
		}
		return check{name: "credentials", status: "ok", detail: k + " is set (" + config.Mask(cfg.Secrets[k]) + ")"}
	}
	return check{name: "credentials", status: "FAIL", detail: "neither " + config.EnvAPIKey + " nor " + config.EnvOAuthToken + " is set",
		hint: "put one in the env file (" + or(cfg.EnvFile, "./.env") + ") or the environment"}
}

// checkDaemonCredential describes the running daemon's credential: the
// one it started with, and what the upstream said of it since.
func checkDaemonCredential(c control.Credential, files *config.Config) check {
	restart := ""
	if v := credVariable(files); v != "" && v != c.Variable {
		restart = "; the files now set " + v + ": restart bridged to use it"
	}
	switch c.State {
	case control.CredNone:
		return check{name: "credentials", status: "FAIL", detail: "the running daemon has no credential: its agents' API requests are answered 401" + restart,
			hint: "put " + config.EnvAPIKey + " in the env file (" + or(files.EnvFile, "./.env") + ") and restart bridged"}
	case control.CredRefused:
		return check{name: "credentials", status: "FAIL",
			detail: fmt.Sprintf("the running daemon's %s was refused (401) %d time(s) since it started%s", c.Variable, c.Refused, restart),
			hint:   "fix " + c.Variable + " in the env file (" + or(files.EnvFile, "./.env") + ") and restart bridged: it reads the credential only at start"}
	}
	out := check{name: "credentials", status: "ok", detail: "the running daemon's " + c.Variable + ": no request since it started" + restart}
	if c.State == control.CredAccepted {
		out.detail = fmt.Sprintf("the running daemon's %s: %d request(s) accepted since it started%s", c.Variable, c.Accepted, restart)
	}
	if c.Variable == config.EnvOAuthToken {
		out.status, out.hint = "warn", credproxy.OAuthWarning
	}
	return out
}

// checkUpstream makes one cheap authenticated request (count_tokens) to
// BRIDGED_ANTHROPIC_URL with the configured credential, the way the proxy
// will; the credential is never printed.
func checkUpstream(ctx context.Context, cfg *config.Config, client *http.Client) check {
	p, err := credproxy.New(credproxy.Config{Upstream: cfg.AnthropicURL, APIKey: cfg.Secrets[config.EnvAPIKey], OAuthToken: cfg.Secrets[config.EnvOAuthToken]})
	if err != nil {
		return check{name: "api", status: "FAIL", detail: err.Error(), hint: "fix BRIDGED_ANTHROPIC_URL"}
	}
	if p.Mode() == credproxy.ModeNone {
		return check{name: "api", status: "FAIL", detail: "cannot check " + p.Upstream() + " without a credential",
			hint: "set " + config.EnvAPIKey + " or " + config.EnvOAuthToken + "; until then the agents' API requests are answered 401"}
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := p.Check(cctx, client); err != nil {
		var dnsErr *net.DNSError
		var netErr net.Error
		switch {
		case errors.As(err, &dnsErr):
			return check{name: "api", status: "FAIL", detail: err.Error() + " (the credential was not tried)",
				hint: "this machine cannot resolve " + dnsErr.Name + ": check its DNS and network (or HTTPS_PROXY), and BRIDGED_ANTHROPIC_URL"}
		case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded):
			return check{name: "api", status: "FAIL", detail: err.Error() + " (the credential was not tried)",
				hint: "the upstream cannot be reached: check the network (or HTTPS_PROXY) and BRIDGED_ANTHROPIC_URL"}
		case errors.Is(err, credproxy.ErrRefused):
			return check{name: "api", status: "FAIL", detail: err.Error(), hint: "check the credential (" + p.Mode() + ")"}
		}
		return check{name: "api", status: "FAIL", detail: err.Error(), hint: "check BRIDGED_ANTHROPIC_URL (a gateway must accept the Messages API)"}
	}
	return check{name: "api", status: "ok", detail: p.Upstream() + " accepts the credential (" + p.Mode() + ")"}
}

// checkTranscribe asks the transcription endpoint, when one is set, to
// transcribe a moment of silence with the configured key and model; the key
// is never printed.
func checkTranscribe(ctx context.Context, cfg *config.Config, client *http.Client) check {
	if cfg.TranscribeURL == "" {
		return check{name: "transcribe", status: "ok", detail: "off: voice notes reach the agent without a transcript"}
	}
	c := &transcribe.Client{URL: cfg.TranscribeURL, Key: cfg.TranscribeKey, Model: cfg.TranscribeModel, Timeout: 15 * time.Second, HTTP: client}
	if err := c.Check(ctx); err != nil {
		return check{name: "transcribe", status: "FAIL", detail: err.Error(), hint: "check BRIDGED_TRANSCRIBE_URL, _KEY and _MODEL"}
	}
	return check{name: "transcribe", status: "ok", detail: cfg.TranscribeURL + " transcribes with " + cfg.TranscribeModel}
}

// checkTelegram checks the bot token the daemon would use (getMe), and
// says whether a webhook blocks polling and whether privacy mode keeps
// group messages from the bot.
func checkTelegram(ctx context.Context, cfg *config.Config) check {
	token := cfg.TelegramToken
	if token == "" {
		token, _ = telegram.StoredToken(cfg.TelegramTokenFile())
	}
	if token == "" {
		return check{name: "telegram", status: "ok", detail: "off: no bot token", hint: "to use Telegram: BRIDGED_TELEGRAM_TOKEN in the env file, then `bridged login telegram`"}
	}
	d, err := telegram.Diagnose(ctx, token, cfg.TelegramAPIURL)
	if err != nil {
		return check{name: "telegram", status: "FAIL", detail: err.Error(), hint: "a new token from @BotFather (/token) in the env file, then `bridged login telegram`"}
	}
	c := check{name: "telegram", status: "ok", detail: "the token is the bot @" + termsafe.Line(d.Bot.Username) + "'s; `bridged status` shows the last poll"}
	var warns []string
	if d.Webhook != "" {
		warns = append(warns, "a webhook is set ("+termsafe.Line(d.Webhook)+"): Telegram refuses getUpdates while it is")
		c.hint = "remove the webhook (deleteWebhook) so that bridged can poll"
	}
	if !d.Bot.CanReadAllGroupMessages {
		warns = append(warns, "privacy mode is on: in groups the bot sees only commands, replies to it and mentions")
		if c.hint == "" {
			c.hint = "@BotFather → /setprivacy → Disable, then add the bot to each group again"
		}
	}
	if cfg.TelegramOwner == 0 {
		warns = append(warns, "BRIDGED_TELEGRAM_OWNER is not set: nobody's Telegram messages are yours (no approvals, no /new)")
	}
	if len(warns) > 0 {
		c.status, c.detail = "warn", c.detail+"; "+strings.Join(warns, "; ")
	}
	return c
}

func checkPairing(ctx context.Context, cfg *config.Config) check {
	paired, err := whatsapp.StorePaired(ctx, cfg.WhatsAppDB())
	switch {
	case err != nil:
		return check{name: "whatsapp", status: "warn", detail: err.Error(), hint: "run `bridged login` to pair again if the store is damaged"}
	case paired:
		return check{name: "whatsapp", status: "ok", detail: "paired; `bridged status` shows the connection"}
	}
	return check{name: "whatsapp", status: "warn", detail: "not paired (local chats still work)", hint: "run `bridged login` to pair"}
}

func checkAllowlist(cfg *config.Config) check {
	if cfg.MountAllowlist == "" {
		return check{name: "allowlist", status: "ok", detail: "none configured: no extra mounts"}
	}
	if !exists(cfg.MountAllowlist) {
		return check{name: "allowlist", status: "ok", detail: "no file at " + cfg.MountAllowlist + ": no extra mounts"}
	}
	al, err := container.LoadAllowlist(cfg.MountAllowlist, cfg.Home, cfg.EnvFile)
	switch {
	case err != nil:
		return check{name: "allowlist", status: "FAIL", detail: err.Error(), hint: "fix the JSON or remove the file"}
	case al.Empty():
		return check{name: "allowlist", status: "ok", detail: cfg.MountAllowlist + ": no extra mounts allowed"}
	}
	return check{name: "allowlist", status: "ok", detail: cfg.MountAllowlist + " parses"}
}

// groupUIDCheck says whether each group's agent runs as a uid of its own
// (docs/decisions.md, records 33, 43 and 44): a root daemon gives the
// directories away; one that is not (a rootless engine's user, a `docker`
// group member, the kubernetes daemon) grants them by POSIX ACLs, which the
// home's file system must take, else every agent runs as its own uid.
func groupUIDCheck(cfg *config.Config, euid int) check {
	first := fmt.Sprintf("from %d up", cfg.ContainerUID+1)
	if euid == 0 {
		return check{name: "group uids", status: "ok", detail: "each group's agent runs as a uid of its own (" + first + ")"}
	}
	dir := home.Layout{Dir: cfg.Home}.DataDir()
	if _, err := os.Stat(dir); err != nil {
		return check{name: "group uids", status: "ok", detail: "not checked: " + dir + " does not exist yet"}
	}
	if err := home.ACLSupported(dir); err != nil {
		return check{name: "group uids", status: "warn", detail: fmt.Sprintf("every agent runs as the daemon's uid (%d), so one agent may act on another's files: %v", euid, err),
			hint: "a home on a file system with POSIX ACLs (ext4, xfs, btrfs) gives each group a uid of its own"}
	}
	return check{name: "group uids", status: "ok", detail: "each group's agent runs as a uid of its own (" + first + ", granted by ACL)"}
}

// checkContainerUser warns when the uid containers run as under a root
// daemon is a login user's in passwd (a file in /etc/passwd's format): that
// user would own every agent's workspace. A user whose shell is nologin or
// false is no login user; an empty shell means /bin/sh.
func checkContainerUser(cfg *config.Config, euid int, passwd string) check {
	uid, gid := cfg.ContainerUID, cfg.ContainerGID
	id := fmt.Sprintf("%d:%d", uid, gid)
	if euid != 0 {
		c := groupUIDCheck(cfg, euid)
		c.name = "uid"
		return c
	}
	data, err := os.ReadFile(passwd)
	if err != nil {
		return check{name: "uid", status: "warn", detail: fmt.Sprintf("containers run as %s; cannot read %s to check it: %v", id, passwd, err)}
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 || strings.HasPrefix(strings.TrimSpace(f[0]), "#") || f[2] != strconv.Itoa(uid) {
			continue
		}
		shell := strings.TrimSpace(f[6])
		if strings.HasSuffix(shell, "/nologin") || strings.HasSuffix(shell, "/false") {
			return check{name: "uid", status: "ok", detail: fmt.Sprintf("containers run as %s (%s in %s, no login)", id, f[0], passwd)}
		}
		return check{name: "uid", status: "warn",
			detail: fmt.Sprintf("containers run as %s, which %s names as the login user %s: that user owns every agent's workspace", id, passwd, f[0]),
			hint:   "set BRIDGED_CONTAINER_UID and BRIDGED_CONTAINER_GID to an id no login user has (the default is 61000)"}
	}
	return check{name: "uid", status: "ok", detail: fmt.Sprintf("containers run as %s, no login user's id", id)}
}

func checkClock(cfg *config.Config) check {
	now := time.Now()
	detail := fmt.Sprintf("%s, now %s", cfg.Timezone, now.In(cfg.Timezone).Format(time.RFC3339))
	if now.Year() < 2025 {
		return check{name: "clock", status: "FAIL", detail: detail, hint: "the system clock is wrong; enable NTP (timedatectl set-ntp true)"}
	}
	if len(cfg.Warnings) > 0 {
		return check{name: "clock", status: "warn", detail: detail + "; " + strings.Join(cfg.Warnings, "; ")}
	}
	return check{name: "clock", status: "ok", detail: detail}
}

func checkDaemon(ctx context.Context, cfg *config.Config) check {
	running, err := daemonRunning(ctx, control.NewClient(cfg.Socket()), cfg.Socket())
	switch {
	case err != nil:
		return check{name: "daemon", status: "FAIL", detail: err.Error(), hint: "restart bridged"}
	case running:
		return check{name: "daemon", status: "ok", detail: "running, control socket " + cfg.Socket()}
	}
	detail := "not running"
	if exists(cfg.StoreDB()) {
		detail += "; database " + cfg.StoreDB() + " present"
	}
	return check{name: "daemon", status: "ok", detail: detail}
}

// podmanInitPath is where Podman looks for the init it runs as each
// container's pid 1 (containers.conf's init_path, whose default Debian's
// catatonit package fills).
const podmanInitPath = "/usr/libexec/podman/catatonit"

// podmanInitCheck checks that Podman's init is at path: bridged starts
// every agent with an init, and without one Podman refuses every start
// ("container-init binary not found on the host"). The package is only a
// recommendation of Debian's podman, which an install without
// recommendations leaves out.
func podmanInitCheck(path string) check {
	if _, err := os.Stat(path); err != nil {
		return check{name: "podman init", status: "FAIL", detail: "Podman's init is not at " + path + ": every agent's start is refused",
			hint: "sudo apt install catatonit (or set init_path in containers.conf to a static init such as /usr/bin/tini-static)"}
	}
	return check{name: "podman init", status: "ok", detail: path}
}

// podmanChecks are what rootless Podman needs, for a daemon running as
// euid: a version whose Docker API bridged drives (4.3 or later), rootless,
// subordinate ids for every group uid, cgroup v2 delegating the limits'
// controllers (else only a configuration without limits starts), and
// lingering (lingerDir/<user>), so the user's service outlives its login.
func podmanChecks(info container.EngineInfo, cfg *config.Config, euid int, lingerDir string) []check {
	var out []check
	v := check{name: "podman", status: "ok", detail: "Podman " + info.Version + ", rootless"}
	var major, minor int
	if _, err := fmt.Sscanf(info.Version, "%d.%d", &major, &minor); err != nil || major < 4 || major == 4 && minor < 3 {
		v = check{name: "podman", status: "FAIL", detail: "Podman " + info.Version, hint: "install Podman 4.3 or later (Debian 12's podman)"}
	} else if !info.Rootless {
		v = check{name: "podman", status: "warn", detail: "Podman " + info.Version + " runs as root", hint: "run the Podman service as bridged's own user (`bridged install-service --user` with BRIDGED_ENGINE=podman)"}
	}
	out = append(out, v)
	if info.Rootless {
		top := cfg.ContainerUID + home.MaxGroupUIDs
		if _, ok := container.HostID(info.UIDMap, top); !ok {
			out = append(out, check{name: "subuid", status: "FAIL",
				detail: fmt.Sprintf("Podman maps no host id to container uid %d (BRIDGED_CONTAINER_UID + %d, the highest group uid): the subordinate id range is too small", top, home.MaxGroupUIDs),
				hint:   "give the user 65536 subordinate ids: sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $USER, then podman system migrate"})
		} else {
			out = append(out, check{name: "subuid", status: "ok", detail: fmt.Sprintf("every group uid (%d to %d) maps to a subordinate id", cfg.ContainerUID+1, top)})
		}
	}
	if why := info.LimitsProblem(); why != "" {
		c := check{name: "cgroups", status: "warn", detail: why + "; agents run without CPU, memory and pids limits (they are set to 0)",
			hint: "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and delegate cpu, memory and pids to the user (Delegate=cpu memory pids in user@.service)"}
		if cfg.MemoryBytes > 0 || cfg.CPUs > 0 || cfg.Pids > 0 {
			c.status = "FAIL"
			c.detail = why + "; every agent's start is refused while BRIDGED_CONTAINER_MEMORY, _CPUS or _PIDS is set"
			c.hint += ", or set BRIDGED_CONTAINER_MEMORY=0, BRIDGED_CONTAINER_CPUS=0 and BRIDGED_CONTAINER_PIDS=0"
		}
		out = append(out, c)
	} else if info.Rootless {
		out = append(out, check{name: "cgroups", status: "ok", detail: "cgroup v2 delegates cpu, memory and pids: the limits hold"})
	}
	if u, err := user.LookupId(strconv.Itoa(euid)); err == nil && euid != 0 {
		if _, err := os.Stat(filepath.Join(lingerDir, u.Username)); err != nil {
			out = append(out, check{name: "linger", status: "warn", detail: u.Username + " does not linger: its Podman service and bridged stop when it logs out",
				hint: "sudo loginctl enable-linger " + u.Username})
		} else {
			out = append(out, check{name: "linger", status: "ok", detail: u.Username + " lingers"})
		}
	}
	return out
}
