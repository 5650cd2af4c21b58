package container

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
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
	// MaxEventLine bounds one stdout line; longer lines are dropped.
	MaxEventLine = 8 << 20
	// MaxStderrLine bounds one stderr line; longer lines are cut.
	MaxStderrLine = 16 << 10
	// ManagedValue is the value of the bridged.managed label.
	ManagedValue = "1"
	eventBuffer  = 64
	abandonAfter = time.Minute
	logPrefixLen = 80
)

// Credential variable names that must never appear in a container's
// configuration; the credentials travel only inside Spec.Input on stdin.
var secretEnvNames = []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"}

// ErrBadSpec is wrapped by the errors Start returns for a Spec it refuses.
var ErrBadSpec = errors.New("invalid container spec")

// Docker runs agent containers through the Docker Engine API.
type Docker struct {
	cli *client.Client
	log zerolog.Logger
}

var _ Runtime = (*Docker)(nil)

// NewDocker connects to the engine named by the environment (DOCKER_HOST
// etc., default the local socket). No request is made until the first call;
// the API version is negotiated then. Close releases the client.
func NewDocker(log zerolog.Logger) (*Docker, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &Docker{cli: cli, log: log.With().Str("component", "container").Logger()}, nil
}

// Client is the underlying Engine API client (for image tooling and tests).
func (d *Docker) Client() *client.Client { return d.cli }

// Close releases the client's connections.
func (d *Docker) Close() error { return d.cli.Close() }

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
	if _, err := d.cli.ImageInspect(ctx, ref); err != nil {
		if cerrdefs.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("inspect image %s: %w", ref, err)
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
	leaks := func(s string) bool {
		for _, v := range spec.Input.Secrets {
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

// createOptions builds the container's configuration. It holds no secret:
// spec.Input travels only on stdin.
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

	created, err := d.cli.ContainerCreate(ctx, createOptions(spec))
	if err != nil {
		return nil, fmt.Errorf("create container for %s: %w", spec.Group, err)
	}
	id := created.ID
	log := d.log.With().Str("group", spec.Group).Str("container", shortID(id)).Str("name", spec.Name).Logger()
	for _, w := range created.Warnings {
		log.Warn().Str("warning", w).Msg("container create warning")
	}

	// The run's own context: it outlives Start's ctx and ends when the run
	// has been observed to the end.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &dockerRun{
		id:     id,
		log:    log,
		stderr: spec.Stderr,
		events: make(chan ipc.Event, eventBuffer),
		exited: make(chan struct{}),
		output: make(chan struct{}),
		cancel: cancel,
	}
	cleanup := func(cause error) (Run, error) {
		cancel()
		rmCtx, rmCancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer rmCancel()
		if _, err := d.cli.ContainerRemove(rmCtx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
			log.Warn().Err(err).Msg("remove failed container")
		}
		return nil, fmt.Errorf("start container for %s: %w", spec.Group, cause)
	}

	// Wait before start: with AutoRemove a fast exit would otherwise race
	// the wait request ("No such container"). "removed" also means that when
	// Wait returns, nothing is left.
	wait := d.cli.ContainerWait(runCtx, id, client.ContainerWaitOptions{Condition: containertypes.WaitConditionRemoved})
	select {
	case err := <-wait.Error: // the request itself failed
		return cleanup(fmt.Errorf("wait: %w", err))
	default:
	}
	go r.watchExit(wait)

	att, err := d.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return cleanup(fmt.Errorf("attach: %w", err))
	}
	go r.readOutput(att.HijackedResponse)

	if _, err := d.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		att.Close()
		return cleanup(err)
	}
	if err := writeInput(ctx, att.HijackedResponse, input); err != nil {
		att.Close()
		return cleanup(fmt.Errorf("write input: %w", err))
	}
	log.Debug().Int("input_bytes", len(input)).Msg("container started")
	return r, nil
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
func (d *Docker) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := int(math.Ceil(grace.Seconds()))
	if secs < 0 {
		secs = 0
	}
	if _, err := d.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
		// Fall through to the forced removal, which kills it.
		d.log.Debug().Err(err).Str("container", shortID(id)).Msg("container stop failed")
	}
	return d.remove(ctx, id)
}

// remove force-removes id and waits until it is gone.
func (d *Docker) remove(ctx context.Context, id string) error {
	_, err := d.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		return nil
	case cerrdefs.IsConflict(err):
		// Auto-remove got there first: wait for it to finish.
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := d.cli.ContainerWait(wctx, id, client.ContainerWaitOptions{Condition: containertypes.WaitConditionRemoved})
		select {
		case <-w.Result:
			return nil
		case err := <-w.Error:
			if cerrdefs.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("remove container %s: %w", shortID(id), err)
		}
	default:
		return fmt.Errorf("remove container %s: %w", shortID(id), err)
	}
}

// ListManaged lists every container carrying the bridged.managed label, in
// any state.
func (d *Docker) ListManaged(ctx context.Context) ([]Info, error) {
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelManaged+"="+ManagedValue),
	})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
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
	id     string
	log    zerolog.Logger
	stderr func(string)
	events chan ipc.Event
	cancel context.CancelFunc

	exited chan struct{} // closed once exit is set
	exit   Exit
	output chan struct{} // closed when stdout and stderr have ended
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

func (r *dockerRun) watchExit(w client.ContainerWaitResult) {
	defer close(r.exited)
	select {
	case res := <-w.Result:
		r.exit = Exit{Code: int(res.StatusCode)}
		if res.Error != nil && res.Error.Message != "" {
			r.exit.Err = errors.New(res.Error.Message)
		}
	case err := <-w.Error:
		r.exit = Exit{Code: -1, Err: fmt.Errorf("wait for container: %w", err)}
	}
	r.log.Debug().Int("exit_code", r.exit.Code).AnErr("exit_error", r.exit.Err).Msg("container exited")
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
	// keeps its promise.
	<-r.exited
	r.cancel()
}

func (r *dockerRun) stdoutLine(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	ev, err := ipc.DecodeEvent(line)
	if err != nil {
		prefix := line
		if len(prefix) > logPrefixLen {
			prefix = prefix[:logPrefixLen]
		}
		r.log.Warn().Err(err).Bytes("prefix", prefix).Int("bytes", len(line)).Msg("undecodable container stdout line")
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
	}
}

func (r *dockerRun) stderrLine(line []byte) {
	if r.stderr == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Error().Interface("panic", p).Msg("stderr callback panicked")
		}
	}()
	r.stderr(string(line))
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
