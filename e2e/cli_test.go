package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// defaultHomeEnv is an env whose home is the default every command finds
// without --home: HOME is a fresh directory, XDG_DATA_HOME unset, so the
// home is $HOME/.local/share/bridged. The working directory of the
// commands (wd) is another fresh directory.
func defaultHomeEnv(t *testing.T, daemonArgs ...string) (e *env, wd string) {
	t.Helper()
	needDocker(t)
	// Short paths: the control socket's path must fit in 108 bytes.
	user, err := os.MkdirTemp("", "bh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(user) })
	wd = filepath.Join(user, "wd")
	if err := os.Mkdir(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	e = makeEnv(t, daemonArgs)
	e.home = filepath.Join(user, ".local", "share", "bridged")
	e.http = controlClient(e.home)
	e.extraEnv = append(e.extraEnv, "HOME="+user, "XDG_DATA_HOME=")
	return e, wd
}

// bare runs a bridged command as a user would type it: no --home, in
// the working directory wd.
func (e *env) bare(wd string, args ...string) (stdout, stderr string, err error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgedBin, args...)
	cmd.Env = e.environ()
	cmd.Dir = wd
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("bridged %s: %w\nstderr: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), errb.String(), err
}

func (e *env) mustBare(wd string, args ...string) string {
	e.t.Helper()
	out, _, err := e.bare(wd, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// startBare runs `bridged run` without --home, as `make run` does, in wd,
// and waits until its control API answers.
func (e *env) startBare(wd string) *daemon {
	e.t.Helper()
	return e.launch(wd, append([]string{"run", "--image", testImage}, e.args...))
}

// entries lists what is under dir, relative to it.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// One default home: `bridged run` without --home keeps its state in
// ~/.local/share/bridged, and every other command, run without --home from
// another directory, finds that daemon; before it ever ran, the read-only
// commands create nothing anywhere.
func TestE2EDefaultHome(t *testing.T) {
	parallel(t, light)
	e, wd := defaultHomeEnv(t, "--idle-timeout", "2m")
	user := filepath.Dir(wd)

	// Nothing yet: the read-only commands say so and create nothing.
	for _, args := range [][]string{{"groups", "list"}, {"tasks", "list"}, {"status"}, {"config"}, {"groups", "list", "--json"}} {
		out, _, err := e.bare(wd, args...)
		if err != nil {
			t.Errorf("bridged %s with no home yet: %v", strings.Join(args, " "), err)
		}
		if args[0] == "groups" && len(args) == 2 && !strings.Contains(out, "no database yet") {
			t.Errorf("bridged groups list with no home yet printed %q; want it to say there is no database yet", out)
		}
	}
	if got := entries(t, user); len(got) != 1 || got[0] != "wd" {
		t.Fatalf("read-only commands with no home created %q; want nothing beside the working directory", got)
	}

	e.mustBare(wd, "groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	if _, err := os.Stat(filepath.Join(e.home, "store", "bridged.db")); err != nil {
		t.Fatalf("groups add without --home did not register in the default home: %v", err)
	}
	e.startBare(wd)

	if out := e.mustBare(wd, "status"); !strings.Contains(out, "bridged is running") {
		t.Errorf("bridged status without --home:\n%s\nwant the running daemon", out)
	}
	if out := e.mustBare(wd, "chat", "-m", "hello", "main"); !strings.Contains(out, "echo: hello") {
		t.Errorf("bridged chat -m hello main without --home printed %q; want the agent's reply", out)
	}
	if out := e.mustBare(wd, "config"); !strings.Contains(out, "BRIDGED_HOME="+e.home) {
		t.Errorf("bridged config without --home:\n%s\nwant BRIDGED_HOME=%s", out, e.home)
	}
	if got := entries(t, wd); len(got) != 0 {
		t.Errorf("the commands left %q in the working directory; want nothing", got)
	}
}

// `make run` alone: the first start of a home with no group registers the
// terminal chat local:main as the main group and says in its first lines
// how to talk to it; `bridged chat` in another terminal, with no --home and
// no group named, then gets the agent's reply. A later start registers
// nothing again.
func TestE2EFirstStartRegistersMain(t *testing.T) {
	parallel(t, light)
	e, wd := defaultHomeEnv(t, "--idle-timeout", "2m")
	d := e.startBare(wd)
	// The program as started (bridged on PATH is another, or none).
	if !d.waitLog("talk to the main agent from another terminal: "+bridgedBin+" chat\"", 10*time.Second) {
		t.Fatalf("the daemon's first lines do not say how to talk to the main agent:\n%s", tail(d.logs(), 20))
	}
	d.waitLog("bridged running", 30*time.Second)
	// The lines an owner sees at the default level (info): the harness
	// logs at debug, where the migrations are.
	lines := slices.DeleteFunc(strings.Split(d.logs(), "\n"), func(l string) bool { return strings.Contains(l, `"level":"debug"`) })
	hint := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, bridgedBin+" chat") })
	if running := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "bridged running") }); hint > 4 || hint > running {
		t.Errorf("the hint is line %d of the log, \"bridged running\" line %d; want the hint among the first lines", hint+1, running+1)
	}
	list := e.mustBare(wd, "groups", "list")
	if !strings.Contains(list, "local:main") || !strings.Contains(list, "everything (main)") {
		t.Fatalf("groups list after the first start:\n%s\nwant local:main as the main group", list)
	}
	if out := e.mustBare(wd, "chat", "-m", "hello", "main"); !strings.Contains(out, "echo: hello") {
		t.Errorf("bridged chat -m hello main printed %q; want the agent's reply", out)
	}
	d.stop(t)

	// The owner removes it: the next start registers nothing, and says how.
	e.mustBare(wd, "groups", "remove", "main")
	d = e.startBare(wd)
	if !d.waitLog("no group is registered", 10*time.Second) {
		t.Errorf("a start with no group does not say how to register one:\n%s", tail(d.logs(), 20))
	}
	if list := e.mustBare(wd, "groups", "list"); strings.Contains(list, "everything (main)") {
		t.Errorf("groups list after a later start:\n%s\nwant no group registered again", list)
	}
}

// The binary's help: `--help` works at every level, on stdout (`bridged
// --help | less`), and each subcommand's is short and lists its own flags,
// not the daemon's.
func TestE2EHelpAtEveryLevel(t *testing.T) {
	needDocker(t) // for the binary the harness builds
	for _, args := range [][]string{{"--help"}, {"groups", "--help"}, {"tasks", "--help"}, {"groups", "add", "--help"}, {"chat", "--help"}, {"status", "--help"}} {
		cmd := exec.Command(bridgedBin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 || !strings.Contains(string(out), "Usage: bridged") {
			t.Errorf("bridged %s: %v\nstdout:\n%s\nstderr:\n%s\nwant the help on stdout, exit 0", strings.Join(args, " "), err, out, stderr.String())
		}
		if n := strings.Count(string(out), "\n"); n >= 25 || strings.Contains(string(out), "--container-memory") {
			t.Errorf("bridged %s: %d lines, with the daemon's settings: %v; want under 25, its own flags:\n%s",
				strings.Join(args, " "), n, strings.Contains(string(out), "--container-memory"), out)
		}
	}
}

// An inherited TZ Go cannot load (a POSIX rule) does not stop `bridged
// run`: it starts on the system's zone (else UTC) and says so; a bad
// BRIDGED_TIMEZONE the owner set is still refused.
func TestE2EInheritedTZFallsBack(t *testing.T) {
	parallel(t, light)
	e := newEnv(t)
	e.extraEnv = []string{"TZ=IST-2"}
	d := e.start()
	if !d.waitLog(`TZ=\"IST-2\" is not a timezone bridged can load`, 10*time.Second) {
		t.Errorf("no warning about TZ=IST-2:\n%s", tail(d.logs(), 20))
	}
	d.stop(t)
	e.extraEnv = []string{"TZ=IST-2", "BRIDGED_TIMEZONE=IST-2"}
	_, err := e.cli("run", "--image", testImage)
	if err == nil || !strings.Contains(err.Error(), "BRIDGED_TIMEZONE") {
		t.Errorf("bridged run with BRIDGED_TIMEZONE=IST-2: %v; want it refused, naming BRIDGED_TIMEZONE", err)
	}
}

// `bridged run` on an image that is not there names the way to build it,
// and the test-image fallback for a machine without Docker Hub and npm.
func TestE2EMissingImageNamesFallback(t *testing.T) {
	e := newEnv(t)
	_, err := e.cli("run", "--image", "bridged-agent:missing-e2e")
	if err == nil || !strings.Contains(err.Error(), "make image") || !strings.Contains(err.Error(), "make test-image") {
		t.Errorf("bridged run with a missing image: %v; want make image and the make test-image fallback named", err)
	}
}
