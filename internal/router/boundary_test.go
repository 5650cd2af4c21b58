package router

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// boundaryFailures returns the boundary incidents in the router's status.
func boundaryFailures(h *harness) []Failure {
	var out []Failure
	for _, f := range h.r.Status().Failures {
		if f.Kind == KindBoundary {
			out = append(out, f)
		}
	}
	return out
}

// The main agent replaced groups/fam by a symlink to ../store: fam's next
// container gets a real, fresh directory, never the store, and the incident
// shows in status for fam.
func TestSymlinkedGroupFolderReplacedBeforeMount(t *testing.T) {
	h := newHarness(t, nil)
	groupsDir := filepath.Join(h.home, "groups")
	if err := os.MkdirAll(groupsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../store", filepath.Join(groupsDir, "fam")); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.post(famChat, "@Robo hello")
	run := h.nextRun()

	src := filepath.Join(groupsDir, "fam")
	i := slices.IndexFunc(run.spec.Mounts, func(m container.Mount) bool { return m.Source == src })
	if i < 0 {
		t.Fatalf("mounts %+v; want %s mounted", run.spec.Mounts, src)
	}
	fi, err := os.Lstat(src)
	if err != nil || !fi.IsDir() {
		t.Fatalf("groups/fam at container start: %v, %v; want a real directory", fi, err)
	}
	if _, err := os.Stat(filepath.Join(src, "bridged.db")); !os.IsNotExist(err) {
		t.Fatalf("the store shows through groups/fam: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(h.home, "store", "bridged.db")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("store/bridged.db: %v, %v; want it where it was", fi, err)
	}
	fs := boundaryFailures(h)
	if len(fs) != 1 || fs[0].Group != "fam" || !strings.Contains(fs[0].Error, "groups/fam") || !strings.Contains(fs[0].Error, "symlink") {
		t.Fatalf("boundary failures in status: got %+v; want one for fam naming groups/fam and the symlink", fs)
	}
	run.result("hi")
	h.nextSend()
	run.exit(0)
	h.waitIdle("fam")
}

// The agent replaced its input/ by a symlink to a directory outside, and
// planted input/_close as a symlink to a file outside: the piped message
// lands in a fresh input/ and the close sentinel replaces the link; nothing
// outside is written or truncated.
func TestSymlinkedInputNeverWrittenThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 40 * time.Millisecond
		h := newHarness(t, func(c *Config) { c.IdleTimeout = idle })
		h.start()
		h.post(mainChat, "first")
		run := h.nextRun()

		outside := filepath.Join(h.home, "outside")
		if err := os.MkdirAll(outside, 0o755); err != nil {
			t.Fatal(err)
		}
		victim := filepath.Join(outside, "victim.db")
		if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
			t.Fatal(err)
		}
		input := h.inputDir("main")
		if err := os.RemoveAll(input); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, input); err != nil {
			t.Fatal(err)
		}

		h.post(mainChat, "second")
		pollUntil(t, func() bool { return len(boundaryFailures(h)) > 0 }, "the input/ incident in status")
		names := settledInputs(t, input, 1)
		if fi, err := os.Lstat(input); err != nil || !fi.IsDir() {
			t.Fatalf("input/: %v, %v; want a real directory again", fi, err)
		}
		b, err := os.ReadFile(filepath.Join(input, names[0]))
		if err != nil {
			t.Fatal(err)
		}
		if in, err := ipc.DecodeInput(b); err != nil || !strings.Contains(in.Text, ">second</message>") {
			t.Fatalf("piped input: %+v, %v; want the second message", in, err)
		}
		if f := boundaryFailures(h)[0]; f.Group != "main" || !strings.Contains(f.Error, "data/ipc/main/input") || !strings.Contains(f.Error, "symlink") {
			t.Fatalf("incident: got %+v; want data/ipc/main/input, a symlink", f)
		}
		consume(t, input, names)

		// The close sentinel replaces a planted link instead of writing through.
		closePath := filepath.Join(input, ipc.CloseName)
		if err := os.Symlink(victim, closePath); err != nil {
			t.Fatal(err)
		}
		run.result("both answered")
		h.nextSend()
		advance(idle)
		if fi, err := os.Lstat(closePath); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("close sentinel after the idle timeout: %v, %v; want a regular file in place of the link", fi, err)
		}
		run.exit(0)
		h.waitIdle("main")

		if data, err := os.ReadFile(victim); err != nil || string(data) != "precious" {
			t.Fatalf("file behind the planted link: %q, %v; want it untouched", data, err)
		}
		entries, err := os.ReadDir(outside)
		if err != nil || len(entries) != 1 {
			t.Fatalf("outside directory holds %v (%v); want only the victim file", entries, err)
		}
	})
}

// An agent that swaps its folder for a symlink between the preparation and
// the container's creation gets no container: the run fails, the failure
// shows in status for the group, and the chat gets the failure notice.
func TestMountSourceCheckRefusesRun(t *testing.T) {
	h := newHarness(t, nil)
	src := filepath.Join(h.home, "groups", "fam")
	swaps := 0
	h.r.beforeMountCheck = func(f store.Folder) {
		if f != "fam" {
			return
		}
		swaps++
		if err := os.RemoveAll(src); err != nil {
			t.Error(err)
		}
		if err := os.Symlink("../store", src); err != nil {
			t.Error(err)
		}
	}
	h.start()
	h.post(famChat, "@Robo hello")
	notice := h.nextSend()
	if !strings.Contains(notice.Text, "could not answer") || !strings.Contains(notice.Text, "refused to start the container") {
		t.Fatalf("notice: got %q; want the failure notice saying the container was refused", notice.Text)
	}
	h.waitIdle("fam")
	if n := h.rt.starts(); n != 0 {
		t.Fatalf("containers started: got %d; want none", n)
	}
	var fail *Failure
	for _, f := range h.r.Status().Failures {
		if f.Kind == "messages" {
			fail = &f
		}
	}
	if fail == nil || fail.Group != "fam" || !strings.Contains(fail.Error, "symlink") || !strings.Contains(fail.Error, src) {
		t.Fatalf("status failures: got %+v; want a messages failure for fam naming the symlink %s", h.r.Status().Failures, src)
	}
	if swaps != 2 {
		t.Errorf("mount checks: got %d; want 2 (the run and its one retry)", swaps)
	}
	logs, _ := filepath.Glob(filepath.Join(h.home, "data", "logs", "fam", "run-*.log"))
	if len(logs) == 0 {
		t.Fatal("no run log for the refused runs")
	}
	b, _ := os.ReadFile(logs[0])
	if !strings.Contains(string(b), "failure: refused to start the container") {
		t.Errorf("run log: %q; want the refusal", b)
	}
}

func TestNewRefusesRootContainerUser(t *testing.T) {
	for _, ids := range [][2]int{{0, 0}, {0, 61000}, {-1, 5}} {
		h := newHarness(t, nil)
		cfg := h.cfg
		cfg.Container.UID, cfg.Container.GID = ids[0], ids[1]
		if _, err := New(cfg, Deps{Store: h.db, Runtime: h.rt}); err == nil || !strings.Contains(err.Error(), "root") {
			t.Errorf("New with container user %d:%d: got %v; want an error", ids[0], ids[1], err)
		}
	}
}

// The container runs as the configured user.
func TestContainerUser(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Container.UID, c.Container.GID = 61000, 61001 })
	h.start()
	h.post(mainChat, "hello")
	run := h.nextRun()
	if got, want := run.spec.User, fmt.Sprintf("%d:%d", 61000, 61001); got != want {
		t.Fatalf("container user: got %q; want %q", got, want)
	}
	run.result("hi")
	h.nextSend()
	run.exit(0)
	h.waitIdle("main")
}
