package container

// Acceptance test of the real agent-runner with the fake claude, in the
// image bridged-agent:test, against the real Docker engine.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipc/ipctest"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/testimage"
)

// requireMainPackage skips the test while dir holds no Go files yet.
func requireMainPackage(t *testing.T, dir string) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(matches) == 0 {
		t.Skipf("SKIPPING: %s has no Go files yet", dir)
	}
}

// nextResult returns the next result event, skipping others.
func nextResult(t *testing.T, run Run, timeout time.Duration) ipc.Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-run.Events():
			if !ok {
				t.Fatal("events ended before a result")
			}
			if ev.Type == ipc.EventError {
				t.Fatalf("error event: %s", ev.Message)
			}
			if ev.Type == ipc.EventResult {
				return ev
			}
		case <-deadline:
			t.Fatalf("no result within %s", timeout)
		}
	}
}

func message(text string) string {
	return `<context timezone="UTC" now="2026-11-22T09:30:00Z"/>` + "\n<messages>\n" +
		`<message sender="Alice" time="2026-11-22T09:29:58Z">` + text + "</message>\n</messages>"
}

func TestDockerAgentRunner(t *testing.T) {
	forEngines(t, func(t *testing.T, e *testEngine) {
		d, logs := e.d, e.logs
		requireMainPackage(t, "../../agent-runner")
		requireMainPackage(t, "../../cmd/fakeclaude")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := testimage.Ensure(ctx, d.Client(), testimage.Options{RepoRoot: "../.."}); err != nil {
			t.Fatalf("test image: %v", err)
		}

		var b [8]byte
		_, _ = rand.Read(b[:])
		secret := "sk-ant-test-SECRET-" + hex.EncodeToString(b[:])
		h := e.newHome(t)
		p := h.Layout()
		uid, gid := testUser()
		hu, hg := e.hostUser(t)
		if err := PrepareGroupDirs(h, "family", false, hu, hg); err != nil {
			t.Fatal(err)
		}
		if err := EnsureSettings(h, "family", hu, hg); err != nil {
			t.Fatal(err)
		}
		e.share(t, p.Dir)
		stderr := &stderrLines{}
		spec := Spec{
			Name:     uniqueName(t),
			Image:    testimage.DefaultTag,
			Group:    "family",
			Instance: "test-" + uniqueName(t),
			User:     UserSpec(uid, gid),
			Mounts:   Mounts(p, "family", false, store.Sees{}, nil),
			Env:      []string{"TZ=UTC"},
			Input: ipc.RunInput{
				Prompt: message("hello there"), Group: "family", Chat: "local:family",
				AssistantName: "Andy", Timezone: "UTC",
			},
			Forbidden: []string{secret},
			Limits:    e.limits(t, Limits{MemoryBytes: 512 << 20, Pids: 256}),
			Stderr:    stderr.add,
		}
		run := start(t, d, spec)
		var events []ipc.Event

		first := nextResult(t, run, time.Minute)
		events = append(events, first)
		if first.Text != "echo: hello there" || first.IsError {
			t.Fatalf("first result %+v; want \"echo: hello there\"", first)
		}
		ins, err := d.Client().ContainerInspect(ctx, run.ID(), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		if bytes.Contains(ins.Raw, []byte(secret)) {
			t.Error("the inspected container holds the credential")
		}

		layout := ipc.Layout{Root: p.IPCDir("family")}
		if _, err := ipctest.WriteInput(layout, message("and a follow-up")); err != nil {
			t.Fatal(err)
		}
		second := nextResult(t, run, time.Minute)
		events = append(events, second)
		if second.Text != "echo: and a follow-up" || second.IsError {
			t.Fatalf("second result %+v; want \"echo: and a follow-up\"", second)
		}

		if err := ipctest.WriteClose(layout); err != nil {
			t.Fatal(err)
		}
		for ev := range run.Events() {
			events = append(events, ev)
		}
		exit := waitExit(t, run, time.Minute)
		if exit.Code != 0 || exit.Err != nil {
			t.Errorf("exit %+v; want 0 after the close sentinel (stderr: %q)", exit, stderr.all())
		}
		assertGone(t, d, run.ID())

		for _, ev := range events {
			if strings.Contains(ev.Text+ev.Message+ev.SessionID, secret) {
				t.Errorf("event %+v shows the credential", ev)
			}
		}
		for _, l := range stderr.all() {
			if strings.Contains(l, secret) {
				t.Errorf("stderr line %q shows the credential", l)
			}
		}
		if strings.Contains(logs.String(), secret) {
			t.Error("the runtime's log shows the credential")
		}
		err = filepath.WalkDir(p.Dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds the credential", path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
