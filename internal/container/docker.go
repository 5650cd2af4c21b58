package container

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	containertypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// Defaults of the Docker runtime.
const (
	// DefaultTmpBytes is the size of the /tmp tmpfs when Limits.TmpBytes is 0.
	DefaultTmpBytes = 256 << 20
	// DefaultNoFile is a container's open-file limit when Limits.NoFile is
	// 0: far above what claude and its tools use, far below what would let
	// one container hold the host's descriptors.
	DefaultNoFile = 4096
	// MaxEventLine bounds one stdout line; longer lines are dropped.
	MaxEventLine = 8 << 20
	// MaxStderrLine bounds one stderr line; longer lines are cut.
	MaxStderrLine = 16 << 10
	// ManagedValue is the value of the bridged.managed label.
	ManagedValue = "1"
	// DefaultCallTimeout bounds each Engine API call (see DockerOptions).
	DefaultCallTimeout = 30 * time.Second
	eventBuffer        = 64
	abandonAfter       = time.Minute
	logPrefixLen       = 80
	// outputGrace is how long a container may take to be observed gone
	// after its output ended before the runtime checks whether the
	// connection broke while the container kept running.
	outputGrace = 10 * time.Second
	// lostGrace is the SIGTERM grace of a container whose connection was
	// lost, before it is killed.
	lostGrace = 2 * time.Second
)

// Credential variable names that must never appear in a container's
// configuration: the credentials stay in the daemon's proxy.
var secretEnvNames = []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"}

// ErrBadSpec is wrapped by the errors Start returns for a Spec it refuses.
var ErrBadSpec = errors.New("invalid container spec")

// Docker runs agent containers through the Docker Engine API.
type Docker struct {
	cli  *client.Client
	log  zerolog.Logger
	opts DockerOptions

	// closing ends when Close is called: the goroutines of every run stop
	// reading, watching and stopping, and Close waits for them (runs).
	closing context.Context
	close   context.CancelFunc
	mu      sync.Mutex // guards closed against runs.Add
	closed  bool
	runs    sync.WaitGroup

	infoMu sync.Mutex // guards info
	info   *EngineInfo

	// euid is the daemon's effective uid: whether it may look into a
	// container of another uid through /proc (confirmByReport).
	euid int
}

var _ Runtime = (*Docker)(nil)

// DockerOptions tune the Docker runtime.
type DockerOptions struct {
	// CallTimeout bounds each Engine API call: create, attach, start,
	// inspect, stop (on top of its grace), remove, list, and waiting for a
	// removal. For the long-lived attach and wait streams it bounds their
	// establishment, not their life. A hung engine thus fails the call
	// instead of hanging its caller. 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// Engine is the engine expected behind the API (BRIDGED_ENGINE);
	// empty: whichever answers (see Info).
	Engine Engine
	// Host is the engine's address (unix:///…); empty: DOCKER_HOST, else
	// for EnginePodman the user's Podman socket (PodmanHost), else
	// Docker's socket.
	Host string
	// LinkDir is where Podman's bind sources are linked from (see
	// linkSources): a directory that only the daemon writes and the
	// engine can reach; empty: the system's temporary directory.
	LinkDir string
}

// NewDockerWith connects to the engine opts names (Host, else DOCKER_HOST
// etc., else the default socket of opts.Engine). No request is made until
// the first call; the API version is negotiated then. Close releases the
// client.
func NewDockerWith(log zerolog.Logger, opts DockerOptions) (*Docker, error) {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	copts := []client.Opt{client.FromEnv}
	host := opts.Host
	if host == "" && opts.Engine == EnginePodman && os.Getenv("DOCKER_HOST") == "" {
		host = PodmanHost(os.Getenv)
	}
	if host != "" {
		copts = append(copts, client.WithHost(host))
	}
	cli, err := client.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	closing, closeFn := context.WithCancel(context.Background())
	return &Docker{cli: cli, log: log.With().Str("component", "container").Logger(), opts: opts, closing: closing, close: closeFn, euid: os.Geteuid()}, nil
}

// call returns ctx bounded by the per-call deadline.
func (d *Docker) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.opts.CallTimeout)
}

// callErr names a per-call deadline that fired, so a hung engine is
// recognisable in logs, status and notices.
func (d *Docker) callErr(ctx context.Context, err error) error {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the Docker engine did not answer within %s: %w", d.opts.CallTimeout, err)
	}
	return err
}

// Client is the underlying Engine API client (for image tooling and tests).
func (d *Docker) Client() *client.Client { return d.cli }

// Close ends the goroutines of every run Start returned and waits for them,
// then releases the client's connections. A container still running is left
// running (a container outlives the daemon; the next start stops it as a
// leftover); its run's Wait reports it as not observed to its end. Start
// fails after Close.
func (d *Docker) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.close()
	d.runs.Wait()
	return d.cli.Close()
}

// goRun runs f on a goroutine that Close waits for. It reports false, and
// does not run f, once Close was called.
func (d *Docker) goRun(f func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.runs.Add(1)
	go func() {
		defer d.runs.Done()
		f()
	}()
	return true
}

// Ping checks that the engine answers. It blocks until it does, ctx ends, or
// the request fails.
func (d *Docker) Ping(ctx context.Context) error {
	if _, err := d.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("ping docker: %w", err)
	}
	return nil
}

// ImageExists reports whether the image ref is present in the engine.
func (d *Docker) ImageExists(ctx context.Context, ref string) (bool, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	if _, err := d.cli.ImageInspect(cctx, ref); err != nil {
		if cerrdefs.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("inspect image %s: %w", ref, d.callErr(cctx, err))
	}
	return true, nil
}

// checkSpec refuses specs that would run as root, leak a credential into the
// container's configuration, or cannot start.
func checkSpec(spec Spec) error {
	if spec.Image == "" {
		return fmt.Errorf("%w: no image", ErrBadSpec)
	}
	if spec.Group == "" {
		return fmt.Errorf("%w: no group", ErrBadSpec)
	}
	if err := checkUser(spec.User); err != nil {
		return err
	}
	if err := spec.Input.Validate(); err != nil {
		return fmt.Errorf("%w: input: %w", ErrBadSpec, err)
	}
	for _, m := range spec.Mounts {
		if !strings.HasPrefix(m.Source, "/") || !strings.HasPrefix(m.Target, "/") {
			return fmt.Errorf("%w: mount %s -> %s is not absolute", ErrBadSpec, m.Source, m.Target)
		}
	}
	if spec.Network != "" && spec.Network != "bridge" && spec.Network != "none" {
		return fmt.Errorf("%w: network %q: want bridge or none", ErrBadSpec, spec.Network)
	}
	input, err := json.Marshal(spec.Input)
	if err != nil {
		return fmt.Errorf("%w: input: %w", ErrBadSpec, err)
	}
	leaks := func(s string) bool {
		for _, v := range spec.Forbidden {
			if v != "" && strings.Contains(s, v) {
				return true
			}
		}
		return false
	}
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		for _, name := range secretEnvNames {
			if strings.EqualFold(k, name) {
				return fmt.Errorf("%w: credential %s must not be in the environment", ErrBadSpec, k)
			}
		}
		if leaks(v) {
			return fmt.Errorf("%w: environment variable %s holds a credential", ErrBadSpec, k)
		}
	}
	for k, v := range spec.Labels {
		if leaks(k) || leaks(v) {
			return fmt.Errorf("%w: label %s holds a credential", ErrBadSpec, k)
		}
	}
	if leaks(spec.Name) {
		return fmt.Errorf("%w: container name holds a credential", ErrBadSpec)
	}
	if leaks(string(input)) {
		return fmt.Errorf("%w: the run input holds a credential", ErrBadSpec)
	}
	for _, m := range spec.Mounts {
		if leaks(m.Source) || leaks(m.Target) {
			return fmt.Errorf("%w: mount %s holds a credential", ErrBadSpec, m.Target)
		}
	}
	return nil
}

func checkUser(user string) error {
	u, _, _ := strings.Cut(user, ":")
	switch {
	case u == "":
		return fmt.Errorf("%w: no user", ErrBadSpec)
	case u == "root":
		return fmt.Errorf("%w: the agent never runs as root", ErrBadSpec)
	}
	if n, err := strconv.Atoi(u); err == nil && n == 0 {
		return fmt.Errorf("%w: the agent never runs as root", ErrBadSpec)
	}
	return nil
}

// createOptions builds the container's configuration. It holds no secret
// (checkSpec refused any spec.Forbidden value); spec.Input travels only on
// stdin.
func createOptions(spec Spec) client.ContainerCreateOptions {
	labels := make(map[string]string, len(spec.Labels)+3)
	maps.Copy(labels, spec.Labels)
	labels[LabelManaged] = ManagedValue
	labels[LabelGroup] = spec.Group
	labels[LabelInstance] = spec.Instance
	if spec.Home != "" {
		labels[LabelHome] = spec.Home
	}

	env := slices.Clone(spec.Env)
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }) {
		env = append(env, "HOME="+ContainerHome)
	}
	nofile := spec.Limits.NoFile
	if nofile <= 0 {
		nofile = DefaultNoFile
	}
	// The runner holds the limit itself where the engine drops the ulimit.
	env = append(env, fmt.Sprintf("%s=%d", NoFileEnv, nofile))

	mounts := make([]mount.Mount, 0, len(spec.Mounts))
	for _, m := range spec.Mounts {
		mounts = append(mounts, mount.Mount{
			Type:     mount.TypeBind,
			Source:   m.Source,
			Target:   m.Target,
			ReadOnly: m.ReadOnly,
		})
	}

	tmp := spec.Limits.TmpBytes
	if tmp <= 0 {
		tmp = DefaultTmpBytes
	}
	res := containertypes.Resources{Memory: spec.Limits.MemoryBytes}
	if spec.Limits.CPUs > 0 {
		res.NanoCPUs = int64(math.Round(spec.Limits.CPUs * 1e9))
	}
	if spec.Limits.Pids > 0 {
		pids := spec.Limits.Pids
		res.PidsLimit = &pids
	}
	res.Ulimits = []*containertypes.Ulimit{{Name: "nofile", Soft: nofile, Hard: nofile}}
	useInit := true
	return client.ContainerCreateOptions{
		Name: spec.Name,
		Config: &containertypes.Config{
			Image:        spec.Image,
			User:         spec.User,
			WorkingDir:   ContainerGroupDir,
			Env:          env,
			Labels:       labels,
			OpenStdin:    true,
			StdinOnce:    true,
			AttachStdin:  true,
			AttachStdout: true,
			AttachStderr: true,
			Tty:          false,
		},
		HostConfig: &containertypes.HostConfig{
			Mounts:      mounts,
			AutoRemove:  true,
			Init:        &useInit,
			CapDrop:     []string{"ALL"},
			SecurityOpt: []string{"no-new-privileges"},
			Tmpfs:       map[string]string{"/tmp": fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,mode=1777", tmp)},
			Resources:   res,
			NetworkMode: containertypes.NetworkMode(spec.Network),
		},
	}
}

// Start creates the container, starts waiting for its removal, attaches to
// its streams, starts it, writes spec.Input as one JSON line to its stdin and
// closes stdin. It returns once the input is written; the container's life
// does not depend on ctx after that. On failure nothing is left behind.
func (d *Docker) Start(ctx context.Context, spec Spec) (Run, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	input, err := json.Marshal(spec.Input)
	if err != nil {
		return nil, fmt.Errorf("encode input for %s: %w", spec.Group, err)
	}
	input = append(input, '\n')
	mounts, err := mountIDs(spec.Mounts)
	if err != nil {
		return nil, err
	}

	if d.closing.Err() != nil {
		return nil, fmt.Errorf("start container for %s: the Docker client is closed", spec.Group)
	}
	info, err := d.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("start container for %s: %w", spec.Group, err)
	}
	cspec := spec
	var linked []Mount
	if info.Engine == EnginePodman {
		// Podman would make a missing source a directory of its own.
		var unlink func()
		if linked, unlink, err = linkSources(d.opts.LinkDir, spec.Name, mounts); err != nil {
			return nil, fmt.Errorf("start container for %s: %w", spec.Group, err)
		}
		defer unlink()
		cspec.Mounts = linked
	}
	// A daemon that may not look into the container through /proc asks
	// its runner for a report of the mounts (mountreport.go).
	byReport := len(mounts) > 0 && confirmByReport(d.euid, info, spec.User)
	if byReport {
		cspec.Env = append(slices.Clone(cspec.Env), mountsEnv(mounts))
	}
	cctx, cancel := d.call(ctx)
	created, err := d.cli.ContainerCreate(cctx, createOptions(cspec))
	err = d.callErr(cctx, err)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("create container for %s: %w", spec.Group, d.sourceGone(spec.Group, err, mounts, linked))
	}
	id := created.ID
	log := d.log.With().Str("group", spec.Group).Str("container", shortID(id)).Str("name", spec.Name).Logger()
	for _, w := range created.Warnings {
		log.Warn().Str("warning", w).Msg("container create warning")
	}

	// The run's own context: it outlives Start's ctx and ends when the run
	// has been observed to the end, or the client is closed.
	runCtx, cancelCtx := context.WithCancel(context.WithoutCancel(ctx))
	stopOnClose := context.AfterFunc(d.closing, cancelCtx)
	cancel = func() {
		stopOnClose()
		cancelCtx()
	}
	if info.Engine == EnginePodman {
		if err := d.checkLimits(ctx, id, spec.Limits, info); err != nil {
			if rerr := d.remove(context.WithoutCancel(ctx), id); rerr != nil {
				return nil, &NotStoppedError{ID: id, Err: fmt.Errorf("start container for %s: %w; then: %w", spec.Group, err, rerr)}
			}
			return nil, fmt.Errorf("start container for %s: %w", spec.Group, err)
		}
	}
	r := &dockerRun{
		d:            d,
		removeOnExit: info.Engine == EnginePodman,
		lostDone:     make(chan struct{}),
		id:           id,
		log:          log,
		stderr:       spec.Stderr,
		events:       make(chan ipc.Event, eventBuffer),
		exited:       make(chan struct{}),
		output:       make(chan struct{}),
		cancel:       cancel,
	}
	if byReport {
		r.report = make(chan []byte, 1)
	}
	cleanup := func(cause error) (Run, error) {
		cancel()
		cause = fmt.Errorf("start container for %s: %w", spec.Group, cause)
		// The container may have started (a start whose answer was lost):
		// it must be gone before anything starts in its place.
		if err := d.remove(context.WithoutCancel(ctx), id); err != nil {
			log.Warn().Err(err).Msg("remove failed container")
			return nil, &NotStoppedError{ID: id, Err: fmt.Errorf("%w; then: %w", cause, err)}
		}
		return nil, cause
	}

	// Wait before start: with AutoRemove a fast exit would otherwise race
	// the wait request ("No such container"). "removed" also means that when
	// Wait returns, nothing is left. The request returns once the engine
	// has answered its headers: the call deadline bounds that, and only
	// that, since the stream itself lives as long as the container.
	wctx, wcancel := context.WithCancel(runCtx)
	timer := time.AfterFunc(d.opts.CallTimeout, wcancel)
	// Podman's "removed" reports exit code 0 (before 4.6): it is waited
	// for its next exit and removed by the run (watchExit).
	cond := containertypes.WaitConditionRemoved
	if r.removeOnExit {
		cond = containertypes.WaitConditionNextExit
	}
	wait := d.cli.ContainerWait(wctx, id, client.ContainerWaitOptions{Condition: cond})
	if !timer.Stop() {
		wcancel()
		return cleanup(fmt.Errorf("wait: the Docker engine did not answer within %s", d.opts.CallTimeout))
	}
	select {
	case err := <-wait.Error: // the request itself failed
		wcancel()
		return cleanup(fmt.Errorf("wait: %w", err))
	default:
	}
	if !d.goRun(func() {
		defer wcancel()
		r.watchExit(runCtx, wait)
	}) {
		wcancel()
		return cleanup(errors.New("the Docker client is closed"))
	}

	actx, acancel := d.call(ctx)
	att, err := d.cli.ContainerAttach(actx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	err = d.callErr(actx, err)
	acancel()
	if err != nil {
		if cause := d.attachCause(ctx, id); cause != "" {
			err = fmt.Errorf("%w: %s", err, cause)
		}
		// Podman prepares the container, its mounts too, at the attach.
		return cleanup(d.sourceGone(spec.Group, fmt.Errorf("attach: %w", err), mounts, linked))
	}
	// Closing the client (or giving up on the start) ends the output
	// stream, which the reader would otherwise wait on for as long as
	// the container runs.
	context.AfterFunc(runCtx, att.Close)
	if !d.goRun(func() { r.readOutput(att.HijackedResponse) }) {
		return cleanup(errors.New("the Docker client is closed"))
	}

	sctx, scancel := d.call(ctx)
	_, err = d.cli.ContainerStart(sctx, id, client.ContainerStartOptions{})
	err = d.callErr(sctx, err)
	scancel()
	if err != nil {
		att.Close()
		return cleanup(d.sourceGone(spec.Group, err, mounts, linked))
	}
	// The engine resolved the mount sources just now: nothing runs in the
	// container before its input, so a mount that is not what was checked
	// is caught before the agent could use it.
	if byReport {
		if err = r.confirmReport(ctx, mounts, d.opts.CallTimeout); err == nil {
			log.Debug().Int("mounts", len(mounts)).Msg("bind mounts confirmed from the runner's report")
		}
	} else {
		err = d.verifyMounts(ctx, id, mounts)
	}
	if err != nil {
		if errors.Is(err, ErrMountChanged) {
			log.Error().Err(err).Msg("a bind mount of the started container is not the directory that was checked (its source was swapped before the engine mounted it); stopping the container before its input")
		} else {
			log.Error().Err(err).Msg("cannot confirm the started container's bind mounts; stopping the container before its input")
		}
		att.Close()
		return cleanup(err)
	}
	ictx, icancel := d.call(ctx)
	defer icancel()
	if err := writeInput(ictx, att.HijackedResponse, input); err != nil {
		att.Close()
		return cleanup(fmt.Errorf("write input: %w", err))
	}
	log.Debug().Int("input_bytes", len(input)).Msg("container started")
	return r, nil
}

// mountIDs returns a copy of mounts in which every mount has the ID of its
// source: those without one (a spec not built by SpecBuilder) take it now,
// from the source itself, which must not be a symlink.
func mountIDs(mounts []Mount) ([]Mount, error) {
	out := slices.Clone(mounts)
	for i, m := range out {
		if !m.ID.IsZero() {
			continue
		}
		fi, err := os.Lstat(m.Source)
		if err != nil {
			return nil, fmt.Errorf("%w: mount %s: %w", ErrBadSpec, m.Target, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("%w: mount %s: its source %s is a symlink", ErrBadSpec, m.Target, m.Source)
		}
		out[i].ID = FileIDOf(fi)
	}
	return out, nil
}

// verifyMounts confirms that each bind mount of the running container id is
// the file (device and inode) its source was when it was checked. The
// engine resolves a source when it starts the container, after the check,
// and follows a link it finds there: a source swapped in between would
// otherwise go unnoticed (`docker inspect` still shows the path asked for).
// Each mount is looked at from the host through the container's root,
// /proc/<pid>/root/<target>, which the daemon may read as root, as the
// user of a rootless engine (it owns the container's user namespace) and
// as the containers' own user; a daemon that is none of these confirms
// them from the runner's report instead (confirmByReport). An error wraps
// ErrMountChanged when a mount is another file; any other error means the
// mounts could not be confirmed.
func (d *Docker) verifyMounts(ctx context.Context, id string, mounts []Mount) error {
	if len(mounts) == 0 {
		return nil
	}
	cctx, cancel := d.call(ctx)
	res, err := d.cli.ContainerInspect(cctx, id, client.ContainerInspectOptions{})
	err = d.callErr(cctx, err)
	cancel()
	if err != nil {
		return fmt.Errorf("confirm the bind mounts: inspect: %w", err)
	}
	st := res.Container.State
	if st == nil || !st.Running || st.Pid <= 0 {
		return errors.New("confirm the bind mounts: the container is not running")
	}
	root := fmt.Sprintf("/proc/%d/root", st.Pid)
	for _, m := range mounts {
		fi, err := os.Lstat(root + m.Target)
		if err != nil {
			return fmt.Errorf("confirm the bind mount at %s: %w", m.Target, err)
		}
		if err := mountMismatch(m, FileIDOf(fi)); err != nil {
			return err
		}
	}
	return nil
}

// mountMismatch is the error of a container whose mount at m.Target is
// got, when got is not the source checked before the create (nil when it
// is), whichever way got was found: /proc (verifyMounts) or the runner's
// report (checkReport).
func mountMismatch(m Mount, got FileID) error {
	if got == m.ID {
		return nil
	}
	return fmt.Errorf("%w: the container's %s is %s, but its source %s was %s when checked", ErrMountChanged, m.Target, got, m.Source, m.ID)
}

// writeInput writes the input and half-closes the connection: EOF on the
// container's stdin, while its stdout and stderr keep flowing.
func writeInput(ctx context.Context, h client.HijackedResponse, input []byte) error {
	stop := context.AfterFunc(ctx, func() { _ = h.Conn.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := h.Conn.Write(input); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	if err := h.CloseWrite(); err != nil {
		return fmt.Errorf("close stdin: %w", err)
	}
	return nil
}

// Stop asks the container to stop (SIGTERM, SIGKILL after grace, rounded up
// to whole seconds) and then removes it. A container that is already gone,
// or is being removed, is not an error; Stop returns once it is gone or ctx
// ends.
// Each Engine API call has its own deadline (the stop's is its grace plus
// the call timeout).
func (d *Docker) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := int(math.Ceil(grace.Seconds()))
	if secs < 0 {
		secs = 0
	}
	sctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+d.opts.CallTimeout)
	_, err := d.cli.ContainerStop(sctx, id, client.ContainerStopOptions{Timeout: &secs})
	err = d.callErr(sctx, err)
	cancel()
	if err != nil && !cerrdefs.IsNotFound(err) {
		// Fall through to the forced removal, which kills it.
		d.log.Debug().Err(err).Str("container", shortID(id)).Msg("container stop failed")
	}
	return d.remove(ctx, id)
}

// remove force-removes id and waits until it is gone; each call has the
// call deadline.
func (d *Docker) remove(ctx context.Context, id string) error {
	err := d.forceRemove(ctx, id)
	switch {
	case err == nil:
		return nil
	case stoppedMeanwhile(err):
		// Podman: the container stopped between its check and its kill;
		// stopped now, it is removed without one (below).
	case cerrdefs.IsConflict(err):
		// Auto-remove got there first: wait for it to finish.
		wctx, cancel := d.call(ctx)
		defer cancel()
		w := d.cli.ContainerWait(wctx, id, client.ContainerWaitOptions{Condition: containertypes.WaitConditionRemoved})
		select {
		case <-w.Result:
		case err := <-w.Error:
			if cerrdefs.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("remove container %s: %w", shortID(id), d.callErr(wctx, err))
		}
		// Podman's "removed" wait returns at once before 4.6: remove
		// again (on Docker the container is gone by now: not found).
	default:
		return fmt.Errorf("remove container %s: %w", shortID(id), err)
	}
	if err := d.forceRemove(ctx, id); err != nil {
		return fmt.Errorf("remove container %s: %w", shortID(id), err)
	}
	return nil
}

// forceRemove asks the engine once to remove id, running or not: nil
// when it is removed or was not there.
func (d *Docker) forceRemove(ctx context.Context, id string) error {
	rctx, cancel := d.call(ctx)
	defer cancel()
	_, err := d.cli.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true})
	if err = d.callErr(rctx, err); err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// ListManaged lists every container carrying the bridged.managed label, in
// any state.
func (d *Docker) ListManaged(ctx context.Context) ([]Info, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.cli.ContainerList(cctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelManaged+"="+ManagedValue),
	})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", d.callErr(cctx, err))
	}
	out := make([]Info, 0, len(res.Items))
	for _, c := range res.Items {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Info{
			ID:       c.ID,
			Name:     name,
			Group:    c.Labels[LabelGroup],
			Instance: c.Labels[LabelInstance],
			Home:     c.Labels[LabelHome],
			State:    string(c.State),
		})
	}
	return out, nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// dockerRun is one started container. Its two goroutines (exit watcher and
// output reader) end when the container is gone; the reader blocks while
// Events is full, so the owner must drain Events.
type dockerRun struct {
	d      *Docker
	id     string
	log    zerolog.Logger
	stderr func(string)
	events chan ipc.Event
	cancel context.CancelFunc

	// removeOnExit: the run waits for the container's exit, not its
	// removal, and removes it itself (Podman).
	removeOnExit bool

	exited chan struct{} // closed once exit is set
	exit   Exit
	output chan struct{} // closed when stdout and stderr have ended

	// A lost connection (see lose): lostDone is closed once the container
	// has been stopped, or could not be; lostErr (set before) says which.
	lostOnce  sync.Once
	lost      atomic.Bool
	lostDone  chan struct{}
	lostErr   error
	lostCause error

	// report, when set, takes the container's first stdout line: its
	// runner's mount report (mountreport.go). reportTaken is the output
	// reader's own.
	report      chan []byte
	reportTaken bool
}

func (r *dockerRun) ID() string { return r.id }

// Events yields each decoded stdout line and is closed when stdout ends.
// Lines that are not events are logged and skipped.
func (r *dockerRun) Events() <-chan ipc.Event { return r.events }

// Wait blocks until the container has exited and been removed and its output
// has been read to the end (Events closed, every stderr line delivered), or
// ctx ends. An exit the engine failed to report comes back as Exit.Err with
// code -1; the error is only ctx's.
func (r *dockerRun) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-r.exited:
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
	select {
	case <-r.output:
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
	return r.exit, nil
}

// watchExit sets the exit once the container is gone. When the wait
// stream breaks while the container may still run, it is stopped first
// (lose), so that when Wait returns nothing of the run is left.
func (r *dockerRun) watchExit(ctx context.Context, w client.ContainerWaitResult) {
	defer close(r.exited)
	exit := Exit{Code: -1}
	exited := false
	select {
	case res := <-w.Result:
		exited = true
		exit = Exit{Code: int(res.StatusCode)}
		if res.Error != nil && res.Error.Message != "" {
			exit.Err = errors.New(res.Error.Message)
		}
	case err := <-w.Error:
		if ctx.Err() != nil { // Start gave up on the container
			exit.Err = fmt.Errorf("wait for container: %w", err)
			break
		}
		r.lose(fmt.Errorf("wait for the container's end: %w", err))
	case <-r.lostDone:
	}
	if r.lost.Load() {
		<-r.lostDone
		exit.Err = r.lostErr
	} else if r.removeOnExit && exited {
		// Gone before Wait returns, as the "removed" condition promises.
		if err := r.d.remove(r.d.closing, r.id); err != nil {
			r.log.Error().Err(err).Msg("cannot remove the exited container")
			exit.Err = &NotStoppedError{ID: r.id, Err: err}
		}
	}
	r.exit = exit
	r.log.Debug().Int("exit_code", r.exit.Code).AnErr("exit_error", r.exit.Err).Msg("container exited")
}

// lose handles a broken connection to a container that may still run: its
// output can no longer be read, or its end no longer observed, and a retry
// must not start a second container of the group beside it. The container
// is stopped and removed, each call with its own deadline; the exit then
// wraps ErrLost, or is a *NotStoppedError when the engine could not stop it.
func (r *dockerRun) lose(cause error) {
	r.lostOnce.Do(func() {
		r.lostCause = cause
		r.lost.Store(true)
		r.log.Warn().Err(cause).Msg("lost the engine connection to a running container; stopping it")
		stop := func() {
			defer close(r.lostDone)
			err := fmt.Errorf("%w: %w", ErrLost, cause)
			if serr := r.d.Stop(r.d.closing, r.id, lostGrace); serr != nil {
				r.log.Error().Err(serr).Msg("cannot stop the container whose connection was lost")
				r.lostErr = &NotStoppedError{ID: r.id, Err: fmt.Errorf("%w; stop: %w", err, serr)}
				return
			}
			r.lostErr = fmt.Errorf("%w; the container was stopped", err)
		}
		if !r.d.goRun(stop) {
			stop() // Close is waiting for this run's goroutines: its context has ended
		}
	})
}

// checkAfterOutput runs when the output ended and the container was not
// seen gone within outputGrace: a container that still runs (or that the
// engine cannot tell about) lost its connection and is stopped. It returns
// true when it gave up on the container (lose), false to keep waiting.
func (r *dockerRun) checkAfterOutput() bool {
	ctx, cancel := r.d.call(r.d.closing)
	defer cancel()
	res, err := r.d.cli.ContainerInspect(ctx, r.id, client.ContainerInspectOptions{})
	switch {
	case err != nil:
		r.lose(fmt.Errorf("output ended; inspect: %w", r.d.callErr(ctx, err)))
		return true
	case res.Container.State == nil, res.Container.State.Running, res.Container.State.Paused, res.Container.State.Restarting:
		r.lose(errors.New("the container's output ended while it kept running"))
		return true
	}
	return false // exited or being removed: its end is on its way
}

func (r *dockerRun) readOutput(h client.HijackedResponse) {
	defer close(r.output)
	defer close(r.events)
	defer h.Close()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error().Interface("panic", p).Msg("container output reader panicked")
		}
	}()
	stdout := &lineWriter{max: MaxEventLine, line: r.stdoutLine, long: func(n int) {
		if r.takeReport(nil) {
			return
		}
		r.log.Warn().Int("bytes", n).Msg("container stdout line too long, dropped")
	}}
	stderr := &lineWriter{max: MaxStderrLine, cut: true, line: r.stderrLine}
	if _, err := stdcopy.StdCopy(stdout, stderr, h.Reader); err != nil {
		r.log.Debug().Err(err).Msg("container output ended with an error")
	}
	stdout.flush()
	stderr.flush()
	// Every exit ends the streams, but a stream can also end early (a
	// broken connection): only stop once the container is gone, so Wait
	// keeps its promise. A container still running after the stream ended
	// is stopped.
	t := time.NewTimer(outputGrace)
	defer t.Stop()
wait:
	for {
		select {
		case <-r.exited:
			break wait
		case <-r.lostDone:
			break wait
		case <-t.C:
			if r.checkAfterOutput() {
				break wait
			}
			t.Reset(outputGrace)
		}
	}
	<-r.exited
	r.cancel()
}

func (r *dockerRun) stdoutLine(line []byte) {
	if r.takeReport(line) {
		return
	}
	ev, ok := decodeLine(r.log, line)
	if !ok {
		return
	}
	select {
	case r.events <- ev:
		return
	case <-r.exited:
	}
	// The container is gone: give a slow reader a while, then stop waiting
	// for one that left.
	t := time.NewTimer(abandonAfter)
	defer t.Stop()
	select {
	case r.events <- ev:
	case <-t.C:
		r.log.Warn().Str("type", string(ev.Type)).Msg("container event dropped, nobody reads events")
	case <-r.d.closing.Done():
	}
}

func (r *dockerRun) stderrLine(line []byte) { deliverStderr(r.log, r.stderr, line) }

// decodeLine decodes one stdout line of a container's agent runner: a blank
// line or one that is no event is skipped (the latter logged, by its
// start).
func decodeLine(log zerolog.Logger, line []byte) (ipc.Event, bool) {
	if len(bytes.TrimSpace(line)) == 0 {
		return ipc.Event{}, false
	}
	ev, err := ipc.DecodeEvent(line)
	if err != nil {
		prefix := line[:min(len(line), logPrefixLen)]
		log.Warn().Err(err).Bytes("prefix", prefix).Int("bytes", len(line)).Msg("undecodable container stdout line")
		return ipc.Event{}, false
	}
	return ev, true
}

// deliverStderr hands one stderr line of a container to fn (nil: nobody
// listens); a panic in fn is logged, never the run's end.
func deliverStderr(log zerolog.Logger, fn func(string), line []byte) {
	if fn == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			log.Error().Interface("panic", p).Msg("stderr callback panicked")
		}
	}()
	fn(string(line))
}

// lineWriter splits a byte stream into lines (without the newline) and hands
// each to line. A line longer than max is either cut to max (cut) or dropped
// with a call to long.
type lineWriter struct {
	max  int
	cut  bool
	line func([]byte)
	long func(n int)

	buf     []byte
	over    bool // the current line passed max
	overLen int
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		w.add(chunk)
		if i < 0 {
			break
		}
		w.end()
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) add(b []byte) {
	if w.over {
		w.overLen += len(b)
		return
	}
	if len(w.buf)+len(b) > w.max {
		room := w.max - len(w.buf)
		w.buf = append(w.buf, b[:room]...)
		w.over = true
		w.overLen = len(w.buf) + len(b) - room
		return
	}
	w.buf = append(w.buf, b...)
}

func (w *lineWriter) end() {
	switch {
	case w.over && !w.cut:
		if w.long != nil {
			w.long(w.overLen)
		}
	default:
		w.line(w.buf)
	}
	w.buf = w.buf[:0]
	w.over = false
	w.overLen = 0
}

// flush hands over a last line that had no newline.
func (w *lineWriter) flush() {
	if len(w.buf) > 0 || w.over {
		w.end()
	}
}

// stoppedMeanwhile says whether a forced remove failed because the
// container stopped on its own while the engine was killing it: Podman
// answers that with a server error ("container state improper: stopped")
// where Docker removes the container.
func stoppedMeanwhile(err error) bool {
	return err != nil && strings.Contains(err.Error(), "container state improper")
}
