package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
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
	e := podmanEnvWithLimits(t, daemonArgs)
	if podman.limits != "" {
		t.Logf("no container limits on this Podman: %s", podman.limits)
		e.extraEnv = append(e.extraEnv, "BRIDGED_CONTAINER_MEMORY=0", "BRIDGED_CONTAINER_CPUS=0", "BRIDGED_CONTAINER_PIDS=0")
	}
	return e
}

// podmanEnvWithLimits is makePodmanEnv with the default container limits
// kept, whether or not this Podman can apply them.
func podmanEnvWithLimits(t testing.TB, daemonArgs []string) *env {
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

// A limit this Podman would drop (rootless on a host that cannot delegate
// cgroup controllers to its user: cgroup v1 here) is refused when the
// group's container starts, and the owner is told why: the chat's failure
// notice names the dropped limits, `bridged status` has the whole reason
// (the cause and the settings that turn the limits off), and `bridged
// doctor` fails its cgroups check saying so. No container is left. Where
// the engine applies the limits, the agent answers.
func TestE2EPodmanRefusesDroppedLimits(t *testing.T) {
	parallel(t, light)
	e := podmanEnvWithLimits(t, []string{"--retry-base", "100ms", "--idle-timeout", "2s"})
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	id := e.post("local:main", "fake:reply limited")
	got := e.waitOut("local:main", id, 1, 3*time.Minute)[0].Text
	if podman.limits == "" {
		if got != "limited" {
			t.Errorf("on a Podman that applies the limits the agent answered %q; want %q", got, "limited")
		}
		d.stop(t)
		return
	}
	t.Logf("the owner's chat: %q", got)
	if got == "limited" {
		t.Fatalf("the agent answered on a Podman that drops the limits (%s); want the start refused", podman.limits)
	}
	for _, want := range []string{"could not answer", "the engine dropped resource limits: memory (asked"} {
		if !strings.Contains(got, want) {
			t.Errorf("the chat got %q; want a failure notice saying %q", got, want)
		}
	}
	// The whole reason, with its fix, is the failure's in `bridged status`.
	var st struct {
		Failures []struct{ Kind, Where, Error string } `json:"failures"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Failures) == 0 {
		t.Fatalf("bridged status --json shows no failure")
	}
	t.Logf("bridged status --json's failure: %+v", st.Failures[0])
	for _, want := range []string{"memory (asked 2147483648 bytes, got 0)", "pids (asked", podman.limits, "BRIDGED_CONTAINER_MEMORY"} {
		if f := st.Failures[0]; f.Kind != "run" || f.Where != "main" || !strings.Contains(f.Error, want) {
			t.Errorf("bridged status --json's failure %+v; want main's run failure saying %q", f, want)
		}
	}
	// `bridged doctor`, which the reason points to, fails the cgroups
	// check with the same cause and both fixes.
	doctor, _ := e.cli("doctor")
	var line string // the check and its hint, on the line after it
	lines := strings.Split(doctor, "\n")
	for i, l := range lines {
		if strings.Contains(l, "cgroups") && i+1 < len(lines) {
			line = l + " " + strings.TrimSpace(lines[i+1])
		}
	}
	t.Logf("bridged doctor: %s", line)
	for _, want := range []string{"FAIL", "every agent's start is refused", "cgroup v2", "BRIDGED_CONTAINER_MEMORY=0"} {
		if !strings.Contains(line, want) {
			t.Errorf("bridged doctor's cgroups check %q does not say %q:\n%s", line, want, doctor)
		}
	}
	d.stop(t)
}

// engineUsers are the daemon as each engine's is deployed: root on Docker
// (the test's own user when it is not root) and the Podman service's user
// on rootless Podman (newPodmanEnv, which skips saying why without it).
func engineUsers() []daemonUser {
	docker := daemonUser{name: "docker", env: newEnv}
	if os.Geteuid() != 0 {
		docker.uid, docker.gid = os.Geteuid(), os.Getegid()
	}
	return []daemonUser{docker, {name: "podman", uid: -1, rootless: true, env: newPodmanEnv}}
}

// onEngines runs test once per engine (engineUsers), each a subtest of
// its own.
func onEngines(t *testing.T, test func(t *testing.T, u daemonUser)) {
	for _, u := range engineUsers() {
		t.Run(u.name, func(t *testing.T) { test(t, u) })
	}
}
