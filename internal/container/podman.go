package container

// Podman's quirks, in one place. Podman serves Docker's Engine API, and the
// runtime drives it through the same client; where rootless Podman answers
// differently, this file says how bridged copes:
//   - Waiting with the "removed" condition returns exit code 0 (Podman
//     before 4.6): a run waits for "next-exit" and removes the container
//     itself before Wait returns.
//   - Resource limits the host cannot delegate to the user (cgroup v1, or
//     cgroup v2 without cpu, memory or pids delegated) are dropped without
//     an error: the created container is inspected, and a start whose limits
//     were dropped is refused with the reason.
//   - The nofile ulimit is ignored rootless (before 5.5): the runner lowers
//     its own RLIMIT_NOFILE (NoFileEnv), on every engine.
//   - A container that cannot be prepared fails the attach with "unable to
//     upgrade to tcp, received 409" and the cause only in the answer's
//     body: it is asked again and the body shown (attachCause).
//   - A bind mount's source that is missing when the container is created
//     is made an empty directory (as `docker run -v` would; 4.3 does it for
//     every bind mount), where Docker refuses the create of a mount: each
//     source is given to Podman as a link the daemon made to it
//     (linkSources), which Podman's mkdir leaves alone, so a source moved
//     away is refused on both engines.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/bridged-app/bridged/internal/ipc"
)

// Engine names the container engine behind the Engine API.
type Engine string

// The engines bridged runs agents on.
const (
	EngineDocker Engine = "docker"
	EnginePodman Engine = "podman"
)

// ParseEngine reads BRIDGED_ENGINE: docker, podman, kubernetes, or ""
// (found from what answers on the socket).
func ParseEngine(s string) (Engine, error) {
	switch e := Engine(strings.ToLower(strings.TrimSpace(s))); e {
	case "", EngineDocker, EnginePodman, EngineKubernetes:
		return e, nil
	}
	return "", fmt.Errorf("engine %q: want docker, podman or kubernetes", s)
}

// PodmanHost is the address of the user's rootless Podman service:
// $XDG_RUNTIME_DIR/podman/podman.sock (systemd's podman.socket), else
// /run/user/<uid>/podman/podman.sock.
func PodmanHost(getenv func(string) string) string {
	dir := getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = fmt.Sprintf("/run/user/%d", os.Geteuid())
	}
	return "unix://" + strings.TrimRight(dir, "/") + "/podman/podman.sock"
}

// NoFileEnv tells the runner its open-file limit (ipc.EnvNoFile).
const NoFileEnv = ipc.EnvNoFile

// IDMap maps Size ids from ContainerID in the container to HostID on the
// host.
type IDMap struct {
	ContainerID, HostID, Size int
}

// EngineInfo is what bridged asks of the engine once.
type EngineInfo struct {
	Engine  Engine
	Version string
	// Rootless: the engine runs as an unprivileged user, in a user
	// namespace (UIDMap, GIDMap).
	Rootless bool
	// UIDMap and GIDMap map container ids to host ids; empty: the same ids.
	UIDMap, GIDMap []IDMap
	// CgroupVersion ("v1", "v2") and the controllers the engine may use
	// (Podman only; empty for Docker).
	CgroupVersion     string
	CgroupControllers []string
}

// HostID is the host id of container id id through m (the same id when m is
// empty); false when m does not map it.
func HostID(m []IDMap, id int) (int, bool) {
	if len(m) == 0 {
		return id, true
	}
	for _, e := range m {
		if id >= e.ContainerID && id < e.ContainerID+e.Size {
			return e.HostID + id - e.ContainerID, true
		}
	}
	return 0, false
}

// ErrLimitsDropped is wrapped by the error Start returns when the engine
// created the container without a resource limit the spec asked for.
var ErrLimitsDropped = errors.New("the engine dropped resource limits")

// Info says which engine answers and how it maps ids; asked once, then
// remembered. With DockerOptions.Engine set, that engine is assumed.
func (d *Docker) Info(ctx context.Context) (EngineInfo, error) {
	d.infoMu.Lock()
	defer d.infoMu.Unlock()
	if d.info != nil {
		return *d.info, nil
	}
	cctx, cancel := d.call(ctx)
	defer cancel()
	v, err := d.cli.ServerVersion(cctx, client.ServerVersionOptions{})
	if err != nil {
		return EngineInfo{}, fmt.Errorf("ask the engine its version: %w", d.callErr(cctx, err))
	}
	info := EngineInfo{Engine: EngineDocker, Version: v.Version}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			info.Engine = EnginePodman
			info.Version = c.Version
		}
	}
	if d.opts.Engine != "" && d.opts.Engine != info.Engine {
		return EngineInfo{}, fmt.Errorf("BRIDGED_ENGINE is %s, but the engine at %s is %s %s", d.opts.Engine, d.cli.DaemonHost(), info.Engine, info.Version)
	}
	if info.Engine == EnginePodman {
		if err := d.podmanInfo(cctx, &info); err != nil {
			return EngineInfo{}, fmt.Errorf("ask Podman its set-up: %w", d.callErr(cctx, err))
		}
	}
	d.info = &info
	return info, nil
}

// engineHTTP is a plain HTTP client to the engine's socket, for the few
// answers the Docker client does not give (Podman's own info, an error's
// body).
func (d *Docker) engineHTTP() *http.Client {
	dial := d.cli.Dialer()
	return &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true,
	}}
}

// podmanInfo reads Podman's own info (libpod API): rootless or not, its id
// mappings, its cgroups.
func (d *Docker) podmanInfo(ctx context.Context, info *EngineInfo) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://engine/v4.0.0/libpod/info", nil)
	if err != nil {
		return err
	}
	resp, err := d.engineHTTP().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("libpod info: %s", resp.Status)
	}
	var body struct {
		Host struct {
			CgroupVersion     string   `json:"cgroupVersion"`
			CgroupControllers []string `json:"cgroupControllers"`
			IDMappings        struct {
				UIDMap []libpodIDMap `json:"uidmap"`
				GIDMap []libpodIDMap `json:"gidmap"`
			} `json:"idMappings"`
			Security struct {
				Rootless bool `json:"rootless"`
			} `json:"security"`
		} `json:"host"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return fmt.Errorf("libpod info: %w", err)
	}
	h := body.Host
	info.Rootless = h.Security.Rootless
	info.CgroupVersion = h.CgroupVersion
	info.CgroupControllers = h.CgroupControllers
	for _, m := range h.IDMappings.UIDMap {
		info.UIDMap = append(info.UIDMap, IDMap(m))
	}
	for _, m := range h.IDMappings.GIDMap {
		info.GIDMap = append(info.GIDMap, IDMap(m))
	}
	return nil
}

// libpodIDMap is one id mapping as Podman's info shows it.
type libpodIDMap struct {
	ContainerID int `json:"container_id"`
	HostID      int `json:"host_id"`
	Size        int `json:"size"`
}

// checkLimits compares the limits of the created container id with those
// asked for, and says which the engine dropped (wrapping ErrLimitsDropped).
// The nofile ulimit is not compared: the runner holds it (NoFileEnv).
func (d *Docker) checkLimits(ctx context.Context, id string, want Limits, info EngineInfo) error {
	if want.MemoryBytes <= 0 && want.CPUs <= 0 && want.Pids <= 0 {
		return nil
	}
	cctx, cancel := d.call(ctx)
	res, err := d.cli.ContainerInspect(cctx, id, client.ContainerInspectOptions{})
	err = d.callErr(cctx, err)
	cancel()
	if err != nil {
		return fmt.Errorf("confirm the limits: inspect: %w", err)
	}
	hc := res.Container.HostConfig
	if hc == nil {
		return errors.New("confirm the limits: the engine shows no host configuration")
	}
	var dropped []string
	if want.MemoryBytes > 0 && hc.Memory != want.MemoryBytes {
		dropped = append(dropped, fmt.Sprintf("memory (asked %d bytes, got %d)", want.MemoryBytes, hc.Memory))
	}
	if want.CPUs > 0 {
		got := float64(hc.NanoCPUs) / 1e9
		if hc.NanoCPUs == 0 && hc.CPUQuota > 0 && hc.CPUPeriod > 0 {
			got = float64(hc.CPUQuota) / float64(hc.CPUPeriod)
		}
		if math.Abs(got-want.CPUs) > 0.01 {
			dropped = append(dropped, fmt.Sprintf("cpus (asked %g, got %g)", want.CPUs, got))
		}
	}
	if want.Pids > 0 && (hc.PidsLimit == nil || *hc.PidsLimit != want.Pids) {
		got := int64(0)
		if hc.PidsLimit != nil {
			got = *hc.PidsLimit
		}
		dropped = append(dropped, fmt.Sprintf("pids (asked %d, got %d)", want.Pids, got))
	}
	if len(dropped) == 0 {
		return nil
	}
	why := info.LimitsProblem()
	if why == "" {
		why = "the engine did not apply them"
	}
	return fmt.Errorf("%w: %s: %s; the container was not started (fix the host, see `bridged doctor`, or set BRIDGED_CONTAINER_MEMORY, _CPUS and _PIDS to 0 to run agents without these limits)",
		ErrLimitsDropped, strings.Join(dropped, ", "), why)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// attachCause asks the engine to attach to id once more, without the
// upgrade, to read why it refused: the Docker client keeps only the status
// of a failed upgrade ("unable to upgrade to tcp, received 409"), while
// Podman says the cause in the body. It returns "" when no cause is found.
func (d *Docker) attachCause(ctx context.Context, id string) string {
	cctx, cancel := d.call(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, "http://engine/containers/"+id+"/attach?stream=0&stdout=1", nil)
	if err != nil {
		return ""
	}
	resp, err := d.engineHTTP().Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode < 400 {
		return ""
	}
	var body struct {
		Message string `json:"message"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &body) == nil && body.Message != "" {
		return body.Message
	}
	return strings.TrimSpace(string(data))
}

// LimitsProblem says why the engine cannot apply CPU, memory and pids
// limits ("" when it can, or cannot tell): rootless Podman needs cgroup v2
// with the cpu, memory and pids controllers delegated to its user.
func (i EngineInfo) LimitsProblem() string {
	if i.Engine != EnginePodman || !i.Rootless {
		return ""
	}
	if i.CgroupVersion != "v2" {
		return fmt.Sprintf("rootless Podman applies no limits on cgroup %s (it needs cgroup v2 with the cpu, memory and pids controllers delegated to its user)", i.CgroupVersion)
	}
	var missing []string
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !slices.Contains(i.CgroupControllers, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("cgroup v2 does not delegate %s to Podman's user (delegated: %s)", strings.Join(missing, ", "), orNone(i.CgroupControllers))
	}
	return ""
}

// linkSources returns mounts with each source given as a link to it, made
// in a new directory of its own under dir (the system's temporary directory
// when empty), and a function that removes that directory: the links, never
// what they point to. Podman's Docker API makes a bind source that is
// missing at the create an empty directory (MkdirAll), where Docker refuses
// the create: an agent that moved away a directory it may write, which
// another group mounts, at the moment that group's container was created
// would leave that group mounting a directory the engine made, and its own
// `mv` back would land inside it. Given a link whose target is missing,
// Podman's mkdir finds the link in its place and makes nothing, and its
// check of the source then refuses the create, as Docker's does. The engine
// follows the link to the path that was checked, and resolves the rest of
// it as it would have the path: a source swapped for another directory or
// a link is still caught after the start (verifyMounts). The directory is
// the daemon's to write; others may only pass through it (a rootless
// engine's user need not be the daemon's).
func linkSources(dir, name string, mounts []Mount) ([]Mount, func(), error) {
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("link the bind sources: %w", err)
	}
	d, err := os.MkdirTemp(dir, name+".")
	if err != nil {
		return nil, nil, fmt.Errorf("link the bind sources: %w", err)
	}
	unlink := func() { _ = os.RemoveAll(d) }
	if err := os.Chmod(d, 0o711); err != nil {
		unlink()
		return nil, nil, fmt.Errorf("link the bind sources: %w", err)
	}
	out := slices.Clone(mounts)
	for i, m := range out {
		link := filepath.Join(d, strconv.Itoa(i))
		if err := os.Symlink(m.Source, link); err != nil {
			unlink()
			return nil, nil, fmt.Errorf("link the bind source of %s: %w", m.Target, err)
		}
		out[i].Source = link
	}
	return out, unlink, nil
}

// sourceGone explains err, the engine's refusal to create or start the
// container of group, when a bind source was not the file that was checked:
// moved away or replaced since the check (an agent that may write the
// source's parent can do either at any moment). It is so when the source
// is not that file now, or when the engine says that the link it was given
// to the source (linked, on Podman) led nowhere: the source was away when
// the engine looked, even if it is back by now. The error then wraps
// ErrMountChanged, names the source and keeps the engine's own; else err is
// returned as it is.
func (d *Docker) sourceGone(group string, err error, mounts, linked []Mount) error {
	for i, m := range mounts {
		what := "was away when the engine looked"
		if fi, lerr := os.Lstat(m.Source); lerr != nil {
			what = "is gone"
		} else if FileIDOf(fi) != m.ID {
			what = "is another file now"
		} else if i >= len(linked) || !linkMissing(err.Error(), linked[i].Source) {
			continue
		}
		gone := fmt.Errorf("%w: the source %s of %s %s (moved or replaced after its check); the container was not started (the engine: %w)",
			ErrMountChanged, m.Source, m.Target, what, err)
		d.log.Error().Err(gone).Str("group", group).Msg("a bind-mount source is not the directory that was checked; the container was not started")
		return gone
	}
	return err
}

// linkMissing reports whether the engine's error msg says that link led
// nowhere (Podman's "statfs <link>: no such file or directory", or the
// runtime's failed mount of it), not that it could not be read.
func linkMissing(msg, link string) bool {
	return strings.Contains(msg, link) && strings.Contains(strings.ToLower(msg), "no such file or directory")
}
