package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func resolve(t *testing.T, args []string, env map[string]string) (*Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f := Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Resolve(func(k string) string { return env[k] })
}

func TestPrecedenceAndDefaults(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "bridged.env")
	os.WriteFile(envFile, []byte("# comment\nexport BRIDGED_ASSISTANT_NAME=\"Fromfile\"\nBRIDGED_MAX_CONTAINERS=3\nANTHROPIC_API_KEY=sk-ant-file-secret-value\n"), 0o600)
	home := filepath.Join(dir, "home")

	c, err := resolve(t, []string{"--env-file", envFile, "--home", home, "--max-containers", "7"},
		map[string]string{"BRIDGED_MAX_CONTAINERS": "4", "BRIDGED_TIMEZONE": "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxContainers != 7 {
		t.Errorf("flag should win: got %d; want 7", c.MaxContainers)
	}
	if c.AssistantName != "Fromfile" {
		t.Errorf("env file value: got %q; want Fromfile", c.AssistantName)
	}
	if c.Timezone.String() != "Europe/Berlin" {
		t.Errorf("timezone: got %s", c.Timezone)
	}
	if c.IdleTimeout != 30*time.Minute || c.ContainerTimeout != 30*time.Minute+30*time.Second {
		t.Errorf("timeouts: got idle %s hard %s; want 30m and 30m30s", c.IdleTimeout, c.ContainerTimeout)
	}
	if c.AnthropicURL != "https://api.anthropic.com" || c.ContainerNetwork != "bridge" {
		t.Errorf("proxy defaults: got %q, %q", c.AnthropicURL, c.ContainerNetwork)
	}
	if c.Secrets[EnvAPIKey] != "sk-ant-file-secret-value" {
		t.Errorf("secret from env file not read")
	}
	var out bytes.Buffer
	c.Print(&out)
	if strings.Contains(out.String(), "sk-ant-file-secret-value") {
		t.Errorf("config print leaks the secret:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "BRIDGED_MAX_CONTAINERS=7") {
		t.Errorf("config print lacks the value:\n%s", out.String())
	}
}

func TestInvalidValuesNameTheVariable(t *testing.T) {
	home := t.TempDir()
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"BRIDGED_MAX_CONTAINERS": "zero"}, "BRIDGED_MAX_CONTAINERS"},
		{map[string]string{"BRIDGED_MAX_CONTAINERS": "0"}, "BRIDGED_MAX_CONTAINERS"},
		{map[string]string{"BRIDGED_IDLE_TIMEOUT": "30"}, "BRIDGED_IDLE_TIMEOUT"},
		{map[string]string{"BRIDGED_IDLE_TIMEOUT": "10m", "BRIDGED_CONTAINER_TIMEOUT": "10m"}, "BRIDGED_CONTAINER_TIMEOUT"},
		{map[string]string{"BRIDGED_TIMEZONE": "Mars/Olympus"}, "BRIDGED_TIMEZONE"},
		{map[string]string{"BRIDGED_CONTAINER_MEMORY": "lots"}, "BRIDGED_CONTAINER_MEMORY"},
		{map[string]string{"BRIDGED_LOG_LEVEL": "loud"}, "BRIDGED_LOG_LEVEL"},
		{map[string]string{"BRIDGED_ASSISTANT_NAME": "two words"}, "BRIDGED_ASSISTANT_NAME"},
		{map[string]string{"BRIDGED_OWN_NUMBER": "perhaps"}, "BRIDGED_OWN_NUMBER"},
		{map[string]string{"BRIDGED_REMOTE_CONTROL": "maybe"}, "BRIDGED_REMOTE_CONTROL"},
		{map[string]string{"BRIDGED_REMOTE_CONTROL_CLI": " "}, "BRIDGED_REMOTE_CONTROL_CLI"},
		{map[string]string{"BRIDGED_WHATSAPP_ALWAYS_ONLINE": "sometimes"}, "BRIDGED_WHATSAPP_ALWAYS_ONLINE"},
		{map[string]string{"BRIDGED_MOUNT_ALLOWLIST": filepath.Join(home, "allow.json")}, "BRIDGED_MOUNT_ALLOWLIST"},
		{map[string]string{"BRIDGED_CONTAINER_UID": "0"}, "BRIDGED_CONTAINER_UID"},
		{map[string]string{"BRIDGED_CONTAINER_GID": "0"}, "BRIDGED_CONTAINER_GID"},
		{map[string]string{"BRIDGED_CONTAINER_UID": "-5"}, "BRIDGED_CONTAINER_UID"},
		{map[string]string{"BRIDGED_CONTAINER_UID": "2147483648"}, "BRIDGED_CONTAINER_UID"},
		{map[string]string{"BRIDGED_CONTAINER_GID": "staff"}, "BRIDGED_CONTAINER_GID"},
		{map[string]string{"BRIDGED_ANTHROPIC_URL": "api.anthropic.com"}, "BRIDGED_ANTHROPIC_URL"},
		{map[string]string{"BRIDGED_ANTHROPIC_URL": "https://user:pw@gw.example"}, "BRIDGED_ANTHROPIC_URL"},
		{map[string]string{"BRIDGED_CONTAINER_NETWORK": "host"}, "BRIDGED_CONTAINER_NETWORK"},
		{map[string]string{"BRIDGED_RETENTION": "1d"}, "BRIDGED_RETENTION"},
		{map[string]string{"BRIDGED_RETENTION": "ninety"}, "BRIDGED_RETENTION"},
		{map[string]string{"BRIDGED_RETENTION": "-5d"}, "BRIDGED_RETENTION"},
		// Scheduled tasks' limits.
		{map[string]string{"BRIDGED_MAX_TASKS": "0"}, "BRIDGED_MAX_TASKS"},
		{map[string]string{"BRIDGED_MAX_TASKS": "many"}, "BRIDGED_MAX_TASKS"},
		{map[string]string{"BRIDGED_MAX_TASK_PROMPT": "65k"}, "BRIDGED_MAX_TASK_PROMPT"},
		{map[string]string{"BRIDGED_MAX_TASK_PROMPT": "10"}, "BRIDGED_MAX_TASK_PROMPT"},
		{map[string]string{"BRIDGED_TASK_MAX_FAILURES": "0"}, "BRIDGED_TASK_MAX_FAILURES"},
		// The dashboard listens on loopback only.
		{map[string]string{"BRIDGED_DASHBOARD": "0.0.0.0:8080"}, "BRIDGED_DASHBOARD"},
		{map[string]string{"BRIDGED_DASHBOARD": "192.168.1.2:8080"}, "BRIDGED_DASHBOARD"},
		{map[string]string{"BRIDGED_DASHBOARD": ":8080"}, "BRIDGED_DASHBOARD"},
		{map[string]string{"BRIDGED_DASHBOARD": "localhost"}, "BRIDGED_DASHBOARD"},
	}
	for _, tc := range cases {
		tc.env["BRIDGED_HOME"] = home
		_, err := resolve(t, nil, tc.env)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("env %v: got %v; want an error naming %s", tc.env, err, tc.want)
		}
	}
}

func TestTildeAllowlistWithoutHome(t *testing.T) {
	t.Setenv("HOME", "")
	env := map[string]string{"BRIDGED_HOME": t.TempDir(), "BRIDGED_MOUNT_ALLOWLIST": "~/allow.json"}
	c, err := resolve(t, nil, env)
	if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "BRIDGED_MOUNT_ALLOWLIST") {
		var got string
		if c != nil {
			got = c.MountAllowlist
		}
		t.Fatalf("~/ allowlist without HOME: got path %q, error %v; want an error naming BRIDGED_MOUNT_ALLOWLIST", got, err)
	}
}

func TestMissingExplicitEnvFileIsAnError(t *testing.T) {
	_, err := resolve(t, []string{"--env-file", filepath.Join(t.TempDir(), "nope.env")}, nil)
	if err == nil {
		t.Fatal("got nil; want an error for a missing --env-file")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512m": 512 << 20, "2g": 2 << 30, "1024k": 1 << 20, "100": 100, "2GB": 2 << 30} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseBytes("-1m"); err == nil {
		t.Error("negative size accepted")
	}
}

func TestContainerUser(t *testing.T) {
	home := t.TempDir()
	c, err := resolve(t, nil, map[string]string{"BRIDGED_HOME": home})
	if err != nil {
		t.Fatal(err)
	}
	if c.ContainerUID != 61000 || c.ContainerGID != 61000 || c.ContainerIDSet {
		t.Fatalf("defaults: got %d:%d (set %t); want 61000:61000, not set", c.ContainerUID, c.ContainerGID, c.ContainerIDSet)
	}
	if uid, gid, ignored := c.ContainerUser(0, 0); uid != 61000 || gid != 61000 || ignored {
		t.Errorf("root daemon: got %d:%d (ignored %t); want 61000:61000", uid, gid, ignored)
	}
	if uid, gid, ignored := c.ContainerUser(1000, 1000); uid != 1000 || gid != 1000 || ignored {
		t.Errorf("daemon as 1000: got %d:%d (ignored %t); want its own 1000:1000, nothing ignored", uid, gid, ignored)
	}
	var out bytes.Buffer
	c.Print(&out)
	if !strings.Contains(out.String(), "BRIDGED_CONTAINER_UID=61000\n") || !strings.Contains(out.String(), "BRIDGED_CONTAINER_GID=61000\n") {
		t.Errorf("config print lacks the container ids:\n%s", out.String())
	}

	c, err = resolve(t, []string{"--container-uid", "70001"}, map[string]string{"BRIDGED_HOME": home, "BRIDGED_CONTAINER_GID": "70002"})
	if err != nil {
		t.Fatal(err)
	}
	if uid, gid, _ := c.ContainerUser(0, 0); uid != 70001 || gid != 70002 {
		t.Errorf("configured, root daemon: got %d:%d; want 70001:70002", uid, gid)
	}
	if uid, gid, ignored := c.ContainerUser(500, 501); uid != 500 || gid != 501 || !ignored {
		t.Errorf("configured, daemon as 500: got %d:%d (ignored %t); want 500:501 with the setting ignored", uid, gid, ignored)
	}
}

func TestRetention(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		out  string
	}{
		{"", 0, ""}, // the default
		{"0", 0, "0"},
		{"0d", 0, "0"},
		{"30d", 30 * 24 * time.Hour, "30d"},
		{"720h", 30 * 24 * time.Hour, "30d"},
		{"50h", 50 * time.Hour, "50h0m0s"},
	} {
		env := map[string]string{"BRIDGED_HOME": t.TempDir()}
		if tt.in != "" {
			env["BRIDGED_RETENTION"] = tt.in
		}
		c, err := resolve(t, nil, env)
		if err != nil {
			t.Fatalf("BRIDGED_RETENTION=%q: %v", tt.in, err)
		}
		want, out := tt.want, tt.out
		if tt.in == "" {
			want, out = 90*24*time.Hour, "90d"
		}
		if c.Retention != want || c.Values()["BRIDGED_RETENTION"] != out {
			t.Errorf("BRIDGED_RETENTION=%q: got %s (%s); want %s (%s)", tt.in, c.Retention, c.Values()["BRIDGED_RETENTION"], want, out)
		}
	}
}

func TestTranscribeSettings(t *testing.T) {
	dir := t.TempDir()
	c, err := resolve(t, []string{"--home", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.TranscribeURL != "" || c.TranscribeModel != "whisper-1" {
		t.Errorf("defaults: url %q model %q; want off and whisper-1", c.TranscribeURL, c.TranscribeModel)
	}
	c, err = resolve(t, []string{"--home", dir, "--transcribe-url", "http://127.0.0.1:8080/"},
		map[string]string{"BRIDGED_TRANSCRIBE_KEY": "sk-transcribe-secret", "BRIDGED_TRANSCRIBE_MODEL": "large-v3"})
	if err != nil {
		t.Fatal(err)
	}
	if c.TranscribeURL != "http://127.0.0.1:8080" || c.TranscribeModel != "large-v3" || c.TranscribeKey != "sk-transcribe-secret" {
		t.Errorf("got url %q model %q key set %v", c.TranscribeURL, c.TranscribeModel, c.TranscribeKey != "")
	}
	var out bytes.Buffer
	c.Print(&out)
	if strings.Contains(out.String(), "sk-transcribe-secret") {
		t.Errorf("config print leaks the transcription key:\n%s", out.String())
	}
	if _, err := resolve(t, []string{"--home", dir, "--transcribe-url", "ftp://x"}, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "BRIDGED_TRANSCRIBE_URL") {
		t.Errorf("bad url: err = %v", err)
	}
}

func TestMaxMediaBytes(t *testing.T) {
	dir := t.TempDir()
	c, err := resolve(t, []string{"--home", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxMediaBytes != 20<<20 {
		t.Errorf("default max media = %d; want %d", c.MaxMediaBytes, 20<<20)
	}
	c, err = resolve(t, []string{"--home", dir}, map[string]string{"BRIDGED_MAX_MEDIA_BYTES": "100m"})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxMediaBytes != 100<<20 {
		t.Errorf("max media = %d; want %d", c.MaxMediaBytes, 100<<20)
	}
	for _, v := range []string{"0", "lots", "3g"} {
		if _, err := resolve(t, []string{"--home", dir, "--max-media-bytes", v}, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "BRIDGED_MAX_MEDIA_BYTES") {
			t.Errorf("max media %q: err = %v; want invalid BRIDGED_MAX_MEDIA_BYTES", v, err)
		}
	}
}

func TestTaskLimits(t *testing.T) {
	dir := t.TempDir()
	c, err := resolve(t, []string{"--home", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxTasks != 50 || c.MaxTaskPrompt != 16<<10 || c.TaskMaxFailures != 5 {
		t.Errorf("defaults: max tasks %d, max task prompt %d, task max failures %d; want 50, 16384, 5", c.MaxTasks, c.MaxTaskPrompt, c.TaskMaxFailures)
	}
	c, err = resolve(t, []string{"--home", dir, "--max-tasks", "3", "--task-max-failures", "2"}, map[string]string{"BRIDGED_MAX_TASK_PROMPT": "4k"})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxTasks != 3 || c.MaxTaskPrompt != 4<<10 || c.TaskMaxFailures != 2 {
		t.Errorf("set: max tasks %d, max task prompt %d, task max failures %d; want 3, 4096, 2", c.MaxTasks, c.MaxTaskPrompt, c.TaskMaxFailures)
	}
	if v := c.Values(); v["BRIDGED_MAX_TASKS"] != "3" || v["BRIDGED_MAX_TASK_PROMPT"] != "4096" || v["BRIDGED_TASK_MAX_FAILURES"] != "2" {
		t.Errorf("values %v; want the task limits as set", v)
	}
}

// With neither --home nor BRIDGED_HOME the home is the XDG data directory's
// bridged, the same for every command; without HOME it is an error naming
// --home, never the working directory.
func TestDefaultHome(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HOME": "/home/ann"}, "/home/ann/.local/share/bridged"},
		{map[string]string{"HOME": "/home/ann", "XDG_DATA_HOME": "/data"}, "/data/bridged"},
		{map[string]string{"HOME": "/home/ann", "XDG_DATA_HOME": "rel"}, "/home/ann/.local/share/bridged"},
		{map[string]string{"HOME": "/home/ann", "BRIDGED_HOME": "/srv/b"}, "/srv/b"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f := Register(fs)
		if err := fs.Parse([]string{"--env-file", os.DevNull}); err != nil {
			t.Fatal(err)
		}
		c, err := f.Resolve(func(k string) string { return tc.env[k] })
		if err != nil || c.Home != tc.want {
			t.Errorf("env %v: home %v, %v; want %s", tc.env, c, err, tc.want)
		}
	}
	if _, err := DefaultHome(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "--home") {
		t.Errorf("no HOME: %v; want an error naming --home", err)
	}

	// The service user's HOME is the service's home (install-service):
	// there, HOME itself is found.
	svc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(svc, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(svc, "store", "bridged.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if h, err := DefaultHome(func(k string) string { return map[string]string{"HOME": svc}[k] }); err != nil || h != svc {
		t.Errorf("HOME is a bridged home: %q, %v; want %s", h, err, svc)
	}
}

// An inherited TZ Go cannot load does not stop bridged: the system's zone,
// else UTC, stands in with a warning; a bad explicit BRIDGED_TIMEZONE is
// still refused.
func TestInheritedTZFallsBack(t *testing.T) {
	for _, tz := range []string{":/etc/localtime", "IST-2", "Not/AZone"} {
		c, err := resolve(t, nil, map[string]string{"BRIDGED_HOME": t.TempDir(), "TZ": tz})
		if err != nil {
			t.Errorf("TZ=%q: %v; want a fallback", tz, err)
			continue
		}
		if want := loadableOr(systemZone(), "UTC"); c.Timezone.String() != want {
			t.Errorf("TZ=%q: timezone %s; want the system's, %s", tz, c.Timezone, want)
		}
		if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "BRIDGED_TIMEZONE") || !strings.Contains(c.Warnings[0], tz) {
			t.Errorf("TZ=%q: warnings %q; want one naming TZ and BRIDGED_TIMEZONE", tz, c.Warnings)
		}
	}
	c, err := resolve(t, nil, map[string]string{"BRIDGED_HOME": t.TempDir(), "TZ": ":Asia/Kolkata"})
	if err != nil || c.Timezone.String() != "Asia/Kolkata" || len(c.Warnings) != 0 {
		t.Errorf("TZ=:Asia/Kolkata: %+v, %v; want Asia/Kolkata, no warning", c, err)
	}
	_, err = resolve(t, nil, map[string]string{"BRIDGED_HOME": t.TempDir(), "TZ": "Asia/Kolkata", "BRIDGED_TIMEZONE": "IST-2"})
	if err == nil || !strings.Contains(err.Error(), "BRIDGED_TIMEZONE") {
		t.Errorf("BRIDGED_TIMEZONE=IST-2: %v; want it refused", err)
	}
}

// BRIDGED_REMOTE_CONTROL is off by default; its CLI is claude from PATH
// unless named.
func TestRemoteControl(t *testing.T) {
	home := t.TempDir()
	c, err := resolve(t, nil, map[string]string{"BRIDGED_HOME": home})
	if err != nil || c.RemoteControl || c.RemoteControlCLI != "claude" || c.Values()["BRIDGED_REMOTE_CONTROL"] != "false" {
		t.Fatalf("default: %v %q %v; want off, with claude", c.RemoteControl, c.RemoteControlCLI, err)
	}
	c, err = resolve(t, nil, map[string]string{"BRIDGED_HOME": home, "BRIDGED_REMOTE_CONTROL": "true", "BRIDGED_REMOTE_CONTROL_CLI": "/opt/claude/bin/claude"})
	if err != nil || !c.RemoteControl || c.RemoteControlCLI != "/opt/claude/bin/claude" || c.Values()["BRIDGED_REMOTE_CONTROL_CLI"] != "/opt/claude/bin/claude" {
		t.Fatalf("on: %v %q %v; want on, with /opt/claude/bin/claude", c.RemoteControl, c.RemoteControlCLI, err)
	}
}

// BRIDGED_DASHBOARD is off by default and takes a loopback address.
func TestDashboardAddress(t *testing.T) {
	home := t.TempDir()
	c, err := resolve(t, nil, map[string]string{"BRIDGED_HOME": home})
	if err != nil || c.Dashboard != "" {
		t.Fatalf("default: %q %v; want off", c.Dashboard, err)
	}
	for _, a := range []string{"127.0.0.1:8080", "[::1]:0", "127.0.0.2:9000"} {
		c, err := resolve(t, nil, map[string]string{"BRIDGED_HOME": home, "BRIDGED_DASHBOARD": a})
		if err != nil || c.Dashboard != a || c.Values()["BRIDGED_DASHBOARD"] != a {
			t.Errorf("%s: %+v %v", a, c, err)
		}
	}
	_, err = resolve(t, nil, map[string]string{"BRIDGED_HOME": home, "BRIDGED_DASHBOARD": "0.0.0.0:8080"})
	if err == nil || !strings.Contains(err.Error(), "loopback address only") {
		t.Errorf("0.0.0.0: %v; want a clear refusal", err)
	}
}
