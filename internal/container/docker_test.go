package container

// Integration tests against the real Docker engine. Without a daemon they
// skip loudly, except with CI=true, where they fail.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/testimage"
	"github.com/bridged-app/bridged/internal/testlog"
)

const echoImage = "bridged-echoagent:test"

// newDocker returns a runtime logging into the returned buffer, or skips the
// test (fails it under CI=true) when no Docker daemon answers.
func newDocker(t *testing.T) (*Docker, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	d, err := NewDockerWith(zerolog.New(logs).Level(zerolog.DebugLevel), DockerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	skip, err := testimage.DockerSkipReason(ctx, d.Ping)
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip("SKIPPING Docker test: " + skip)
	}
	return d, logs
}

var (
	echoOnce sync.Mutex
	echoDone = map[string]bool{} // by engine address
)

// ensureEchoImage imports the echoagent test image (once per test binary;
// not at all when its content is unchanged).
func ensureEchoImage(t *testing.T, d *Docker) string {
	t.Helper()
	echoOnce.Lock()
	defer echoOnce.Unlock()
	if echoDone[d.Client().DaemonHost()] {
		return echoImage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "echoagent")
	if err := testimage.GoBuild(ctx, ".", "./testdata/echoagent", bin); err != nil {
		t.Fatalf("build echoagent: %v", err)
	}
	if _, err := testimage.EnsureImage(ctx, d.Client(), echoImage, map[string]string{testimage.Entrypoint: bin}); err != nil {
		t.Fatalf("import %s: %v", echoImage, err)
	}
	echoDone[d.Client().DaemonHost()] = true
	return echoImage
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

func uniqueName(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := strings.ToLower(unsafeName.ReplaceAllString(t.Name(), "-"))
	if len(n) > 40 {
		n = n[:40]
	}
	return "bridged-test-" + n + "-" + hex.EncodeToString(b[:])
}

// stderrLines collects a run's stderr.
type stderrLines struct {
	mu    sync.Mutex
	lines []string
}

func (s *stderrLines) add(l string) {
	s.mu.Lock()
	s.lines = append(s.lines, l)
	s.mu.Unlock()
}

func (s *stderrLines) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lines)
}

func echoSpec(t *testing.T, image, prompt string) (Spec, *stderrLines) {
	se := &stderrLines{}
	return Spec{
		Name:     uniqueName(t),
		Image:    image,
		Group:    "family",
		Instance: "test-" + uniqueName(t),
		User:     "1000:1000",
		Env:      []string{"TZ=UTC"},
		Input: ipc.RunInput{
			Prompt: prompt, Group: "family", Chat: "local:family", AssistantName: "Andy", Timezone: "UTC",
		},
		Forbidden: []string{testSecret},
		Limits:    Limits{MemoryBytes: 256 << 20, CPUs: 0.5, Pids: 64},
		Stderr:    se.add,
	}, se
}

// start starts spec and removes the container when the test ends.
func start(t *testing.T, d Runtime, spec Spec) Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := d.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.Stop(ctx, run.ID(), 0); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return run
}

// nextEvent returns the run's next event, failing after timeout.
func nextEvent(t *testing.T, run Run, timeout time.Duration) (ipc.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-run.Events():
		return ev, ok
	case <-time.After(timeout):
		t.Fatalf("no event within %s", timeout)
		return ipc.Event{}, false
	}
}

func waitExit(t *testing.T, run Run, timeout time.Duration) Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	exit, err := run.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return exit
}

func assertGone(t *testing.T, d *Docker, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := d.Client().ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if !cerrdefs.IsNotFound(err) {
		t.Errorf("container %s: inspect got %v; want it removed", shortID(id), err)
	}
	list, err := d.ListManaged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.ID == id {
			t.Errorf("ListManaged still lists %s", shortID(id))
		}
	}
}

func TestDockerRunAnswers(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		d, logs := e.d, e.logs
		image := ensureEchoImage(t, d)
		// A prompt near the size limit: stdin must carry all of it.
		big := strings.Repeat("y", 60<<10)
		prompt := "stderr hello from stderr\nid\ntmp\nenv\ngarbage\n" + big
		spec, stderr := e.echoSpec(t, image, prompt)
		run := start(t, d, spec)

		var events []ipc.Event
		for {
			ev, ok := nextEvent(t, run, 30*time.Second)
			if !ok {
				break
			}
			events = append(events, ev)
		}
		exit := waitExit(t, run, 30*time.Second)
		if exit.Code != 0 || exit.Err != nil {
			t.Errorf("exit %+v; want code 0", exit)
		}
		if len(events) != 2 || events[0].Type != ipc.EventSession || events[0].SessionID != "echo-session" ||
			events[1].Type != ipc.EventResult || events[1].Text != "echo: "+prompt {
			var got []string
			for _, e := range events {
				got = append(got, string(e.Type)+":"+e.SessionID+":"+e.Text[:min(len(e.Text), 40)])
			}
			t.Errorf("events %q; want session echo-session, then the echoed prompt", got)
		}
		lines := stderr.all()
		for _, want := range []string{"hello from stderr", "uid=1000 gid=1000", "tmp ok", "input: group=family", "env: HOME=/home/agent", "env: TZ=UTC"} {
			if !slices.Contains(lines, want) {
				t.Errorf("stderr %q; want the line %q", lines, want)
			}
		}
		for _, l := range lines {
			if strings.Contains(l, testSecret) || strings.Contains(l, "ANTHROPIC_API_KEY") {
				t.Errorf("stderr line %q shows the credential", l)
			}
		}
		if !strings.Contains(logs.String(), "undecodable container stdout line") || !strings.Contains(logs.String(), `"level":"warn"`) {
			t.Errorf("logs %s; want a warning about the undecodable line", logs)
		}
		if strings.Contains(logs.String(), testSecret) || strings.Contains(logs.String(), big[:100]) {
			t.Error("logs hold the secret or the prompt")
		}
		assertGone(t, d, run.ID())
	})
}

func TestDockerMountsWritable(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		d := e.d
		image := ensureEchoImage(t, d)
		h := e.newHome(t)
		p := h.Layout()
		uid, gid := testUser()
		hu, hg := e.hostUser(t)
		for _, f := range []string{"family", "main"} {
			if err := PrepareGroupDirs(h, f, f == "main", hu, hg); err != nil {
				t.Fatal(err)
			}
		}
		e.share(t, p.Dir)
		tests := []struct {
			folder string
			isMain bool
			want   []string
		}{
			{"family", false, []string{
				"wrote /workspace/group/note.txt",
				"cannot write /workspace/global/note.txt",
				"wrote /home/agent/.claude/note.txt",
				"wrote /workspace/ipc/requests/note.txt",
				"cannot write /workspace/groups/family/from-family.txt", // not mounted
			}},
			{"main", true, []string{
				"wrote /workspace/group/note.txt",
				"wrote /workspace/global/note.txt",
				"wrote /home/agent/.claude/note.txt",
				"wrote /workspace/ipc/requests/note.txt",
				"wrote /workspace/groups/main/from-main.txt",
				"cannot write /workspace/groups/family/from-main.txt", // read-only for main
				"cannot write /workspace/groups/from-main.txt",
			}},
		}
		for _, tt := range tests {
			t.Run(tt.folder, func(t *testing.T) {
				prompt := ""
				for _, w := range tt.want {
					prompt += "write " + w[strings.LastIndex(w, " ")+1:] + "\n"
				}
				spec, stderr := e.echoSpec(t, image, prompt)
				spec.User = UserSpec(uid, gid)
				spec.Mounts = Mounts(p, tt.folder, tt.isMain, store.Sees{Folders: []store.Folder{"family"}}, nil)
				run := start(t, d, spec)
				for range run.Events() {
				}
				if exit := waitExit(t, run, 30*time.Second); exit.Code != 0 {
					t.Fatalf("exit %+v; want 0", exit)
				}
				lines := stderr.all()
				for _, w := range tt.want {
					if !slices.Contains(lines, w) {
						t.Errorf("stderr %q; want %q", lines, w)
					}
				}
			})
		}
		if data, err := os.ReadFile(filepath.Join(p.GroupDir("family"), "note.txt")); err != nil || string(data) != "written by echoagent" {
			t.Errorf("host sees %q, %v; want the agent's file in groups/family", data, err)
		}
	})
}

func TestDockerHardeningStopAndList(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		d := e.d
		image := ensureEchoImage(t, d)
		spec, _ := e.echoSpec(t, image, "ignore-term\nsleep 1h")
		spec.Labels = map[string]string{"bridged.test": "hardening"}
		run := start(t, d, spec)
		if ev, _ := nextEvent(t, run, 30*time.Second); ev.Type != ipc.EventSession {
			t.Fatalf("first event %+v; want session", ev)
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ins, err := d.Client().ContainerInspect(ctx, run.ID(), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		c := ins.Container
		if bytes.Contains(ins.Raw, []byte(testSecret)) {
			t.Error("the inspected container holds the secret")
		}
		if c.Config.User != "1000:1000" {
			t.Errorf("user %q; want 1000:1000", c.Config.User)
		}
		hc := c.HostConfig
		// Podman shows ALL as the list of the capabilities it dropped; the
		// kernel's view is what counts: no capability left to gain.
		if e.name == EngineDocker && !slices.Contains(hc.CapDrop, "ALL") {
			t.Errorf("CapDrop %v; want ALL", hc.CapDrop)
		}
		if c.State == nil || c.State.Pid <= 0 {
			t.Fatalf("state %+v; want a running container with a pid", c.State)
		}
		if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.State.Pid)); err != nil {
			t.Errorf("read the container's process status: %v", err)
		} else if !regexp.MustCompile(`(?m)^CapBnd:\s+0+$`).Match(status) {
			t.Errorf("the container's process has a capability bounding set: %s; want none", regexp.MustCompile(`(?m)^Cap.*$`).FindAll(status, -1))
		}
		if !slices.Contains(hc.SecurityOpt, "no-new-privileges") {
			t.Errorf("SecurityOpt %v; want no-new-privileges", hc.SecurityOpt)
		}
		if spec.Limits.MemoryBytes > 0 && (hc.Memory != 256<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 64 || hc.NanoCPUs != 500_000_000) {
			t.Errorf("memory %d pids %v cpus %d; want 256MiB, 64, 0.5", hc.Memory, hc.PidsLimit, hc.NanoCPUs)
		}
		// Rootless Podman before 5.5 drops the ulimit; the runner holds the
		// limit itself (NoFileEnv), on every engine.
		if e.name == EngineDocker && (len(hc.Ulimits) != 1 || hc.Ulimits[0].Name != "nofile" || hc.Ulimits[0].Soft != DefaultNoFile || hc.Ulimits[0].Hard != DefaultNoFile) {
			t.Errorf("ulimits %v; want nofile %d soft and hard", hc.Ulimits, DefaultNoFile)
		}
		if want := fmt.Sprintf("%s=%d", NoFileEnv, DefaultNoFile); !slices.Contains(c.Config.Env, want) {
			t.Errorf("env %q; want %s for the runner", c.Config.Env, want)
		}
		if hc.Init == nil || !*hc.Init || !hc.AutoRemove || hc.Privileged {
			t.Errorf("init %v autoremove %v privileged %v; want init, auto-remove, unprivileged", hc.Init, hc.AutoRemove, hc.Privileged)
		}
		if !strings.Contains(hc.Tmpfs["/tmp"], "mode=1777") {
			t.Errorf("tmpfs %v; want /tmp mode=1777", hc.Tmpfs)
		}
		for k, v := range map[string]string{LabelManaged: "1", LabelGroup: "family", LabelInstance: spec.Instance, "bridged.test": "hardening"} {
			if c.Config.Labels[k] != v {
				t.Errorf("label %s = %q; want %q", k, c.Config.Labels[k], v)
			}
		}

		list, err := d.ListManaged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(list, func(i Info) bool { return i.ID == run.ID() })
		if i < 0 {
			t.Fatalf("ListManaged %+v; want it to list %s", list, spec.Name)
		}
		if got := list[i]; got.Name != spec.Name || got.Group != "family" || got.Instance != spec.Instance || got.State != "running" {
			t.Errorf("ListManaged entry %+v; want name, group, instance and running", got)
		}

		// The runner ignores SIGTERM: Stop must wait the grace, then kill.
		const grace = 2 * time.Second
		began := time.Now()
		if err := d.Stop(ctx, run.ID(), grace); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		took := time.Since(began)
		if took < grace-200*time.Millisecond || took > grace+15*time.Second {
			t.Errorf("Stop took %s; want about the %s grace", took, grace)
		}
		exit := waitExit(t, run, 30*time.Second)
		if exit.Code == 0 {
			t.Errorf("exit %+v; want a non-zero code for a killed container", exit)
		}
		if _, ok := <-run.Events(); ok {
			t.Error("Events not closed after the container stopped")
		}
		assertGone(t, d, run.ID())
	})
}

func TestDockerStopPromptly(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		d := e.d
		image := ensureEchoImage(t, d)
		spec, _ := e.echoSpec(t, image, "sleep 1h")
		run := start(t, d, spec)
		if ev, _ := nextEvent(t, run, 30*time.Second); ev.Type != ipc.EventSession {
			t.Fatalf("first event %+v; want session", ev)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		began := time.Now()
		if err := d.Stop(ctx, run.ID(), 10*time.Second); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		// SIGTERM reaches the runner through the init process: no need to
		// wait for the grace.
		if took := time.Since(began); took > 8*time.Second {
			t.Errorf("Stop took %s; want the runner to end on SIGTERM", took)
		}
		waitExit(t, run, 30*time.Second)
		assertGone(t, d, run.ID())
		// Stopping again, or something that never existed, is not an error.
		if err := d.Stop(ctx, run.ID(), time.Second); err != nil {
			t.Errorf("second Stop: %v; want nil", err)
		}
		if err := d.Stop(ctx, "bridged-test-does-not-exist", time.Second); err != nil {
			t.Errorf("Stop of an unknown container: %v; want nil", err)
		}
	})
}

func TestDockerExitCode(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		d := e.d
		image := ensureEchoImage(t, d)
		spec, stderr := e.echoSpec(t, image, "stderr going away\nexit 3")
		run := start(t, d, spec)
		var types []ipc.EventType
		for ev := range run.Events() {
			types = append(types, ev.Type)
		}
		exit := waitExit(t, run, 30*time.Second)
		if exit.Code != 3 {
			t.Errorf("exit %+v; want code 3", exit)
		}
		if !slices.Equal(types, []ipc.EventType{ipc.EventSession}) {
			t.Errorf("events %v; want only the session", types)
		}
		if !slices.Contains(stderr.all(), "going away") {
			t.Errorf("stderr %q; want the line before the exit", stderr.all())
		}
		assertGone(t, d, run.ID())
	})
}

func TestDockerStartFailureLeavesNothing(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		d := e.d
		image := ensureEchoImage(t, d)
		tests := []struct {
			name   string
			mutate func(*Spec)
		}{
			{"missing image", func(s *Spec) { s.Image = "bridged-test-no-such-image:none" }},
			{"missing mount source", func(s *Spec) {
				s.Mounts = []Mount{{Source: filepath.Join(t.TempDir(), "missing"), Target: "/workspace/group"}}
			}},
			{"root user", func(s *Spec) { s.User = "0:0" }},
			{"file mounted on a directory (fails at start, after create)", func(s *Spec) {
				f := filepath.Join(t.TempDir(), "file")
				if err := os.WriteFile(f, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				s.Mounts = []Mount{{Source: f, Target: "/workspace/group"}}
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				spec, _ := e.echoSpec(t, image, "hello")
				tt.mutate(&spec)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				run, err := d.Start(ctx, spec)
				if err == nil {
					t.Cleanup(func() { d.Stop(context.Background(), run.ID(), 0) })
					t.Fatal("Start succeeded; want an error")
				}
				t.Logf("Start: %v", err)
				if strings.Contains(err.Error(), testSecret) {
					t.Errorf("error %q reveals the secret", err)
				}
				list, lerr := d.ListManaged(ctx)
				if lerr != nil {
					t.Fatal(lerr)
				}
				for _, c := range list {
					if c.Name == spec.Name {
						t.Errorf("container %s left behind after failed Start (%v)", c.Name, err)
					}
				}
			})
		}
	})
}

func TestDockerImageExists(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		d := e.d
		image := ensureEchoImage(t, d)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for ref, want := range map[string]bool{image: true, "bridged-test-no-such-image:none": false} {
			got, err := d.ImageExists(ctx, ref)
			if err != nil || got != want {
				t.Errorf("ImageExists(%s) = %v, %v; want %v, nil", ref, got, err, want)
			}
		}
	})
}

func TestDockerWaitHonoursContext(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		d := e.d
		image := ensureEchoImage(t, d)
		spec, _ := e.echoSpec(t, image, "sleep 1h")
		run := start(t, d, spec)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := run.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Wait with a cancelled context: %v; want context.Canceled", err)
		}
	})
}
