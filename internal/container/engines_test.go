package container

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/testimage"
	"github.com/bridged-app/bridged/internal/testlog"
)

// testEngine is one engine the integration tests run against: Docker, or
// rootless Podman (the service .ci/podman.sh starts).
type testEngine struct {
	name Engine
	d    *Docker
	logs *testlog.Buffer
	info EngineInfo
	opts DockerOptions
}

// forEngines runs f as a subtest on Docker and on rootless Podman, side by
// side. An engine that does not answer skips its subtest with the reason
// (fails it under CI=true).
func forEngines(t *testing.T, f func(t *testing.T, e *testEngine)) {
	for _, name := range []Engine{EngineDocker, EnginePodman} {
		t.Run(string(name), func(t *testing.T) {
			t.Parallel()
			f(t, newEngine(t, name))
		})
	}
}

func newEngine(t *testing.T, name Engine) *testEngine {
	t.Helper()
	if name == EngineDocker {
		d, logs := newDocker(t)
		return &testEngine{name: name, d: d, logs: logs, info: engineInfo(t, d)}
	}
	host := testimage.PodmanHost()
	opts := DockerOptions{Engine: EnginePodman, Host: host}
	logs := &testlog.Buffer{}
	d, err := NewDockerWith(zerolog.New(logs).Level(zerolog.DebugLevel), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	skip, err := testimage.PodmanSkipReason(ctx, host, d.Ping)
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip("SKIPPING Podman test: " + skip)
	}
	return &testEngine{name: name, d: d, logs: logs, info: engineInfo(t, d), opts: opts}
}

func engineInfo(t *testing.T, d *Docker) EngineInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := d.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// open is a second runtime on the same engine.
func (e *testEngine) open(t *testing.T) *Docker {
	t.Helper()
	d, err := NewDockerWith(zerolog.Nop(), e.opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// hostUser is the host uid and gid of the test containers' user (testUser).
func (e *testEngine) hostUser(t *testing.T) (int, int) {
	t.Helper()
	uid, gid := testUser()
	hu, uok := HostID(e.info.UIDMap, uid)
	hg, gok := HostID(e.info.GIDMap, gid)
	if !uok || !gok {
		t.Fatalf("the engine maps no host id to %d:%d (%+v)", uid, gid, e.info)
	}
	return hu, hg
}

// limits is l where the engine applies limits; on a host where it cannot
// (rootless Podman without delegated cgroup controllers, which refuses such
// a start: TestPodmanRefusesDroppedLimits) none are asked.
func (e *testEngine) limits(t *testing.T, l Limits) Limits {
	if why := e.info.LimitsProblem(); why != "" {
		t.Logf("no resource limits on this engine: %s", why)
		return Limits{NoFile: l.NoFile, TmpBytes: l.TmpBytes}
	}
	return l
}

// newHome is newHome, which the engine can mount from (share).
func (e *testEngine) newHome(t *testing.T) *home.Home {
	t.Helper()
	h := newHome(t)
	e.share(t, h.Layout().Dir)
	return h
}

// share lets a rootless engine's user through every directory in dir and
// through dir's parent: such an engine resolves the bind mounts' sources as
// its own user, which in a real rootless set-up is the daemon's, the owner of
// the home. Call it again after making directories.
func (e *testEngine) share(t *testing.T, dir string) {
	t.Helper()
	if !e.info.Rootless || os.Geteuid() != 0 {
		return
	}
	err := filepath.Walk(filepath.Dir(dir), func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.IsDir() {
			return err
		}
		return os.Chmod(p, fi.Mode().Perm()|0o001)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// echoSpec is echoSpec with the limits the engine applies (limits).
func (e *testEngine) echoSpec(t *testing.T, image, prompt string) (Spec, *stderrLines) {
	spec, se := echoSpec(t, image, prompt)
	spec.Limits = e.limits(t, spec.Limits)
	return spec, se
}
