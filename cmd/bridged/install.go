package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/bridged-app/bridged"
	"github.com/bridged-app/bridged/internal/config"
)

// watchdogTimeout is the unit's WatchdogSec=: the daemon pings every half of it.
const watchdogTimeout = 60 * time.Second

// service is what `bridged install-service` installs.
type service struct {
	User    bool   // a user unit (systemctl --user), else a system one
	Bin     string // absolute path of the bridged binary
	Home    string
	EnvFile string
	Unit    string // where the unit goes
	Doc     string // where the README goes; the unit's Documentation=
	RunAs   string // system unit: the service user
	Docker  bool   // system unit: SupplementaryGroups=docker (the group exists)
	// Podman: the daemon drives its user's rootless Podman service
	// (BRIDGED_ENGINE=podman), in no docker group.
	Podman   bool
	Watchdog time.Duration
	// Allowlist is the system unit's BRIDGED_MOUNT_ALLOWLIST: the default
	// (~/.config/bridged/…) would be inside the service user's home.
	Allowlist string
}

// safePath is what a path in the unit may hold: systemd would take '%' as a
// specifier, spaces and quotes as separators.
var safePath = regexp.MustCompile(`^/[A-Za-z0-9/._@+-]*$`)

var unitTemplate = template.Must(template.New("unit").Funcs(template.FuncMap{
	"secs": func(d time.Duration) string { return strconv.Itoa(int(d/time.Second)) + "s" },
}).Parse(`# bridged as a systemd {{if .User}}user {{end}}service, written by ` + "`bridged install-service{{if .User}} --user{{end}}`" + `.
# Edit the settings in {{.EnvFile}}, not here; ` + "`bridged install-service{{if .User}} --user{{end}} --force`" + ` rewrites this file.
[Unit]
Description=bridged: Claude agents for your WhatsApp chats
Documentation=file://{{.Doc}}
{{- if .Podman}}
# The engine is the service user's rootless Podman (its podman.socket, in
# its own systemd instance, which lingering starts at boot); until its
# socket answers the daemon fails, and Restart= tries again.
{{- if .User}}
Wants=podman.socket
After=podman.socket
{{- else}}
Wants=network-online.target
After=network-online.target
{{- end}}
{{- else if not .User}}
# Wants=, not Requires=: a Docker installed under another unit name (a snap,
# socket activation) must not keep bridged from starting; without an engine
# the daemon says so and fails, and Restart= tries again.
Wants=network-online.target docker.service
After=network-online.target docker.service
{{- end}}

[Service]
# The daemon says when it is ready (control socket, router and database
# answer), what it is doing (systemctl status) and when it drains, and pings
# the watchdog only while its router and database answer: a hung daemon is
# restarted.
Type=notify
NotifyAccess=main
WatchdogSec={{secs .Watchdog}}
Restart=on-failure
RestartSec=5s
TimeoutStartSec=3min
# The drain waits up to 60s for running turns, then sends their replies.
TimeoutStopSec=90s
KillMode=mixed
{{- if not .User}}
User={{.RunAs}}
Group={{.RunAs}}
{{- if and .Docker (not .Podman)}}
# The docker group is what reaches /var/run/docker.sock: root-equivalent on
# the host, which is why the daemon has a user of its own and nothing else.
SupplementaryGroups=docker
{{- end}}
{{- end}}
EnvironmentFile={{.EnvFile}}
Environment=BRIDGED_LOG_FORMAT=json
{{- if .Podman}}
Environment=BRIDGED_ENGINE=podman
{{- if not .User}}
# The user's runtime directory, where its podman.socket listens.
Environment=XDG_RUNTIME_DIR=/run/user/%U
{{- end}}
{{- end}}
{{- if .Allowlist}}
Environment=BRIDGED_MOUNT_ALLOWLIST={{.Allowlist}}
{{- end}}
ExecStart={{.Bin}} run --home {{.Home}} --env-file {{.EnvFile}}
UMask=0027
{{- if .User}}

# A user manager sandboxes through user namespaces, which would unmap the
# docker group and cut the Docker socket off; only what needs none is set.
NoNewPrivileges=yes
{{- else}}

# Sandboxing that leaves the daemon the Docker socket and its home:
# - the whole file system is read-only but the home (ProtectSystem=strict,
#   ReadWritePaths=); connecting to the Docker socket needs no writable file
#   system;
# - /home, /root and /run/user are read-only, not hidden (ProtectHome=
#   read-only): the daemon checks the sources of the extra mounts the
#   allowlist grants, which are often there; Docker does the mounting;
# - a private /tmp (PrivateTmp=): the daemon keeps nothing there and mounts
#   nothing from it into containers;
# - no new privileges, no capabilities, no devices, no kernel or clock
#   changes, no namespaces of its own (Docker makes the containers').
# Not set: PrivateNetwork= and IPAddressDeny= (WhatsApp and the Claude API
# are on the network, at addresses that change), PrivateUsers= (it would
# unmap the docker group), DynamicUser= (the state and its owner must
# outlive a restart).
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths={{.Home}}
ProtectHome=read-only
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
SystemCallArchitectures=native
SystemCallFilter=@system-service
CapabilityBoundingSet=
{{- end}}

[Install]
WantedBy={{if .User}}default.target{{else}}multi-user.target{{end}}
`))

// render is the unit file.
func (s service) render() (string, error) {
	for _, p := range []string{s.Bin, s.Home, s.EnvFile, s.Doc, s.Allowlist} {
		if p != "" && !safePath.MatchString(p) {
			return "", fmt.Errorf("%q: a path in the unit must be absolute and hold only letters, digits and / . _ @ + -", p)
		}
	}
	if !s.User && !regexp.MustCompile(`^[a-z_][a-z0-9_-]*$`).MatchString(s.RunAs) {
		return "", fmt.Errorf("service user %q: want a user name such as bridged", s.RunAs)
	}
	var b bytes.Buffer
	if err := unitTemplate.Execute(&b, s); err != nil {
		return "", err
	}
	return b.String(), nil
}

// envTemplate is a new env file: every variable named, commented out, with
// its default; no value.
func envTemplate(s service) string {
	var b strings.Builder
	b.WriteString("# bridged's settings, read by the daemon (bridged run --env-file) and by systemd.\n")
	b.WriteString("# Uncomment what you change. `bridged config --env-file <this file>` shows the result.\n")
	b.WriteString("# Keep this file private (mode 0600): it holds the Claude credential.\n")
	for _, v := range config.Variables() {
		if v.Env == "BRIDGED_HOME" {
			continue // the unit's --home decides; ReadWritePaths= follows it
		}
		fmt.Fprintf(&b, "\n# %s\n", v.Usage)
		if v.Env == "BRIDGED_MOUNT_ALLOWLIST" && s.Allowlist != "" {
			// The default (~/.config/bridged/…) would be inside the
			// service user's home, where agents could edit it.
			fmt.Fprintf(&b, "%s=%s\n", v.Env, s.Allowlist)
			continue
		}
		fmt.Fprintf(&b, "#%s=%s\n", v.Env, v.Default)
	}
	return b.String()
}

func (a *app) cmdInstallService(ctx context.Context, args []string) error {
	fs := a.newFlagSet("install-service", "install-service [--user] [--podman] [--dry-run] [--force] [flags]")
	userUnit := fs.Bool("user", false, "install a user unit (systemctl --user) for this user instead of a system one")
	dryRun := fs.Bool("dry-run", false, "print the unit and what would be done; change nothing")
	force := fs.Bool("force", false, "overwrite a unit that differs from the one bridged writes")
	home := fs.String("home", "", "the daemon's home (default /var/lib/bridged; with --user $XDG_DATA_HOME/bridged)")
	envFile := fs.String("env-file", "", "the env file (default /etc/bridged/bridged.env; with --user $XDG_CONFIG_HOME/bridged/bridged.env)")
	bin := fs.String("bin", "", "the bridged binary the unit runs (default: this one)")
	runAs := fs.String("service-user", "bridged", "system unit: the user the daemon runs as (created when missing)")
	podmanFlag := fs.Bool("podman", false, "run the agents on the service user's rootless Podman (BRIDGED_ENGINE=podman), not Docker: sets up its subordinate ids, lingering and podman.socket")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	s, err := a.planService(*userUnit, *home, *envFile, *bin, *runAs)
	if err != nil {
		return err
	}
	if *podmanFlag {
		s.Podman, s.Docker = true, false
	}
	unit, err := s.render()
	if err != nil {
		return err
	}
	if *dryRun {
		fmt.Fprint(a.stdout, unit)
		fmt.Fprintf(a.stderr, "dry run: would write %s, create %s and %s if missing, and write %s\n", s.Unit, s.Home, s.EnvFile, s.Doc)
		return nil
	}
	if !s.User && os.Geteuid() != 0 && a.root == "" {
		return errors.New("a system unit needs root: run it with sudo, or use --user for a unit of your own")
	}
	if err := a.installService(ctx, s, unit, *force); err != nil {
		return err
	}
	a.printNext(s)
	return nil
}

// planService fills in the paths. a.root, when set, prefixes every
// system path (tests).
func (a *app) planService(userUnit bool, home, envFile, bin, runAs string) (service, error) {
	s := service{User: userUnit, RunAs: runAs, Watchdog: watchdogTimeout, Home: home, EnvFile: envFile, Bin: bin}
	if s.Home == "" {
		s.Home = a.getenv("BRIDGED_HOME")
	}
	if s.Bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return s, fmt.Errorf("find this binary (give --bin): %w", err)
		}
		if s.Bin, err = filepath.EvalSymlinks(exe); err != nil {
			return s, fmt.Errorf("find this binary (give --bin): %w", err)
		}
	}
	if userUnit {
		uh := a.getenv("HOME")
		if uh == "" {
			return s, errors.New("HOME is not set: cannot place a user unit")
		}
		xdg := func(env, def string) string {
			if v := a.getenv(env); filepath.IsAbs(v) {
				return v
			}
			return filepath.Join(uh, def)
		}
		if s.Home == "" {
			s.Home = filepath.Join(xdg("XDG_DATA_HOME", ".local/share"), "bridged")
		}
		if s.EnvFile == "" {
			s.EnvFile = filepath.Join(xdg("XDG_CONFIG_HOME", ".config"), "bridged", "bridged.env")
		}
		s.Unit = filepath.Join(xdg("XDG_CONFIG_HOME", ".config"), "systemd", "user", "bridged.service")
		s.Doc = filepath.Join(xdg("XDG_DATA_HOME", ".local/share"), "doc", "bridged", "README.md")
	} else {
		if s.Home == "" {
			s.Home = a.root + "/var/lib/bridged"
		}
		if s.EnvFile == "" {
			s.EnvFile = a.root + "/etc/bridged/bridged.env"
		}
		s.Unit = a.root + "/etc/systemd/system/bridged.service"
		s.Doc = a.root + "/usr/local/share/doc/bridged/README.md"
		s.Allowlist = a.root + "/etc/bridged/mount-allowlist.json"
		_, err := user.LookupGroup("docker")
		s.Docker = err == nil
	}
	var err error
	for _, p := range []*string{&s.Home, &s.EnvFile, &s.Bin} {
		if *p, err = filepath.Abs(*p); err != nil {
			return s, err
		}
	}
	return s, nil
}

// installService does the work: service user, home, env file, README,
// unit, daemon-reload. Each step leaves what is already right alone.
func (a *app) installService(ctx context.Context, s service, unit string, force bool) error {
	uid, gid := os.Getuid(), os.Getgid()
	if !s.User {
		if strings.HasPrefix(s.Bin, "/tmp/") || strings.HasPrefix(s.Bin, "/var/tmp/") {
			return fmt.Errorf("%s is under a temporary directory the service does not see (PrivateTmp=): install the binary first (sudo make install) or give --bin", s.Bin)
		}
		u, err := a.serviceUser(ctx, s)
		if err != nil {
			return err
		}
		if uid, err = strconv.Atoi(u.Uid); err != nil {
			return fmt.Errorf("user %s: uid %q", s.RunAs, u.Uid)
		}
		if gid, err = strconv.Atoi(u.Gid); err != nil {
			return fmt.Errorf("user %s: gid %q", s.RunAs, u.Gid)
		}
		if !s.Docker && !s.Podman {
			fmt.Fprintln(a.stderr, "warning: there is no docker group; give the service user access to the Docker socket yourself")
		}
	}

	// The home: owned by the service user, private to it.
	if err := os.MkdirAll(filepath.Dir(s.Home), 0o755); err != nil {
		return fmt.Errorf("create the home's parent: %w", err)
	}
	if err := os.Mkdir(s.Home, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create the home: %w", err)
	}
	if err := os.Chown(s.Home, uid, gid); err != nil {
		return fmt.Errorf("give the home to its user: %w", err)
	}
	if err := os.Chmod(s.Home, 0o750); err != nil {
		return fmt.Errorf("home mode: %w", err)
	}
	fmt.Fprintf(a.stdout, "home       %s (mode 0750, owner %d:%d)\n", s.Home, uid, gid)

	// The env file: created once, 0600, names only; the owner's own is
	// never rewritten.
	if err := os.MkdirAll(filepath.Dir(s.EnvFile), 0o755); err != nil {
		return fmt.Errorf("create the env file's directory: %w", err)
	}
	f, err := os.OpenFile(s.EnvFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		fi, err := os.Stat(s.EnvFile)
		if err != nil {
			return fmt.Errorf("env file: %w", err)
		}
		note := "kept as it is"
		if fi.Mode().Perm()&0o077 != 0 {
			note = fmt.Sprintf("kept; WARNING: mode %04o lets others read the credential: chmod 600 %s", fi.Mode().Perm(), s.EnvFile)
		}
		fmt.Fprintf(a.stdout, "env file   %s (%s)\n", s.EnvFile, note)
	case err != nil:
		return fmt.Errorf("create the env file: %w", err)
	default:
		_, werr := f.WriteString(envTemplate(s))
		cerr := f.Close()
		if err := errors.Join(werr, cerr); err != nil {
			return fmt.Errorf("write the env file: %w", err)
		}
		if err := os.Chown(s.EnvFile, uid, gid); err != nil {
			return fmt.Errorf("give the env file to its user: %w", err)
		}
		fmt.Fprintf(a.stdout, "env file   %s (created, mode 0600: put the Claude credential there)\n", s.EnvFile)
	}

	// The README the unit's Documentation= points at: ours, kept current.
	if _, err := writeIfChanged(s.Doc, bridged.README, 0o644, true); err != nil {
		return fmt.Errorf("write the documentation: %w", err)
	}

	changed, err := writeIfChanged(s.Unit, unit, 0o644, force)
	switch {
	case errors.Is(err, errUnitChanged):
		return fmt.Errorf("%s differs from the unit this bridged writes (edited by hand, or from another version); see the difference with `bridged install-service --dry-run%s | diff %s -`, then run again with --force to replace it", s.Unit, userFlag(s), s.Unit)
	case err != nil:
		return fmt.Errorf("write the unit: %w", err)
	case changed:
		fmt.Fprintf(a.stdout, "unit       %s (written)\n", s.Unit)
	default:
		fmt.Fprintf(a.stdout, "unit       %s (unchanged)\n", s.Unit)
	}
	if s.Podman && a.root == "" {
		a.setUpPodman(ctx, s)
	}
	if changed && a.root == "" && systemdRunning() {
		args := []string{"daemon-reload"}
		if s.User {
			args = []string{"--user", "daemon-reload"}
		}
		if out, err := exec.CommandContext(ctx, "systemctl", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(a.stderr, "warning: systemctl %s: %v: %s\n", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// errUnitChanged: the file holds something else and --force was not given.
var errUnitChanged = errors.New("file differs")

// writeIfChanged writes content to path (creating its directory) unless it
// already holds exactly that. A different file is replaced only with force.
func writeIfChanged(path, content string, mode os.FileMode, force bool) (bool, error) {
	old, err := os.ReadFile(path)
	switch {
	case err == nil && string(old) == content:
		return false, nil
	case err == nil && !force:
		return false, errUnitChanged
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), mode); err != nil {
		return false, err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, path)
}

// serviceUser looks the service user up and creates it (a system user
// whose home is the daemon's, no login) when it is missing.
func (a *app) serviceUser(ctx context.Context, s service) (*user.User, error) {
	u, err := user.Lookup(s.RunAs)
	if err == nil {
		return u, nil
	}
	var unknown user.UnknownUserError
	if !errors.As(err, &unknown) {
		return nil, fmt.Errorf("look up user %s: %w", s.RunAs, err)
	}
	args := []string{"--system", "--user-group", "--home-dir", s.Home, "--no-create-home", "--shell", "/usr/sbin/nologin", s.RunAs}
	if out, err := exec.CommandContext(ctx, "useradd", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("create the service user (useradd %s): %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	fmt.Fprintf(a.stdout, "user       %s (created: a system user without login)\n", s.RunAs)
	return user.Lookup(s.RunAs)
}

// systemdRunning reports whether systemd is the init system here.
func systemdRunning() bool {
	_, err := os.Stat("/run/systemd/system")
	return err == nil
}

func userFlag(s service) string {
	if s.User {
		return " --user"
	}
	return ""
}

// printNext prints the commands that finish the set-up.
// setUpPodman readies the service user's rootless Podman: a range of 65,536
// subordinate ids when it has none (a system unit: root adds it), lingering,
// so its systemd instance and podman.socket run without a login, and the
// socket itself. What fails is said, with the command to run by hand.
func (a *app) setUpPodman(ctx context.Context, s service) {
	name := s.RunAs
	if s.User {
		u, err := user.Current()
		if err != nil {
			fmt.Fprintf(a.stderr, "warning: who am I: %v\n", err)
			return
		}
		name = u.Username
	}
	run := func(what string, args ...string) {
		if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			fmt.Fprintf(a.stderr, "warning: %s: %v: %s\n  run it yourself: %s\n", what, err, strings.TrimSpace(string(out)), strings.Join(args, " "))
			return
		}
		fmt.Fprintf(a.stdout, "podman     %s\n", what)
	}
	if !s.User {
		for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
			if start, ok := subIDStart(f, name); ok {
				fmt.Fprintf(a.stdout, "podman     %s: %s has subordinate ids from %d\n", f, name, start)
				continue
			}
			next := nextSubIDs(f)
			flag := "--add-subuids"
			if f == "/etc/subgid" {
				flag = "--add-subgids"
			}
			run(fmt.Sprintf("%s: 65536 subordinate ids for %s", f, name), "usermod", flag, fmt.Sprintf("%d-%d", next, next+65535), name)
		}
	}
	if !systemdRunning() {
		fmt.Fprintf(a.stderr, "warning: systemd is not running: enable lingering and podman.socket yourself:\n  loginctl enable-linger %s\n  systemctl --user -M %s@ enable --now podman.socket\n", name, name)
		return
	}
	run("lingering for "+name, "loginctl", "enable-linger", name)
	if s.User {
		run("podman.socket enabled", "systemctl", "--user", "enable", "--now", "podman.socket")
	} else {
		run("podman.socket enabled for "+name, "systemctl", "--user", "-M", name+"@", "enable", "--now", "podman.socket")
	}
}

// subIDStart is the start of name's range in an /etc/subuid-like file.
func subIDStart(file, name string) (int, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Split(l, ":")
		if len(f) == 3 && f[0] == name {
			n, err := strconv.Atoi(f[1])
			return n, err == nil
		}
	}
	return 0, false
}

// nextSubIDs is the first id after every range of an /etc/subuid-like file
// (100000 when it has none).
func nextSubIDs(file string) int {
	next := 100000
	data, _ := os.ReadFile(file)
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Split(l, ":")
		if len(f) != 3 {
			continue
		}
		start, err1 := strconv.Atoi(f[1])
		size, err2 := strconv.Atoi(f[2])
		if err1 == nil && err2 == nil {
			next = max(next, start+size)
		}
	}
	return next
}

func (a *app) printNext(s service) {
	w := a.stdout
	fmt.Fprintln(w, "\nNext:")
	if s.User {
		fmt.Fprintf(w, "  $EDITOR %s    # the Claude credential: ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN\n", s.EnvFile)
		fmt.Fprintf(w, "  bridged login --home %s --env-file %s\n", s.Home, s.EnvFile)
		fmt.Fprintf(w, "  bridged groups add --home %s --env-file %s --name main --main <your chat id>\n", s.Home, s.EnvFile)
		fmt.Fprintln(w, "  systemctl --user enable --now bridged")
		fmt.Fprintln(w, "  loginctl enable-linger \"$USER\"    # keeps it running while you are logged out")
		fmt.Fprintln(w, "  journalctl --user -u bridged -f")
		return
	}
	fmt.Fprintf(w, "  sudoedit %s    # the Claude credential: ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN\n", s.EnvFile)
	fmt.Fprintf(w, "  sudo -u %s %s login --home %s --env-file %s\n", s.RunAs, s.Bin, s.Home, s.EnvFile)
	fmt.Fprintf(w, "  sudo -u %s %s groups add --home %s --env-file %s --name main --main <your chat id>\n", s.RunAs, s.Bin, s.Home, s.EnvFile)
	fmt.Fprintln(w, "  sudo systemctl enable --now bridged")
	fmt.Fprintln(w, "  journalctl -u bridged -f")
}

// checkSystemd is doctor's check of the systemd set-up: under systemd
// (INVOCATION_ID or NOTIFY_SOCKET set), the notify socket and the watchdog
// must be there; an installed unit that is readable must be Type=notify
// with a watchdog. units lists the unit files to look at.
func checkSystemd(getenv func(string) string, units []string) []check {
	var out []check
	if getenv("INVOCATION_ID") != "" || getenv("NOTIFY_SOCKET") != "" {
		c := check{name: "systemd", status: "ok"}
		wd, err := strconv.ParseInt(getenv("WATCHDOG_USEC"), 10, 64)
		switch {
		case getenv("NOTIFY_SOCKET") == "":
			c.status, c.detail = "warn", "runs under systemd without NOTIFY_SOCKET: the unit is not Type=notify, so systemd cannot tell when bridged is ready or hung"
			c.hint = "sudo bridged install-service --force (or set Type=notify and NotifyAccess=main)"
		case err != nil || wd <= 0:
			c.status, c.detail = "warn", "runs under systemd without a watchdog (WATCHDOG_USEC unset): a hung daemon is not restarted"
			c.hint = "set WatchdogSec=60s in the unit (bridged install-service --force writes it)"
		default:
			c.detail = fmt.Sprintf("notify socket %s, watchdog every %s (pinged every %s)", getenv("NOTIFY_SOCKET"), time.Duration(wd)*time.Microsecond, time.Duration(wd)*time.Microsecond/2)
		}
		out = append(out, c)
	}
	for _, path := range units {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		typ, watchdog := "simple", ""
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
			switch {
			case !ok:
			case k == "Type":
				typ = strings.TrimSpace(v)
			case k == "WatchdogSec":
				watchdog = strings.TrimSpace(v)
			}
		}
		c := check{name: "unit", status: "ok", detail: fmt.Sprintf("%s: Type=%s, WatchdogSec=%s", path, typ, watchdog)}
		if typ != "notify" || watchdog == "" || watchdog == "0" || watchdog == "infinity" {
			c.status = "warn"
			c.detail = fmt.Sprintf("%s is Type=%s with WatchdogSec=%s: systemd does not learn when bridged is ready, and a hung daemon is not restarted", path, typ, or(watchdog, "unset"))
			c.hint = "bridged install-service" + map[bool]string{true: " --user", false: ""}[strings.Contains(path, "/systemd/user/")] + " --force"
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		out = append(out, check{name: "systemd", status: "ok", detail: "not under systemd, no bridged unit installed (bridged install-service writes one)"})
	}
	return out
}

// unitPaths are where install-service puts the system and the user unit.
func (a *app) unitPaths() []string {
	paths := []string{a.root + "/etc/systemd/system/bridged.service"}
	cfgHome := a.getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(cfgHome) {
		if h := a.getenv("HOME"); h != "" {
			cfgHome = filepath.Join(h, ".config")
		}
	}
	if cfgHome != "" {
		paths = append(paths, filepath.Join(cfgHome, "systemd", "user", "bridged.service"))
	}
	return paths
}
