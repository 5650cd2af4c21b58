package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/credproxy"
	bhome "github.com/bridged-app/bridged/internal/home"
)

// startConfigDaemon serves the control API in home with the configuration
// `bridged run ARGS` resolves (in the test's directory, which has no .env).
func startConfigDaemon(t *testing.T, home string, env map[string]string, args ...string) {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cf := config.Register(fs)
	if err := fs.Parse(append([]string{"--home", home}, args...)); err != nil {
		t.Fatal(err)
	}
	cfg, err := cf.Resolve(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	hm, err := bhome.New(home, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	uploads := hm.Uploads()
	proxy, err := credproxy.New(credproxy.Config{Upstream: cfg.AnthropicURL, APIKey: cfg.Secrets[config.EnvAPIKey]})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := control.Listen(control.Options{
		Uploads: &uploads,
		Socket:  cfg.Socket(),
		Admin:   &control.Admin{DB: openDB(t, home), AssistantName: "Andy"},
		Config:  daemonConfig{cfg: cfg, proxy: proxy},
		Version: "test",
		Log:     zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("control server: %v", err)
		}
	})
}

// After the README's fallback (`make run IMAGE=bridged-agent:test`: the
// image given as a flag only), `config` and `doctor` claim nothing the
// files do not hold; a value the daemon's env file does hold otherwise is
// told, from any directory (the daemon's own env file is read).
func TestConfigClaimsOnlyWhatFilesHold(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	startConfigDaemon(t, home, nil, "--image", "bridged-agent:test")
	out, _, err := cli(t, ctx, nil, "", "config", "--home", home)
	if err != nil || !strings.Contains(out, "BRIDGED_IMAGE=bridged-agent:test\n") || strings.Contains(out, "files now say") {
		t.Errorf("bridged config after the fallback: %v\n%s\nwant the daemon's image and no claim about the files", err, out)
	}
	out, _, _ = cli(t, ctx, nil, "", "doctor", "--home", home)
	if strings.Contains(out, "otherwise") || strings.Contains(out, "restart bridged for the files") {
		t.Errorf("bridged doctor after the fallback:\n%s\nwant no claim about the files", out)
	}

	// A daemon started elsewhere with an env file that now says otherwise.
	home2 := newHome(t)
	envFile := filepath.Join(t.TempDir(), ".env")
	os.WriteFile(envFile, []byte("BRIDGED_ASSISTANT_NAME=Andy\n"), 0o600)
	startConfigDaemon(t, home2, nil, "--env-file", envFile)
	os.WriteFile(envFile, []byte("BRIDGED_ASSISTANT_NAME=Bob\n"), 0o600)
	out, _, err = cli(t, ctx, nil, "", "config", "--home", home2)
	if err != nil || !strings.Contains(out, "# BRIDGED_ASSISTANT_NAME: the files now say Bob") {
		t.Errorf("bridged config from another directory: %v\n%s\nwant the daemon's env file read, saying Bob", err, out)
	}
}

// An unknown BRIDGED_ variable in the environment or the env file is
// named with the nearest setting, by every command.
func TestUnknownVariableNamed(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	envFile := filepath.Join(t.TempDir(), "bridged.env")
	os.WriteFile(envFile, []byte("BRIDGED_DASHBORD=127.0.0.1:8080\n"), 0o600)
	var out, errb strings.Builder
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" },
		environ: func() []string { return []string{"BRIDGED_IDEL_TIMEOUT=5m", "PATH=/bin"} }}
	if err := a.run(ctx, []string{"groups", "list", "--home", home, "--env-file", envFile}); err != nil {
		t.Fatalf("groups list: %v", err)
	}
	for _, want := range []string{"did you mean BRIDGED_DASHBOARD?", "did you mean BRIDGED_IDLE_TIMEOUT?"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("groups list stderr %q lacks %q", errb.String(), want)
		}
	}
	out.Reset()
	if err := a.run(ctx, []string{"config", "--home", home, "--env-file", envFile}); err != nil {
		t.Fatalf("config: %v", err)
	}
	if !strings.Contains(out.String(), "# warning: BRIDGED_DASHBORD") || !strings.Contains(out.String(), "# warning: BRIDGED_IDEL_TIMEOUT") {
		t.Errorf("config:\n%s\nwant both unknown variables warned of", out.String())
	}
}

// `groups set` finds its group as `chat` does: by folder, chat id or name.
func TestGroupsSetByNameOrChat(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--home", home, "--name", "The Family", "120363@g.us"); err != nil {
		t.Fatalf("groups add: %v", err)
	}
	for _, tc := range []struct{ group, model string }{{"the family", "opus"}, {"120363@g.us", "sonnet"}} {
		out, errOut, err := cli(t, ctx, nil, "", "groups", "set", "--home", home, "--model", tc.model, tc.group)
		if err != nil || !strings.Contains(out, "model "+tc.model) {
			t.Errorf("groups set --model %s %q: %v\n%s%s\nwant the group changed", tc.model, tc.group, err, out, errOut)
		}
	}
	if _, _, err := cli(t, ctx, nil, "", "groups", "set", "--home", home, "--model", "x", "nobody"); err == nil || !strings.Contains(err.Error(), `no group with folder, chat id or name "nobody"`) {
		t.Errorf("groups set on no group: %v; want it named", err)
	}
}

// The owner schedules a task from the command line: by the task rules
// (a bad schedule is refused with the reason), through the daemon when it
// runs, on the database when it is stopped.
func TestTasksAdd(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--home", home, "--name", "The Family", "120363@g.us"); err != nil {
		t.Fatalf("groups add: %v", err)
	}
	out, errOut, err := cli(t, ctx, nil, "", "tasks", "add", "--home", home, "--cron", "0 9 * * 1", "the family", "Plan", "the", "week")
	if err != nil || !strings.Contains(out, "Scheduled task task-") || !strings.Contains(out, "for group the-family") || !strings.Contains(out, "next run") {
		t.Fatalf("tasks add --cron: %v\n%s%s\nwant the task scheduled", err, out, errOut)
	}
	startDaemon(t, home, nil)
	if out, errOut, err = cli(t, ctx, nil, "", "tasks", "add", "--home", home, "--every", "2h", "--context", "group", "120363@g.us", "Check the inbox"); err != nil {
		t.Fatalf("tasks add --every with the daemon running: %v\n%s%s", err, out, errOut)
	}
	list, _, err := cli(t, ctx, nil, "", "tasks", "list", "--home", home, "--json")
	if err != nil || !strings.Contains(list, `"prompt": "Plan the week"`) || !strings.Contains(list, `"value": "0 9 * * 1"`) ||
		!strings.Contains(list, `"value": "2h"`) || !strings.Contains(list, `"context_mode": "group"`) {
		t.Errorf("tasks list --json: %v\n%s\nwant both tasks", err, list)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--at", "2001-01-01 09:00", "the-family", "x"}, "in the past"},
		{[]string{"--every", "5s", "the-family", "x"}, "must be at least"},
		{[]string{"--cron", "61 * * * *", "the-family", "x"}, "invalid cron expression"},
		{[]string{"--every", "1h", "nobody", "x"}, `no group with folder, chat id or name "nobody"`},
	} {
		_, _, err := cli(t, ctx, nil, "", append([]string{"tasks", "add", "--home", home}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("tasks add %q: %v; want %q", tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{{"the-family", "x"}, {"--cron", "* * * * *", "--every", "1h", "the-family", "x"}, {"--every", "1h", "the-family"}} {
		_, errOut, err := cli(t, ctx, nil, "", append([]string{"tasks", "add", "--home", home}, args...)...)
		if exitCode(err) != 2 || !strings.Contains(errOut, "tasks add") {
			t.Errorf("tasks add %q: %v, %q; want a usage error", args, err, errOut)
		}
	}
}

// Durations in the daemon's log read as durations: `took=1.2s` on the
// console, "1.234567891s" in JSON (time.ParseDuration reads it back), not
// a float of milliseconds.
func TestLogDurationsReadable(t *testing.T) {
	var console, js strings.Builder
	l := newLogger(&config.Config{LogLevel: "info", LogFormat: "console"}, &console)
	l.Info().Dur("took", 1234567891*time.Nanosecond).Dur("waited", 435218*time.Nanosecond).Bool("timed_out", false).Msg("x")
	if !strings.Contains(console.String(), "took=1.2s") || !strings.Contains(console.String(), "waited=435µs") || !strings.Contains(console.String(), "timed_out=false") {
		t.Errorf("console line %q; want took=1.2s, waited=435µs and timed_out=false", console.String())
	}
	l = newLogger(&config.Config{LogLevel: "info", LogFormat: "json"}, &js)
	l.Info().Dur("took", 1234567891*time.Nanosecond).Msg("x")
	if !strings.Contains(js.String(), `"took":"1.234567891s"`) {
		t.Errorf("JSON line %q; want \"took\":\"1.234567891s\"", js.String())
	}
}

// The tables say in a word what is not set: no lone "-" in a column.
func TestTablesSayNoneInWords(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--home", home, "--name", "main", "--main", "local:main"); err != nil {
		t.Fatal(err)
	}
	out, _, err := cli(t, ctx, nil, "", "groups", "set", "--home", home, "--trigger", "@Bob", "main")
	if err != nil || !strings.Contains(out, "model default, timeout default, extra mounts none, daily budget none") {
		t.Errorf("groups set: %v\n%s\nwant the unset values in words", err, out)
	}
	if _, _, err := cli(t, ctx, nil, "", "tasks", "add", "--home", home, "--every", "1h", "main", "ping"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"groups", "list"}, {"tasks", "list"}} {
		out, _, err := cli(t, ctx, nil, "", append(args, "--home", home)...)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if strings.Contains(" "+line+" ", " - ") {
				t.Errorf("bridged %s: %q has a - placeholder", strings.Join(args, " "), line)
			}
		}
		if args[0] == "tasks" && !strings.Contains(out, "never") {
			t.Errorf("tasks list:\n%s\nwant LAST RUN never", out)
		}
	}
	if out, _, _ := cli(t, ctx, nil, "", "doctor", "--home", home); !strings.Contains(out, "(env file none: ./.env is read when present)") {
		t.Errorf("doctor with no env file:\n%s\nwant it said in words", out)
	}
}

// A daemon started with the credential in its own environment (`export
// ANTHROPIC_API_KEY=…; make run`) is not said to lack one by a doctor run
// from another shell.
func TestDoctorDaemonCredentialFromItsEnvironment(t *testing.T) {
	home := newHome(t)
	startConfigDaemon(t, home, map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test-xxxxxxxxxxxxxxxxxxxx"}, "--image", "bridged-agent:test")
	out, _, _ := cli(t, context.Background(), nil, "", "doctor", "--home", home)
	if strings.Contains(out, "answered 401") || !strings.Contains(out, "api          ok    not asked from here") {
		t.Errorf("bridged doctor from a shell without the daemon's credential:\n%s\nwant the api check left to the daemon's credential line", out)
	}
}
