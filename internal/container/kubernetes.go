package container

// The kubernetes engine (decision record 36): one Pod per group run, in one
// namespace, beside the daemon's own Pod. The same Runtime as Docker's:
// Start creates the Pod, waits until it runs, attaches to it (the attach
// subresource, SPDY) and writes the input to its stdin, then closes it; the
// stdout lines are the run's events. The hardening is the `restricted` Pod
// Security Standard: non-root with the group's uid and gid, every
// capability dropped, no privilege escalation, the RuntimeDefault seccomp
// profile, no service account token, CPU and memory limits, a memory-backed
// /tmp. The group's directories come from one PersistentVolumeClaim, the
// one the daemon's home is on, a sub-path per mount: a mount outside the
// home is refused. A Pod that is not running within the start timeout
// (unschedulable, its image not pulled) is deleted and the start fails with
// the reason the cluster gives.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/bridged-app/bridged/internal/ipc"
)

// EngineKubernetes runs agents as Pods on a cluster (BRIDGED_ENGINE).
const EngineKubernetes Engine = "kubernetes"

// Names in the Pods bridged makes.
const (
	// AgentContainer is the one container of an agent Pod.
	AgentContainer = "agent"
	// homeVolume is the Pod's volume of the home's claim.
	homeVolume = "home"
	// LabelNetwork is set to "none" on the Pods of groups without a
	// network: the NetworkPolicy of docs/kubernetes.md lets them reach
	// only the daemon's proxy.
	LabelNetwork = "bridged.network"
	// DefaultPodStartTimeout bounds how long a Pod may take to run.
	DefaultPodStartTimeout = 2 * time.Minute
)

// KubeProxy gives a Pod its way to the credential proxy across nodes: a
// per-run token the runner presents on each connection to the daemon's TCP
// address (credproxy.Proxy.OpenTCP).
type KubeProxy interface {
	// OpenTCP returns the token of the run name of group; closeFn forgets it.
	OpenTCP(group, name string) (token string, closeFn func(), err error)
	// Addr is host:port the Pods reach the proxy at.
	Addr() string
}

// KubeOptions configure the kubernetes engine.
type KubeOptions struct {
	// Namespace holds the agent Pods (the daemon's own).
	Namespace string
	// Claim is the PersistentVolumeClaim the daemon's home is on, mounted
	// at HomeDir in the daemon's Pod.
	Claim   string
	HomeDir string
	// Owner, when set, owns every agent Pod (the daemon's Pod): deleting
	// it deletes them.
	Owner *metav1.OwnerReference
	// Proxy, when set, replaces the proxy socket of a spec (which does not
	// cross nodes) by the proxy's TCP channel.
	Proxy KubeProxy
	// StartTimeout bounds how long a Pod may take to run (0:
	// DefaultPodStartTimeout); CallTimeout each API call (0:
	// DefaultCallTimeout).
	StartTimeout, CallTimeout time.Duration
	// attach opens the attach stream of a Pod; nil: the attach
	// subresource through the API server, over SPDY (tests point it at the
	// kubelet's own attach server code).
	attach func(pod string) (remotecommand.Executor, error)
}

// Kubernetes runs agents as Pods through the Kubernetes API.
type Kubernetes struct {
	pc   PodClient
	rc   *rest.Config
	log  zerolog.Logger
	opts KubeOptions

	closing context.Context
	close   context.CancelFunc
	mu      sync.Mutex
	closed  bool
	runs    sync.WaitGroup
}

var _ Runtime = (*Kubernetes)(nil)

// KubeConfig is the API server's configuration: the in-cluster one (the
// daemon's service account), else the kubeconfig at path (KUBECONFIG, or
// ~/.kube/config when path is empty).
func KubeConfig(path string) (*rest.Config, error) {
	if path == "" {
		if c, err := rest.InClusterConfig(); err == nil {
			return c, nil
		}
		path = os.Getenv("KUBECONFIG")
		if path == "" {
			if h, err := os.UserHomeDir(); err == nil {
				path = filepath.Join(h, ".kube", "config")
			}
		}
	}
	c, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: neither in a cluster nor a kubeconfig at %s: %w", path, err)
	}
	return c, nil
}

// InClusterNamespace is the namespace of the daemon's service account, ""
// outside a cluster.
func InClusterNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// NewKubernetes returns the engine over the Pods of opts.Namespace that pc
// reaches (tests: client-go's fake clientset); attaching needs rc, the
// same API server's configuration (nil: no attach, unless tests give one).
func NewKubernetes(log zerolog.Logger, pc PodClient, rc *rest.Config, opts KubeOptions) (*Kubernetes, error) {
	if opts.Namespace == "" {
		return nil, errors.New("kubernetes: no namespace")
	}
	if opts.Claim == "" || !filepath.IsAbs(opts.HomeDir) {
		return nil, errors.New("kubernetes: the home's claim and its mount path are needed")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultPodStartTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	closing, cancel := context.WithCancel(context.Background())
	k := &Kubernetes{pc: pc, rc: rc, log: log.With().Str("component", "container").Str("engine", "kubernetes").Logger(), opts: opts, closing: closing, close: cancel}
	if k.opts.attach == nil {
		k.opts.attach = k.apiAttach
	}
	return k, nil
}

// Ping checks that the API server answers and that the daemon may list Pods
// in its namespace.
func (k *Kubernetes) Ping(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, k.opts.CallTimeout)
	defer cancel()
	if _, err := k.pc.List(cctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("kubernetes: list Pods in %s: %w", k.opts.Namespace, err)
	}
	return nil
}

// KubeSelf reads the daemon's own Pod: its owner reference for the
// agents' Pods (deleting the daemon's Pod deletes them), and its IP.
func KubeSelf(ctx context.Context, pc PodClient, pod string) (*metav1.OwnerReference, string, error) {
	cctx, cancel := context.WithTimeout(ctx, DefaultCallTimeout)
	defer cancel()
	p, err := pc.Get(cctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes: the daemon's own Pod %s: %w", pod, err)
	}
	no := false
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, BlockOwnerDeletion: &no}, p.Status.PodIP, nil
}

// Close ends every run's goroutines and waits for them; Pods still running
// are left (the next start removes them as leftovers).
func (k *Kubernetes) Close() error {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.close()
	k.runs.Wait()
	return nil
}

func (k *Kubernetes) goRun(f func()) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return false
	}
	k.runs.Add(1)
	go func() {
		defer k.runs.Done()
		f()
	}()
	return true
}

func (k *Kubernetes) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, k.opts.CallTimeout)
}

func (k *Kubernetes) pods() PodClient { return k.pc }

// PodClient is what the engine asks of the API server: the Pods of one
// namespace (client-go's typed PodInterface has these methods; KubePods is
// one without the typed clientset, whose every API group would weigh on
// the binary).
type PodClient interface {
	Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

var dns1123 = regexp.MustCompile(`[^a-z0-9-]+`)

// PodName is a DNS-1123 name for the container name: name itself when it
// is one, else a cleaned form with a short hash of name.
func PodName(name string) string {
	clean := strings.Trim(dns1123.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if clean == name && len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	if len(clean) > 54 {
		clean = strings.TrimRight(clean[:54], "-")
	}
	return strings.TrimLeft(clean+"-"+hex.EncodeToString(sum[:4]), "-")
}

var labelValueRE = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

// labelValue is v when it is a valid label value, else a short hash of it
// (the exact value is in an annotation).
func labelValue(v string) string {
	if len(v) <= 63 && labelValueRE.MatchString(v) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:8])
}

// parseUser reads "uid:gid" (numeric on this engine: there is no passwd
// lookup for runAsUser).
func parseUser(user string) (uid, gid int64, err error) {
	u, g, ok := strings.Cut(user, ":")
	uid, uerr := strconv.ParseInt(u, 10, 64)
	gid, gerr := strconv.ParseInt(g, 10, 64)
	if !ok || uerr != nil || gerr != nil || uid <= 0 || gid < 0 {
		return 0, 0, fmt.Errorf("%w: user %q: the kubernetes engine needs a numeric non-root uid:gid", ErrBadSpec, user)
	}
	return uid, gid, nil
}

// PodFor is the Pod of spec: everything but its input, which travels only
// on the attach stream. It holds no secret (checkSpec refused any
// spec.Forbidden value before).
func (k *Kubernetes) PodFor(spec Spec) (*corev1.Pod, error) {
	uid, gid, err := parseUser(spec.User)
	if err != nil {
		return nil, err
	}
	home := filepath.Clean(k.opts.HomeDir)
	var mounts []corev1.VolumeMount
	for _, m := range spec.Mounts {
		rel, err := filepath.Rel(home, filepath.Clean(m.Source))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("%w: mount %s: its source %s is not in the home (%s): the kubernetes engine mounts only the home's claim", ErrBadSpec, m.Target, m.Source, home)
		}
		sub := rel
		if rel == "." {
			sub = ""
		}
		mounts = append(mounts, corev1.VolumeMount{Name: homeVolume, MountPath: m.Target, SubPath: sub, ReadOnly: m.ReadOnly})
	}
	mounts = append(mounts, corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"})

	lbl := map[string]string{}
	for key, v := range spec.Labels {
		lbl[key] = labelValue(v)
	}
	lbl[LabelManaged] = ManagedValue
	lbl[LabelGroup] = labelValue(spec.Group)
	lbl[LabelInstance] = labelValue(spec.Instance)
	if spec.Home != "" {
		lbl[LabelHome] = labelValue(spec.Home)
	}
	if spec.Network == "none" {
		lbl[LabelNetwork] = "none"
	}
	ann := map[string]string{LabelGroup: spec.Group, LabelInstance: spec.Instance, "bridged.name": spec.Name}

	env := []corev1.EnvVar{}
	hasHome := false
	for _, kv := range spec.Env {
		key, v, _ := strings.Cut(kv, "=")
		hasHome = hasHome || key == "HOME"
		env = append(env, corev1.EnvVar{Name: key, Value: v})
	}
	if !hasHome {
		env = append(env, corev1.EnvVar{Name: "HOME", Value: ContainerHome})
	}
	nofile := spec.Limits.NoFile
	if nofile <= 0 {
		nofile = DefaultNoFile
	}
	env = append(env, corev1.EnvVar{Name: NoFileEnv, Value: strconv.FormatInt(nofile, 10)})

	limits := corev1.ResourceList{}
	if spec.Limits.MemoryBytes > 0 {
		limits[corev1.ResourceMemory] = *resource.NewQuantity(spec.Limits.MemoryBytes, resource.BinarySI)
	}
	if spec.Limits.CPUs > 0 {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Round(spec.Limits.CPUs*1000)), resource.DecimalSI)
	}
	tmp := spec.Limits.TmpBytes
	if tmp <= 0 {
		tmp = DefaultTmpBytes
	}
	tmpSize := resource.NewQuantity(tmp, resource.BinarySI)

	yes, no := true, false
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        PodName(spec.Name),
			Namespace:   k.opts.Namespace,
			Labels:      lbl,
			Annotations: ann,
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &uid,
				RunAsGroup:     &gid,
				SeccompProfile: seccomp,
			},
			Containers: []corev1.Container{{
				Name:            AgentContainer,
				Image:           spec.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				WorkingDir:      ContainerGroupDir,
				Env:             env,
				Stdin:           true,
				StdinOnce:       true,
				TTY:             false,
				VolumeMounts:    mounts,
				Resources:       corev1.ResourceRequirements{Limits: limits, Requests: maps.Clone(limits)},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             &yes,
					RunAsUser:                &uid,
					RunAsGroup:               &gid,
					AllowPrivilegeEscalation: &no,
					Privileged:               &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           seccomp,
				},
			}},
			Volumes: []corev1.Volume{
				{Name: homeVolume, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: k.opts.Claim}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: tmpSize}}},
			},
		},
	}
	if k.opts.Owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*k.opts.Owner}
	}
	return pod, nil
}

// crossProxy replaces spec's proxy socket (a mount and its variable) by
// the proxy's TCP channel: the address in the environment, the run's
// token in its input only.
func (k *Kubernetes) crossProxy(spec *Spec) (release func(), err error) {
	release = func() {}
	i := slices.IndexFunc(spec.Mounts, func(m Mount) bool { return m.Target == ipc.ContainerProxyDir })
	if i < 0 {
		return release, nil
	}
	spec.Mounts = slices.Delete(slices.Clone(spec.Mounts), i, i+1)
	spec.Env = slices.DeleteFunc(slices.Clone(spec.Env), func(kv string) bool { return strings.HasPrefix(kv, ipc.EnvAPISocket+"=") })
	if k.opts.Proxy == nil {
		return release, nil
	}
	token, closeFn, err := k.opts.Proxy.OpenTCP(spec.Group, spec.Name)
	if err != nil {
		return nil, fmt.Errorf("open the credential proxy's channel: %w", err)
	}
	spec.Env = append(spec.Env, ipc.EnvAPIAddr+"="+k.opts.Proxy.Addr())
	spec.Input.ProxyToken = token
	return closeFn, nil
}

// Start creates the Pod, waits until it runs, attaches to it, writes the
// input and closes its stdin. On failure the Pod is deleted.
func (k *Kubernetes) Start(ctx context.Context, spec Spec) (Run, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	release, err := k.crossProxy(&spec)
	if err != nil {
		return nil, err
	}
	input, err := json.Marshal(spec.Input)
	if err != nil {
		release()
		return nil, fmt.Errorf("encode input for %s: %w", spec.Group, err)
	}
	input = append(input, '\n')
	pod, err := k.PodFor(spec)
	if err != nil {
		release()
		return nil, err
	}
	if k.closing.Err() != nil {
		release()
		return nil, fmt.Errorf("start Pod for %s: the kubernetes client is closed", spec.Group)
	}
	cctx, cancel := k.call(ctx)
	created, err := k.pods().Create(cctx, pod, metav1.CreateOptions{})
	cancel()
	if err != nil {
		release()
		return nil, fmt.Errorf("create Pod for %s: %w", spec.Group, err)
	}
	name := created.Name
	log := k.log.With().Str("group", spec.Group).Str("pod", name).Logger()
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	stopOnClose := context.AfterFunc(k.closing, cancelRun)
	r := &kubeRun{
		k: k, name: name, log: log, stderr: spec.Stderr, release: release,
		events: make(chan ipc.Event, eventBuffer), exited: make(chan struct{}), output: make(chan struct{}),
		lostDone: make(chan struct{}),
		cancel:   func() { stopOnClose(); cancelRun() },
	}
	fail := func(cause error) (Run, error) {
		r.cancel()
		release()
		cause = fmt.Errorf("start Pod for %s: %w", spec.Group, cause)
		if err := k.Stop(context.WithoutCancel(ctx), name, 0); err != nil {
			return nil, &NotStoppedError{ID: name, Err: fmt.Errorf("%w; then: %w", cause, err)}
		}
		return nil, cause
	}
	if err := k.waitRunning(ctx, name); err != nil {
		return fail(err)
	}
	exec, err := k.opts.attach(name)
	if err != nil {
		return fail(fmt.Errorf("attach: %w", err))
	}
	stdinR, stdinW := io.Pipe()
	stdout := &endWriter{w: &lineWriter{max: MaxEventLine, line: r.stdoutLine, long: func(n int) {
		log.Warn().Int("bytes", n).Msg("container stdout line too long, dropped")
	}}}
	stderr := &endWriter{w: &lineWriter{max: MaxStderrLine, cut: true, line: r.stderrLine}}
	streamDone := make(chan error, 1)
	if !k.goRun(func() {
		err := exec.StreamWithContext(runCtx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: stdout, Stderr: stderr})
		// The stream's copiers may outlive it (a cancelled stream):
		// nothing they write after this is handed on.
		stdout.end()
		stderr.end()
		streamDone <- err
	}) {
		return fail(errors.New("the kubernetes client is closed"))
	}
	ictx, icancel := k.call(ctx)
	werr := make(chan error, 1)
	go func() {
		_, err := stdinW.Write(input)
		if err == nil {
			err = stdinW.Close()
		}
		werr <- err
	}()
	select {
	case err = <-werr:
	case err = <-streamDone:
		if err == nil {
			err = errors.New("the attach stream ended before the input was read")
		}
	case <-ictx.Done():
		err = ictx.Err()
	}
	icancel()
	if err != nil {
		_ = stdinW.CloseWithError(err)
		return fail(fmt.Errorf("write input: %w", err))
	}
	if !k.goRun(func() { r.watch(runCtx, streamDone) }) {
		return fail(errors.New("the kubernetes client is closed"))
	}
	log.Debug().Int("input_bytes", len(input)).Msg("pod started")
	return r, nil
}

// apiAttach is the attach subresource of pod through the API server.
func (k *Kubernetes) apiAttach(pod string) (remotecommand.Executor, error) {
	if k.rc == nil {
		return nil, errors.New("no API server configuration to attach with")
	}
	rp, err := newRESTPods(k.rc, k.opts.Namespace)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewSPDYExecutor(k.rc, "POST", rp.attachURL(pod))
}

// watchPod calls done with the Pod (nil once it is gone) now and on every
// change, until done says so, ctx ends, or the API fails.
func (k *Kubernetes) watchPod(ctx context.Context, name string, done func(p *corev1.Pod) (bool, error)) error {
	for {
		w, err := k.pods().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			return fmt.Errorf("watch Pod %s: %w", name, err)
		}
		// The watch is open before the Pod is read: no change between
		// the two is missed.
		cctx, cancel := k.call(ctx)
		p, err := k.pods().Get(cctx, name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			p = nil
		case err != nil:
			w.Stop()
			return fmt.Errorf("get Pod %s: %w", name, err)
		}
		if ok, err := done(p); ok || err != nil {
			w.Stop()
			return err
		}
	events:
		for {
			var ev watch.Event
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					break events
				}
				ev = e
			case <-ctx.Done():
				w.Stop()
				return ctx.Err()
			}
			var p *corev1.Pod
			switch ev.Type {
			case watch.Deleted:
			case watch.Added, watch.Modified:
				var ok bool
				if p, ok = ev.Object.(*corev1.Pod); !ok {
					continue
				}
			default:
				continue
			}
			if p != nil && p.Name != name {
				continue
			}
			if ev.Type == watch.Deleted {
				if dp, ok := ev.Object.(*corev1.Pod); ok && dp.Name != name {
					continue
				}
			}
			if ok, err := done(p); ok || err != nil {
				w.Stop()
				return err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The server ended the watch (its timeout): open another.
	}
}

// ErrPodNotStarted is wrapped by the error of a start whose Pod did not run
// within the start timeout, or cannot.
var ErrPodNotStarted = errors.New("the Pod did not start")

// waitRunning waits until the Pod runs (or already ended: its output is
// then lost, and the start fails), at most the start timeout.
func (k *Kubernetes) waitRunning(ctx context.Context, name string) error {
	wctx, cancel := context.WithTimeout(ctx, k.opts.StartTimeout)
	defer cancel()
	why := "it is pending"
	err := k.watchPod(wctx, name, func(p *corev1.Pod) (bool, error) {
		if p == nil {
			return false, fmt.Errorf("%w: it was deleted", ErrPodNotStarted)
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
			return true, nil
		case corev1.PodSucceeded, corev1.PodFailed:
			return false, fmt.Errorf("%w: it ended before it was attached (%s)", ErrPodNotStarted, p.Status.Phase)
		}
		if reason := pendingReason(p); reason != "" {
			why = reason
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && slices.Contains([]string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError"}, w.Reason) {
				return false, fmt.Errorf("%w: %s: %s", ErrPodNotStarted, w.Reason, w.Message)
			}
		}
		return false, nil
	})
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("%w within %s: %s", ErrPodNotStarted, k.opts.StartTimeout, why)
	}
	return err
}

// pendingReason is what the scheduler or kubelet says of a pending Pod.
func pendingReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("not scheduled: %s: %s", c.Reason, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return w.Reason + ": " + w.Message
		}
	}
	return ""
}

// Stop deletes the Pod with grace and returns once it is gone.
func (k *Kubernetes) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := int64(math.Ceil(grace.Seconds()))
	if secs < 0 {
		secs = 0
	}
	cctx, cancel := k.call(ctx)
	err := k.pods().Delete(cctx, id, metav1.DeleteOptions{GracePeriodSeconds: &secs})
	cancel()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Pod %s: %w", id, err)
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+k.opts.CallTimeout)
	defer wcancel()
	if err := k.watchPod(wctx, id, func(p *corev1.Pod) (bool, error) { return p == nil, nil }); err != nil {
		return fmt.Errorf("the Pod %s is not gone: %w", id, err)
	}
	return nil
}

// ListManaged lists the Pods with the bridged.managed label.
func (k *Kubernetes) ListManaged(ctx context.Context) ([]Info, error) {
	cctx, cancel := k.call(ctx)
	defer cancel()
	list, err := k.pods().List(cctx, metav1.ListOptions{LabelSelector: labels.Set{LabelManaged: ManagedValue}.String()})
	if err != nil {
		return nil, fmt.Errorf("list Pods: %w", err)
	}
	out := make([]Info, 0, len(list.Items))
	for _, p := range list.Items {
		ann := func(key string) string {
			if v, ok := p.Annotations[key]; ok {
				return v
			}
			return p.Labels[key]
		}
		out = append(out, Info{
			ID: p.Name, Name: ann("bridged.name"), Group: ann(LabelGroup), Instance: ann(LabelInstance),
			Home: p.Labels[LabelHome], State: strings.ToLower(string(p.Status.Phase)),
		})
	}
	return out, nil
}

// endWriter is a lineWriter that the stream's copy goroutines write to
// until end, which flushes it; later writes are dropped.
type endWriter struct {
	mu    sync.Mutex
	w     *lineWriter
	ended bool
}

func (e *endWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return len(p), nil
	}
	return e.w.Write(p)
}

func (e *endWriter) end() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.ended {
		e.ended = true
		e.w.flush()
	}
}

// kubeRun is one started Pod.
type kubeRun struct {
	k       *Kubernetes
	name    string
	log     zerolog.Logger
	stderr  func(string)
	release func()
	events  chan ipc.Event
	cancel  context.CancelFunc

	exited     chan struct{}
	exit       Exit
	output     chan struct{}
	outputOnce sync.Once

	lostOnce sync.Once
	lost     atomic.Bool
	lostDone chan struct{}
	lostErr  error
}

func (r *kubeRun) ID() string               { return r.name }
func (r *kubeRun) Events() <-chan ipc.Event { return r.events }

// Wait returns once the Pod has ended and is deleted, and its output read.
func (r *kubeRun) Wait(ctx context.Context) (Exit, error) {
	for _, ch := range []chan struct{}{r.exited, r.output} {
		select {
		case <-ch:
		case <-ctx.Done():
			return Exit{}, ctx.Err()
		}
	}
	return r.exit, nil
}

// watch follows the Pod to its end: the exit code of a Pod that ended, or a
// lost one (its node gone, the Pod deleted under it, the attach stream
// dropped while it runs), which is deleted. Then the Pod is deleted and the
// run's proxy channel closed.
func (r *kubeRun) watch(ctx context.Context, streamDone <-chan error) {
	// The run's proxy channel is closed before Wait returns: once the
	// run has ended, its token opens nothing.
	defer close(r.exited)
	defer r.cancel()
	defer r.release()
	ended := make(chan Exit, 1)
	go func() {
		var exit Exit
		err := r.k.watchPod(ctx, r.name, func(p *corev1.Pod) (bool, error) {
			switch {
			case p == nil:
				exit = Exit{Code: -1, Err: r.loseErr(errors.New("the Pod was deleted while it ran (its node lost, or evicted)"))}
				return true, nil
			case p.Status.Phase == corev1.PodUnknown:
				exit = Exit{Code: -1, Err: r.loseErr(fmt.Errorf("the Pod's node does not answer (%s)", p.Status.Reason))}
				return true, nil
			case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
				exit = podExit(p)
				return true, nil
			}
			return false, nil
		})
		if err != nil {
			exit = Exit{Code: -1, Err: r.loseErr(fmt.Errorf("watch the Pod's end: %w", err))}
		}
		ended <- exit
	}()
	var exit Exit
	select {
	case exit = <-ended:
		r.drainStream(streamDone)
	case err := <-streamDone:
		r.closeOutput()
		// Every exit ends the stream; a stream can also end early. A
		// stream that broke (an error) under a Pod that still runs is lost
		// at once; one that ended cleanly gives the Pod's end a while.
		grace := outputGrace
		if err != nil && r.stillRuns() {
			grace = 0
		}
		t := time.NewTimer(grace)
		select {
		case exit = <-ended:
		case <-t.C:
			if err == nil {
				err = errors.New("the attach stream ended while the Pod kept running")
			}
			exit = Exit{Code: -1, Err: r.loseErr(fmt.Errorf("attach stream: %w", err))}
		}
		t.Stop()
	}
	if r.lost.Load() {
		<-r.lostDone
		exit.Err = r.lostErr
	} else if err := r.k.Stop(r.k.closing, r.name, 0); err != nil {
		r.log.Error().Err(err).Msg("cannot delete the ended Pod")
		exit.Err = &NotStoppedError{ID: r.name, Err: err}
	}
	r.exit = exit
	r.log.Debug().Int("exit_code", exit.Code).AnErr("exit_error", exit.Err).Msg("pod ended")
}

// stillRuns says whether the Pod is running (or cannot be told about).
func (r *kubeRun) stillRuns() bool {
	ctx, cancel := r.k.call(r.k.closing)
	defer cancel()
	p, err := r.k.pods().Get(ctx, r.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	return err != nil || p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending
}

// drainStream waits a while for the stream of an ended Pod to end, then
// closes the output.
func (r *kubeRun) drainStream(streamDone <-chan error) {
	t := time.NewTimer(outputGrace)
	defer t.Stop()
	select {
	case <-streamDone:
	case <-t.C:
		r.cancel() // ends the stream
		<-streamDone
	}
	r.closeOutput()
}

func (r *kubeRun) closeOutput() {
	r.outputOnce.Do(func() {
		close(r.events)
		close(r.output)
	})
}

// loseErr deletes the Pod of a lost run (once) and returns the error its
// exit carries: ErrLost, or a NotStoppedError.
func (r *kubeRun) loseErr(cause error) error {
	r.lostOnce.Do(func() {
		r.lost.Store(true)
		r.log.Warn().Err(cause).Msg("lost the Pod; deleting it")
		go func() {
			defer close(r.lostDone)
			err := fmt.Errorf("%w: %w", ErrLost, cause)
			if serr := r.k.Stop(r.k.closing, r.name, lostGrace); serr != nil {
				r.lostErr = &NotStoppedError{ID: r.name, Err: fmt.Errorf("%w; stop: %w", err, serr)}
				return
			}
			r.lostErr = fmt.Errorf("%w; the Pod was deleted", err)
		}()
	})
	return ErrLost
}

// podExit is the agent container's exit code.
func podExit(p *corev1.Pod) Exit {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == AgentContainer && cs.State.Terminated != nil {
			t := cs.State.Terminated
			exit := Exit{Code: int(t.ExitCode)}
			if t.Reason == "OOMKilled" {
				exit.Err = errors.New("OOMKilled")
			}
			return exit
		}
	}
	if p.Status.Phase == corev1.PodSucceeded {
		return Exit{}
	}
	return Exit{Code: -1, Err: fmt.Errorf("the Pod failed: %s %s", p.Status.Reason, p.Status.Message)}
}

func (r *kubeRun) stdoutLine(line []byte) {
	ev, ok := decodeLine(r.log, line)
	if !ok {
		return
	}
	select {
	case r.events <- ev:
	case <-r.k.closing.Done():
	}
}

func (r *kubeRun) stderrLine(line []byte) { deliverStderr(r.log, r.stderr, line) }
