package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bridged-app/bridged"
)

// installCLI runs install-service in-process with system paths under root.
func installCLI(t *testing.T, root string, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }, root: root}
	err = a.run(context.Background(), append([]string{"install-service"}, args...))
	return out.String(), errb.String(), err
}

// dryRunUnit is the unit install-service --dry-run prints.
func dryRunUnit(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	out, _, err := installCLI(t, "", env, append([]string{"--dry-run"}, args...)...)
	if err != nil {
		t.Fatalf("install-service --dry-run %v: %v", args, err)
	}
	return out
}

func TestServiceUnit(t *testing.T) {
	sys := dryRunUnit(t, nil, "--bin", "/usr/local/bin/bridged")
	usr := dryRunUnit(t, map[string]string{"HOME": "/home/alice"}, "--user", "--bin", "/home/alice/bin/bridged")
	sysPodman := dryRunUnit(t, nil, "--podman", "--bin", "/usr/local/bin/bridged")
	usrPodman := dryRunUnit(t, map[string]string{"HOME": "/home/alice"}, "--user", "--podman", "--bin", "/home/alice/bin/bridged")
	for name, tt := range map[string]struct {
		unit      string
		want, not []string
	}{
		"system": {sys, []string{
			"Type=notify\n", "NotifyAccess=main\n", "WatchdogSec=60s\n", "Restart=on-failure\n",
			"Documentation=file:///usr/local/share/doc/bridged/README.md\n",
			"EnvironmentFile=/etc/bridged/bridged.env\n",
			"ExecStart=/usr/local/bin/bridged run --home /var/lib/bridged --env-file /etc/bridged/bridged.env\n",
			"User=bridged\n", "ProtectSystem=strict\n", "ReadWritePaths=/var/lib/bridged\n", "ProtectHome=read-only\n",
			"NoNewPrivileges=yes\n", "PrivateTmp=yes\n", "Wants=network-online.target docker.service\n", "After=network-online.target docker.service\n", "WantedBy=multi-user.target\n",
		}, []string{"github.com", "Type=simple"}},
		"user": {usr, []string{
			"Type=notify\n", "NotifyAccess=main\n", "WatchdogSec=60s\n", "Restart=on-failure\n",
			"Documentation=file:///home/alice/.local/share/doc/bridged/README.md\n",
			"EnvironmentFile=/home/alice/.config/bridged/bridged.env\n",
			"ExecStart=/home/alice/bin/bridged run --home /home/alice/.local/share/bridged --env-file /home/alice/.config/bridged/bridged.env\n",
			"NoNewPrivileges=yes\n", "WantedBy=default.target\n",
		}, []string{"github.com", "User=", "ProtectSystem=", "PrivateUsers=yes", "docker.service"}},
		// Rootless Podman: the user's own engine, no docker group.
		"system podman": {sysPodman, []string{
			"User=bridged\n", "Environment=BRIDGED_ENGINE=podman\n", "Environment=XDG_RUNTIME_DIR=/run/user/%U\n", "ProtectSystem=strict\n",
		}, []string{"SupplementaryGroups=docker", "docker.service"}},
		"user podman": {usrPodman, []string{
			"Environment=BRIDGED_ENGINE=podman\n", "Wants=podman.socket\n", "After=podman.socket\n",
		}, []string{"SupplementaryGroups=docker", "docker.service", "XDG_RUNTIME_DIR"}},
	} {
		for _, w := range tt.want {
			if !strings.Contains(tt.unit, w) {
				t.Errorf("%s unit lacks %q:\n%s", name, w, tt.unit)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(tt.unit, n) {
				t.Errorf("%s unit holds %q", name, n)
			}
		}
	}
	if _, _, err := installCLI(t, "", nil, "--dry-run", "--home", "/var/lib/my bridged"); err == nil {
		t.Error("a home with a space: got no error; want one (systemd would split the path)")
	}
}

// The unit shipped in deploy/ is the one install-service writes.
func TestDeployUnitIsInstallServices(t *testing.T) {
	if _, err := user.LookupGroup("docker"); err != nil {
		t.Skip("no docker group here: the unit would lack SupplementaryGroups=docker")
	}
	shipped, err := os.ReadFile("../../deploy/bridged.service")
	if err != nil {
		t.Fatal(err)
	}
	if got := dryRunUnit(t, nil, "--bin", "/usr/local/bin/bridged"); got != string(shipped) {
		t.Errorf("deploy/bridged.service differs from `bridged install-service --dry-run --bin /usr/local/bin/bridged`; regenerate it:\n%s", got)
	}
}

// systemd-analyze verify accepts both units. Without the analyzer the test
// skips loudly, except under CI=true, where it fails.
func TestServiceUnitVerifies(t *testing.T) {
	analyzer, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing under CI=true: install Debian's systemd package")
		}
		t.Skip("SKIPPING systemd-analyze verify: systemd-analyze is not installed (apt-get install systemd)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"system", "user", "system-podman", "user-podman"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			args, env := []string{"--bin", exe}, map[string]string{"HOME": "/home/alice"}
			if strings.HasSuffix(mode, "-podman") {
				args = append(args, "--podman")
			}
			verify := []string{"verify"}
			if strings.HasPrefix(mode, "user") {
				args = append(args, "--user")
				verify = []string{"--user", "verify"}
			}
			path := filepath.Join(dir, "bridged.service")
			if err := os.WriteFile(path, []byte(dryRunUnit(t, env, args...)), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(analyzer, append(verify, path)...)
			// A user manager needs a runtime directory, even to verify.
			rt := filepath.Join(dir, "run")
			if err := os.Mkdir(rt, 0o700); err != nil {
				t.Fatal(err)
			}
			cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt, "SYSTEMD_LOG_LEVEL=notice")
			out, err := cmd.CombinedOutput()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("systemd-analyze %s: %v\n%s", strings.Join(verify, " "), err, out)
			}
		})
	}
}

func TestInstallServiceSystem(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	args := []string{"--bin", "/usr/local/bin/bridged", "--service-user", me.Username}
	out, _, err := installCLI(t, root, nil, args...)
	if err != nil {
		t.Fatalf("install-service: %v\n%s", err, out)
	}
	for _, w := range []string{"bridged login", "bridged groups add", "systemctl enable --now bridged", "(written)", "(created, mode 0600"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	home := filepath.Join(root, "var/lib/bridged")
	envFile := filepath.Join(root, "etc/bridged/bridged.env")
	unitPath := filepath.Join(root, "etc/systemd/system/bridged.service")
	for path, mode := range map[string]os.FileMode{home: 0o750 | os.ModeDir, envFile: 0o600, unitPath: 0o644} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v; want %v", path, fi.Mode(), mode)
		}
	}
	env, _ := os.ReadFile(envFile)
	for _, w := range []string{"#ANTHROPIC_API_KEY=\n", "#CLAUDE_CODE_OAUTH_TOKEN=\n", "#BRIDGED_ASSISTANT_NAME=Andy\n",
		"BRIDGED_MOUNT_ALLOWLIST=" + root + "/etc/bridged/mount-allowlist.json\n"} {
		if !strings.Contains(string(env), w) {
			t.Errorf("env file lacks %q", w)
		}
	}
	doc, err := os.ReadFile(filepath.Join(root, "usr/local/share/doc/bridged/README.md"))
	if err != nil || string(doc) != bridged.README {
		t.Errorf("README at the Documentation= path: %v; want this version's README", err)
	}
	unit, _ := os.ReadFile(unitPath)
	if !strings.Contains(string(unit), "Documentation=file://"+root+"/usr/local/share/doc/bridged/README.md\n") {
		t.Errorf("unit's Documentation= is not the installed README:\n%s", unit)
	}

	// The owner puts the credential in; a second run changes nothing.
	secret := "# mine\nANTHROPIC_API_KEY=sk-ant-owner\n"
	if err := os.WriteFile(envFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = installCLI(t, root, nil, args...)
	if err != nil || !strings.Contains(out, "(unchanged)") || !strings.Contains(out, "kept as it is") {
		t.Errorf("second run: %v\n%s; want the unit unchanged and the env file kept", err, out)
	}

	// A unit edited by hand is not overwritten without --force.
	if err := os.WriteFile(unitPath, append(unit, "# mine\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := installCLI(t, root, nil, args...); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("changed unit: got %v; want a refusal naming --force", err)
	}
	if got, _ := os.ReadFile(unitPath); !bytes.HasSuffix(got, []byte("# mine\n")) {
		t.Error("the changed unit was overwritten without --force")
	}
	if _, _, err := installCLI(t, root, nil, append(args, "--force")...); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if got, _ := os.ReadFile(unitPath); !bytes.Equal(got, unit) {
		t.Error("--force did not restore the unit")
	}
	if got, _ := os.ReadFile(envFile); string(got) != secret {
		t.Errorf("env file after --force = %q; want the owner's, untouched", got)
	}
}

func TestInstallServiceUser(t *testing.T) {
	h := t.TempDir()
	env := map[string]string{"HOME": h}
	out, _, err := installCLI(t, "", env, "--user", "--bin", "/usr/local/bin/bridged")
	if err != nil {
		t.Fatalf("install-service --user: %v\n%s", err, out)
	}
	for p, mode := range map[string]os.FileMode{
		".config/systemd/user/bridged.service": 0o644, ".config/bridged/bridged.env": 0o600, ".local/share/bridged": 0o750 | os.ModeDir,
		".local/share/doc/bridged/README.md": 0o644,
	} {
		fi, err := os.Stat(filepath.Join(h, p))
		if err != nil {
			t.Error(err)
		} else if fi.Mode() != mode {
			t.Errorf("%s: mode %v; want %v", p, fi.Mode(), mode)
		}
	}
	if !strings.Contains(out, "systemctl --user enable --now bridged") {
		t.Errorf("output lacks the user systemctl command:\n%s", out)
	}
	if _, _, err := installCLI(t, "", env, "--user", "--bin", "/usr/local/bin/bridged"); err != nil {
		t.Errorf("second run: %v", err)
	}
}

func TestInstallServiceNeedsRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as root")
	}
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	err := a.run(context.Background(), []string{"install-service", "--bin", "/usr/local/bin/bridged"})
	if err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--user") {
		t.Errorf("system unit as a user: got %v; want an error pointing at sudo or --user", err)
	}
}

func TestDoctorSystemd(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.service")
	old := filepath.Join(dir, "old.service")
	if err := os.WriteFile(good, []byte(dryRunUnit(t, nil, "--bin", "/usr/local/bin/bridged")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("[Service]\nType=simple\nExecStart=/usr/local/bin/bridged run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		env   map[string]string
		units []string
		want  []string // status and a piece of the detail, per check
	}{
		{"not under systemd, no unit", nil, []string{filepath.Join(dir, "none")}, []string{"ok not under systemd"}},
		{"notify and watchdog", map[string]string{"INVOCATION_ID": "x", "NOTIFY_SOCKET": "/run/systemd/notify", "WATCHDOG_USEC": "60000000"},
			[]string{good}, []string{"ok watchdog every 1m0s", "ok Type=notify, WatchdogSec=60s"}},
		{"Type=simple under systemd", map[string]string{"INVOCATION_ID": "x"},
			[]string{old}, []string{"warn without NOTIFY_SOCKET", "warn is Type=simple"}},
		{"no watchdog", map[string]string{"INVOCATION_ID": "x", "NOTIFY_SOCKET": "@notify"}, nil, []string{"warn without a watchdog"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := checkSystemd(func(k string) string { return tt.env[k] }, tt.units)
			if len(got) != len(tt.want) {
				t.Fatalf("checks = %+v; want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				status, piece, _ := strings.Cut(w, " ")
				if got[i].status != status || !strings.Contains(got[i].detail, piece) {
					t.Errorf("check %d = %s %q; want %s …%s…", i, got[i].status, got[i].detail, status, piece)
				}
			}
		})
	}
}

// The command list stays a table with install-service in it.
func TestUsageAligned(t *testing.T) {
	stderr, _, _ := cli(t, context.Background(), nil, "", "help")
	col := -1
	for _, c := range commands() {
		line := ""
		for _, l := range strings.Split(stderr, "\n") {
			if strings.HasPrefix(l, "  "+c.name+" ") {
				line = l
			}
		}
		i := strings.Index(line, c.summary)
		if i < 0 {
			t.Fatalf("usage lacks %s:\n%s", c.name, stderr)
		}
		if col >= 0 && i != col {
			t.Errorf("%s's summary starts at column %d; want %d like the others:\n%s", c.name, i, col, stderr)
		}
		col = i
	}
}
