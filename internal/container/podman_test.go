package container

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// Rootless Podman on a host that cannot delegate cgroups creates a container
// without the limits asked for and says nothing: Start sees it in the
// created container, removes it and refuses with the reason; nothing is
// attached or started. A spec without limits starts, waited for with
// "next-exit" (Podman's "removed" reports exit code 0).
func TestPodmanRefusesDroppedLimitsFake(t *testing.T) {
	f := startFakeEngine(t, "")
	f.podman = true
	d, err := NewDockerWith(zerolog.Nop(), DockerOptions{CallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	spec := Spec{Name: "bridged-limits-1", Image: "img", Group: "g", User: "1000:1000",
		Input:  ipc.RunInput{Prompt: "hi", Group: "g", Chat: "local:g", AssistantName: "Andy", Timezone: "UTC"},
		Limits: Limits{MemoryBytes: 512 << 20, CPUs: 1, Pids: 128}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = d.Start(ctx, spec)
	if !errors.Is(err, ErrLimitsDropped) {
		t.Fatalf("Start: %v; want ErrLimitsDropped", err)
	}
	for _, want := range []string{"memory (asked 536870912 bytes, got 0)", "cpus (asked 1, got 0)", "pids (asked 128, got 0)", "cgroup v1", "BRIDGED_CONTAINER_MEMORY"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q; want it to say %q", err, want)
		}
	}
	f.mu.Lock()
	removed, waits := f.removed, slices.Clone(f.waits)
	f.mu.Unlock()
	if removed != 1 || len(waits) != 0 {
		t.Errorf("%d removals, waits %q; want the created container removed, nothing waited for", removed, waits)
	}

	spec.Limits = Limits{}
	run, err := d.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start without limits: %v", err)
	}
	f.mu.Lock()
	waits = slices.Clone(f.waits)
	f.mu.Unlock()
	if !slices.Equal(waits, []string{"next-exit"}) {
		t.Errorf("wait conditions %q; want next-exit", waits)
	}
	_ = d.Stop(ctx, run.ID(), 0)
}

// The same on the real rootless Podman: where the host cannot delegate the
// controllers, a start with limits is refused with the reason and leaves
// nothing; where it can, the container has them.
func TestPodmanRefusesDroppedLimits(t *testing.T) {
	e := newEngine(t, EnginePodman)
	image := ensureEchoImage(t, e.d)
	spec, _ := echoSpec(t, image, "hello")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := e.d.Start(ctx, spec)
	problem := e.info.LimitsProblem()
	if problem == "" {
		if err != nil {
			t.Fatalf("Start on a host that delegates the controllers: %v", err)
		}
		for range run.Events() {
		}
		waitExit(t, run, 30*time.Second)
		return
	}
	if err == nil {
		e.d.Stop(ctx, run.ID(), 0)
		t.Fatalf("Start with limits the engine drops (%s) ran; want it refused", problem)
	}
	if !errors.Is(err, ErrLimitsDropped) || !strings.Contains(err.Error(), problem) {
		t.Errorf("Start: %v; want ErrLimitsDropped saying %q", err, problem)
	}
	t.Logf("refused: %v", err)
	list, err := e.d.ListManaged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.Name == spec.Name {
			t.Errorf("container %s left behind after the refused start", c.Name)
		}
	}
}

// A container the engine cannot prepare fails the attach: the Docker client
// says only "unable to upgrade to tcp, received 409", and Podman says why in
// the body, which Start reads and shows. The container is removed.
func TestPodmanAttachRefusalSaysWhy(t *testing.T) {
	f := startFakeEngine(t, "")
	f.podman = true
	f.refuseAttach = "preparing container for attach: failed to mount runtime directory for rootless netns: no such file or directory"
	d, err := NewDockerWith(zerolog.Nop(), DockerOptions{CallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	spec := Spec{Name: "bridged-attach-1", Image: "img", Group: "g", User: "1000:1000",
		Input: ipc.RunInput{Prompt: "hi", Group: "g", Chat: "local:g", AssistantName: "Andy", Timezone: "UTC"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = d.Start(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "received 409") || !strings.Contains(err.Error(), f.refuseAttach) {
		t.Fatalf("Start: %v; want the refused upgrade and Podman's reason", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removed != 1 {
		t.Errorf("%d removals; want the created container removed", f.removed)
	}
}

// BRIDGED_ENGINE takes docker, podman or nothing; the Podman socket is the
// user's runtime directory's; a rootless engine's ids map through its
// ranges, and an id outside them maps to nothing.
func TestEngineSettings(t *testing.T) {
	for in, want := range map[string]Engine{"": "", "docker": EngineDocker, " Podman ": EnginePodman} {
		if got, err := ParseEngine(in); err != nil || got != want {
			t.Errorf("ParseEngine(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseEngine("containerd"); err == nil {
		t.Error("ParseEngine(containerd): no error; want one")
	}
	env := map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000/"}
	if got := PodmanHost(func(k string) string { return env[k] }); got != "unix:///run/user/1000/podman/podman.sock" {
		t.Errorf("PodmanHost = %q", got)
	}
	m := []IDMap{{ContainerID: 0, HostID: 999, Size: 1}, {ContainerID: 1, HostID: 400000, Size: 65536}}
	for id, want := range map[int]int{0: 999, 1: 400000, 61001: 461000, 65536: 465535} {
		if got, ok := HostID(m, id); !ok || got != want {
			t.Errorf("HostID(%d) = %d, %v; want %d", id, got, ok, want)
		}
	}
	if _, ok := HostID(m, 65537); ok {
		t.Error("HostID(65537) mapped; want it outside the ranges")
	}
	if got, ok := HostID(nil, 61001); !ok || got != 61001 {
		t.Errorf("HostID without mappings = %d, %v; want the same id", got, ok)
	}
}
