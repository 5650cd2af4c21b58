package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/testimage"
)

// podman is the rootless Podman service the Podman end-to-end tests run
// the daemon on (.ci/podman.sh starts it), set up once per test binary.
var podman struct {
	once     sync.Once
	skip     string
	err      error
	host     string
	cli      *client.Client
	uid, gid int
	limits   string // why the engine applies no limits ("": it does)
}

// podmanReady is the Podman service, the test image imported into it; the
// test skips with the reason when none answers (fails under CI=true).
func podmanReady(t testing.TB) {
	t.Helper()
	podman.once.Do(func() {
		if os.Geteuid() != 0 && os.Getenv("CI") != "true" {
			podman.skip = "the daemon runs as the Podman service's user, which a test process that is not root cannot switch to"
			return
		}
		podman.host = testimage.PodmanHost()
		d, err := container.NewDockerWith(zerolog.Nop(), container.DockerOptions{Engine: container.EnginePodman, Host: podman.host})
		if err != nil {
			podman.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		podman.skip, podman.err = testimage.PodmanSkipReason(pctx, podman.host, d.Ping)
		pcancel()
		if podman.skip != "" || podman.err != nil {
			return
		}
		info, err := d.Info(ctx)
		if err != nil {
			podman.err = err
			return
		}
		podman.limits = info.LimitsProblem()
		u, err := user.Lookup(testimage.PodmanUser)
		if err != nil {
			podman.err = err
			return
		}
		podman.uid, _ = strconv.Atoi(u.Uid)
		podman.gid, _ = strconv.Atoi(u.Gid)
		root, err := testimage.FindRepoRoot()
		if err != nil {
			podman.err = err
			return
		}
		podman.cli = d.Client()
		podman.err = testimage.Ensure(ctx, podman.cli, testimage.Options{Tag: testImage, RepoRoot: root})
	})
	if podman.err != nil {
		t.Fatalf("rootless Podman: %v", podman.err)
	}
	if podman.skip != "" {
		t.Skip("SKIPPING Podman end-to-end test: " + podman.skip)
	}
}

// newPodmanEnv is newEnv on rootless Podman, as it is deployed: the daemon
// and the CLI run as the Podman service's user, which is in no docker
// group, with BRIDGED_ENGINE=podman and the service's socket. Where the
// host cannot delegate cgroup controllers to that user, the containers get
// no CPU, memory or pids limits (the daemon would refuse to start them:
// container.TestPodmanRefusesDroppedLimits).
func newPodmanEnv(t *testing.T, daemonArgs ...string) *env {
	return makePodmanEnv(t, daemonArgs)
}

// makePodmanEnv is newPodmanEnv for a test or a benchmark.
func makePodmanEnv(t testing.TB, daemonArgs []string) *env {
	t.Helper()
	if skipReason != "" {
		t.Skip("SKIPPING Podman end-to-end test: " + skipReason)
	}
	podmanReady(t)
	e := makeEnvAs(t, podman.uid, podman.gid, daemonArgs)
	e.cred.Groups = nil
	e.engine = podman.cli
	e.extraEnv = append(e.extraEnv, "BRIDGED_ENGINE=podman", "DOCKER_HOST="+podman.host,
		"XDG_RUNTIME_DIR=/run/user/"+strconv.Itoa(podman.uid))
	if podman.limits != "" {
		t.Logf("no container limits on this Podman: %s", podman.limits)
		e.extraEnv = append(e.extraEnv, "BRIDGED_CONTAINER_MEMORY=0", "BRIDGED_CONTAINER_CPUS=0", "BRIDGED_CONTAINER_PIDS=0")
	}
	return e
}

// groupUID is the uid the daemon of home gave folder's agent
// (data/group-uids.json).
func groupUID(t *testing.T, homeDir, folder string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(homeDir, "data", home.GroupUIDsName))
	if err != nil {
		t.Fatalf("group uids: %v", err)
	}
	var f struct {
		UIDs map[string]int `json:"uids"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("group uids: %v", err)
	}
	uid, ok := f.UIDs[folder]
	if !ok {
		t.Fatalf("group uids %s: no uid for %s", data, folder)
	}
	return uid
}
