package container

// The kubernetes engine against client-go's fake clientset (the API
// server: Pods created, listed by label, deleted, their status changed by
// a fake kubelet here) and the kubelet's own attach server code
// (k8s.io/cri-streaming's ServeAttach in an httptest server, reached with
// client-go's SPDY executor, as the API server's attach proxy is). The
// agent in the Pod is in-process: it reads its input on stdin to EOF and
// answers on stdout. No cluster runs here: what a real kubelet, scheduler
// and network add is the manual smoke test of docs/kubernetes.md.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/remotecommand"
	criattach "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/testlog"
)

const kubeNS = "bridged"

// restrictedProblem is why pod does not pass the restricted Pod Security
// Standard ("" when it does).
func restrictedProblem(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := policy.AggregateCheckResults(ev.EvaluatePod(psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}, &pod.ObjectMeta, &pod.Spec))
	if res.Allowed {
		return ""
	}
	return res.ForbiddenReason() + ": " + res.ForbiddenDetail()
}

// kubelet is the fake cluster: the fake API server, a kubelet that runs
// each created Pod's agent in-process behind the real attach server code,
// and an admission that refuses a Pod failing `restricted`, as a namespace
// labelled pod-security.kubernetes.io/enforce=restricted does.
type kubelet struct {
	t   *testing.T
	cs  *fake.Clientset
	srv *httptest.Server

	mu sync.Mutex
	// unschedulable: created Pods stay pending with the scheduler's reason.
	unschedulable bool
	pods          map[string]*podAgent
	// handler answers the agent's requests (the proxy test).
	agent func(ctx context.Context, pod *corev1.Pod, in ipc.RunInput, out, errw io.Writer) int
}

// podAgent is one Pod's in-process agent.
type podAgent struct {
	pod      *corev1.Pod
	gone     chan struct{} // closed when the Pod is deleted
	goneOnce sync.Once
	attached chan struct{}
	drop     chan struct{} // closed to cut the attach stream
}

func newKubelet(t *testing.T) *kubelet {
	t.Helper()
	k := &kubelet{t: t, cs: fake.NewClientset(), pods: map[string]*podAgent{}}
	k.agent = echoInProcess
	k.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if why := restrictedProblem(t, pod); why != "" {
			t.Errorf("Pod %s fails restricted: %s", pod.Name, why)
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, pod.Name, errors.New("violates PodSecurity restricted:latest: "+why))
		}
		k.mu.Lock()
		k.pods[pod.Name] = &podAgent{pod: pod.DeepCopy(), gone: make(chan struct{}), attached: make(chan struct{}), drop: make(chan struct{})}
		unsched := k.unschedulable
		k.mu.Unlock()
		if unsched {
			// Pending with the scheduler's reason from the first look, so
			// a short start timeout on a loaded machine still sees it.
			pod.Status = unschedulableStatus()
		}
		return false, nil, nil
	})
	k.cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.DeleteAction).GetName()
		k.mu.Lock()
		if pa := k.pods[name]; pa != nil {
			pa.goneOnce.Do(func() { close(pa.gone) })
		}
		k.mu.Unlock()
		return false, nil, nil
	})
	// The kubelet: a created Pod is scheduled and runs (or stays pending).
	w, err := k.cs.CoreV1().Pods(kubeNS).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != "ADDED" {
				continue
			}
			k.mu.Lock()
			unsched := k.unschedulable
			k.mu.Unlock()
			if unsched {
				continue // pending since its create (unschedulableStatus)
			}
			k.setStatus(pod.Name, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodRunning
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: AgentContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			})
		}
	}()
	k.srv = httptest.NewServer(http.HandlerFunc(k.serveAttach))
	t.Cleanup(k.srv.Close)
	return k
}

// unschedulableStatus is a Pod's status when no node can take it.
func unschedulableStatus() corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient memory."}}}
}

// setStatus changes the Pod's status as the kubelet reports it.
func (k *kubelet) setStatus(name string, f func(*corev1.PodStatus)) {
	ctx := context.Background()
	pod, err := k.cs.CoreV1().Pods(kubeNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return // deleted meanwhile
	}
	f(&pod.Status)
	_, _ = k.cs.CoreV1().Pods(kubeNS).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

func (k *kubelet) agentOf(name string) *podAgent {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pods[name]
}

// serveAttach is the kubelet's attach endpoint, /attach/<pod>, served by
// the kubelet's own code.
func (k *kubelet) serveAttach(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/attach/")
	opts, err := criattach.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	criattach.ServeAttach(w, r, attacher{k}, name, "", AgentContainer, opts, time.Minute, 30*time.Second, criattach.SupportedStreamingProtocols)
}

type attacher struct{ k *kubelet }

// AttachContainer runs the Pod's agent on the stream: its stdin to EOF,
// then its answer; its exit is reported as the Pod's end.
func (a attacher) AttachContainer(ctx context.Context, name, _, _ string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan criattach.TerminalSize) error {
	pa := a.k.agentOf(name)
	if pa == nil {
		return fmt.Errorf("no Pod %s", name)
	}
	close(pa.attached)
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	input, err := ipc.DecodeRunInput(data)
	if err != nil {
		return err
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-pa.gone:
		case <-actx.Done():
		}
		cancel()
	}()
	dropped := make(chan struct{})
	go func() {
		select {
		case <-pa.drop:
			close(dropped)
			cancel()
		case <-actx.Done():
		}
	}()
	code := a.k.agent(actx, pa.pod, input, out, errw)
	select {
	case <-dropped:
		return errors.New("connection reset by peer")
	default:
	}
	select {
	case <-pa.gone: // killed
		return nil
	default:
	}
	a.k.setStatus(name, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodSucceeded
		if code != 0 {
			s.Phase = corev1.PodFailed
		}
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: AgentContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code)}}}}
	})
	return nil
}

// echoInProcess is the echo agent's script, in-process: "stderr X",
// "result X" (a result event now), "hold" or "sleep D" (until killed),
// "exit N".
func echoInProcess(ctx context.Context, _ *corev1.Pod, in ipc.RunInput, out, errw io.Writer) int {
	emit := func(ev ipc.Event) {
		b, _ := json.Marshal(ev)
		_, _ = out.Write(append(b, '\n'))
	}
	emit(ipc.Event{Type: ipc.EventSession, SessionID: "echo-session"})
	fmt.Fprintf(errw, "input: group=%s\n", in.Group)
	for line := range strings.SplitSeq(in.Prompt, "\n") {
		verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch verb {
		case "stderr":
			fmt.Fprintln(errw, arg)
		case "result":
			emit(ipc.Event{Type: ipc.EventResult, Text: arg, SessionID: "echo-session"})
		case "hold", "sleep":
			<-ctx.Done()
			return 137
		case "exit":
			n, _ := strconv.Atoi(arg)
			return n
		}
	}
	emit(ipc.Event{Type: ipc.EventResult, Text: "echo: " + in.Prompt, SessionID: "echo-session"})
	return 0
}

// engine is a kubernetes runtime on k, attaching through the kubelet's
// attach server with the SPDY executor.
func (k *kubelet) engine(t *testing.T, mod func(*KubeOptions)) (*Kubernetes, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	opts := KubeOptions{Namespace: kubeNS, Claim: "bridged-home", HomeDir: "/var/lib/bridged", StartTimeout: 10 * time.Second, CallTimeout: 5 * time.Second}
	opts.attach = func(pod string) (remotecommand.Executor, error) {
		u, err := url.Parse(k.srv.URL + "/attach/" + pod + "?input=1&output=1&error=1")
		if err != nil {
			return nil, err
		}
		return remotecommand.NewSPDYExecutor(&rest.Config{Host: k.srv.URL}, "POST", u)
	}
	if mod != nil {
		mod(&opts)
	}
	e, err := NewKubernetes(zerolog.New(logs).Level(zerolog.DebugLevel), k.cs.CoreV1().Pods(kubeNS), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, logs
}

func kubeSpec(name, prompt string) (Spec, *stderrLines) {
	se := &stderrLines{}
	return Spec{
		Name: name, Image: "bridged-agent:test", Group: "family", Instance: "inst-1", Home: HomeLabel("/var/lib/bridged"),
		User:   "61001:61001",
		Mounts: []Mount{{Source: "/var/lib/bridged/groups/family", Target: ContainerGroupDir, ID: FileID{Dev: 1, Ino: 1}}},
		Env:    []string{"TZ=UTC"},
		Input:  ipc.RunInput{Prompt: prompt, Group: "family", Chat: "local:family", AssistantName: "Andy", Timezone: "UTC"},
		Limits: Limits{MemoryBytes: 512 << 20, CPUs: 1, Pids: 256},
		Stderr: se.add,
	}, se
}

func podGone(t *testing.T, k *kubelet, name string) {
	t.Helper()
	if _, err := k.cs.CoreV1().Pods(kubeNS).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Pod %s is still there (%v); want it deleted", name, err)
	}
}

// A turn: the input over the attach stream (stdin, then EOF), the agent's
// session and result events, its stderr, exit 0, the Pod deleted.
func TestKubernetesTurn(t *testing.T) {
	k := newKubelet(t)
	e, _ := k.engine(t, nil)
	spec, stderr := kubeSpec("bridged-family-1", "stderr hello from stderr\nhi")
	run := start(t, e, spec)
	var events []ipc.Event
	for {
		ev, ok := nextEvent(t, run, 10*time.Second)
		if !ok {
			break
		}
		events = append(events, ev)
	}
	exit := waitExit(t, run, 10*time.Second)
	if exit.Code != 0 || exit.Err != nil {
		t.Errorf("exit %+v; want 0", exit)
	}
	if len(events) != 2 || events[0].Type != ipc.EventSession || events[1].Text != "echo: "+spec.Input.Prompt {
		t.Errorf("events %+v; want the session, then the echo (the whole input arrived, then EOF)", events)
	}
	if got := stderr.all(); !contains(got, "hello from stderr") || !contains(got, "input: group=family") {
		t.Errorf("stderr %q", got)
	}
	podGone(t, k, run.ID())
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// A failing agent's exit code is the run's.
func TestKubernetesExitCode(t *testing.T) {
	k := newKubelet(t)
	e, _ := k.engine(t, nil)
	spec, _ := kubeSpec("bridged-family-2", "exit 3")
	run := start(t, e, spec)
	for range run.Events() {
	}
	if exit := waitExit(t, run, 10*time.Second); exit.Code != 3 {
		t.Errorf("exit %+v; want code 3", exit)
	}
	podGone(t, k, run.ID())
}

// Stop deletes a running Pod and returns once it is gone; the run ends.
func TestKubernetesStop(t *testing.T) {
	k := newKubelet(t)
	e, _ := k.engine(t, nil)
	spec, _ := kubeSpec("bridged-family-3", "hold")
	run := start(t, e, spec)
	if ev, _ := nextEvent(t, run, 10*time.Second); ev.Type != ipc.EventSession {
		t.Fatalf("first event %+v; want session", ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Stop(ctx, run.ID(), time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	podGone(t, k, run.ID())
	for range run.Events() {
	}
	exit := waitExit(t, run, 10*time.Second)
	if exit.Err == nil {
		t.Errorf("exit %+v; want an error (the Pod was deleted under the run)", exit)
	}
	if err := e.Stop(ctx, run.ID(), time.Second); err != nil {
		t.Errorf("stop of a gone Pod: %v; want nil", err)
	}
}

// A Pod that never schedules fails the start within the start timeout,
// with the scheduler's reason, and is deleted.
func TestKubernetesUnschedulable(t *testing.T) {
	k := newKubelet(t)
	k.unschedulable = true
	e, _ := k.engine(t, func(o *KubeOptions) { o.StartTimeout = 300 * time.Millisecond })
	spec, _ := kubeSpec("bridged-family-4", "hi")
	_, err := e.Start(context.Background(), spec)
	if !errors.Is(err, ErrPodNotStarted) || !strings.Contains(err.Error(), "Insufficient memory") {
		t.Fatalf("start: %v; want ErrPodNotStarted with the scheduler's reason", err)
	}
	podGone(t, k, PodName(spec.Name))
}

// A node lost mid-turn: the Pod's phase turns Unknown; the run is lost,
// the Pod deleted, and what was read before is delivered once.
func TestKubernetesNodeLost(t *testing.T) {
	for _, how := range []string{"unknown", "deleted"} {
		t.Run(how, func(t *testing.T) {
			k := newKubelet(t)
			e, _ := k.engine(t, nil)
			spec, _ := kubeSpec("bridged-family-5", "result first\nhold")
			run := start(t, e, spec)
			if ev, _ := nextEvent(t, run, 10*time.Second); ev.Type != ipc.EventSession {
				t.Fatalf("first event %+v", ev)
			}
			if ev, _ := nextEvent(t, run, 10*time.Second); ev.Text != "first" {
				t.Fatalf("second event %+v; want the result", ev)
			}
			if how == "unknown" {
				k.setStatus(run.ID(), func(s *corev1.PodStatus) { s.Phase = corev1.PodUnknown; s.Reason = "NodeLost" })
			} else {
				_ = k.cs.CoreV1().Pods(kubeNS).Delete(context.Background(), run.ID(), metav1.DeleteOptions{})
			}
			var after []ipc.Event
			for ev := range run.Events() {
				after = append(after, ev)
			}
			exit := waitExit(t, run, 20*time.Second)
			if !errors.Is(exit.Err, ErrLost) {
				t.Errorf("exit %+v; want ErrLost", exit)
			}
			if len(after) != 0 {
				t.Errorf("events after the loss %+v; want none", after)
			}
			podGone(t, k, run.ID())
		})
	}
}

// The attach stream drops after the agent's result while the Pod keeps
// running: the result is delivered exactly once, the run is lost (its Pod
// deleted, so a retry never runs beside it) and nothing comes twice.
func TestKubernetesDroppedStream(t *testing.T) {
	k := newKubelet(t)
	e, _ := k.engine(t, nil)
	spec, _ := kubeSpec("bridged-family-6", "result once\nhold")
	run := start(t, e, spec)
	var results []string
	for ev := range run.Events() {
		if ev.Type == ipc.EventResult {
			results = append(results, ev.Text)
			close(k.agentOf(run.ID()).drop)
		}
	}
	exit := waitExit(t, run, 20*time.Second)
	if !errors.Is(exit.Err, ErrLost) {
		t.Errorf("exit %+v; want ErrLost", exit)
	}
	if len(results) != 1 || results[0] != "once" {
		t.Errorf("results %q; want [once]", results)
	}
	podGone(t, k, run.ID())
}

// Orphans: at start the daemon removes by label the Pods of its home that
// other instances left, and no other home's.
func TestKubernetesOrphanSweep(t *testing.T) {
	k := newKubelet(t)
	e, _ := k.engine(t, nil)
	mk := func(name, instance, home string) {
		spec, _ := kubeSpec(name, "")
		spec.Instance, spec.Home = instance, home
		pod, err := e.PodFor(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.cs.CoreV1().Pods(kubeNS).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mine := HomeLabel("/var/lib/bridged")
	mk("bridged-family-old", "inst-0", mine)
	mk("bridged-main-old", "inst-0", mine)
	mk("bridged-other-home", "inst-9", HomeLabel("/srv/other"))
	list, err := e.ListManaged(context.Background())
	if err != nil || len(list) != 3 {
		t.Fatalf("ListManaged %+v, %v; want 3 Pods", list, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	StopLeftovers(ctx, e, "/var/lib/bridged", "inst-1", zerolog.Nop())
	podGone(t, k, "bridged-family-old")
	podGone(t, k, "bridged-main-old")
	if _, err := k.cs.CoreV1().Pods(kubeNS).Get(ctx, "bridged-other-home", metav1.GetOptions{}); err != nil {
		t.Errorf("another home's Pod: %v; want it left alone", err)
	}
}

// Every Pod spec bridged makes passes the restricted Pod Security
// Standard, and carries the hardening and the labels asked for.
func TestKubernetesPodRestricted(t *testing.T) {
	k := newKubelet(t)
	owner := &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "bridged-0", UID: "uid-1"}
	e, _ := k.engine(t, func(o *KubeOptions) { o.Owner = owner })
	cases := map[string]func(*Spec){
		"plain":      func(*Spec) {},
		"no limits":  func(s *Spec) { s.Limits = Limits{} },
		"no network": func(s *Spec) { s.Network = "none" },
		"main": func(s *Spec) {
			s.Group = "main"
			s.Mounts = append(s.Mounts, Mount{Source: "/var/lib/bridged/groups", Target: "/workspace/groups", ReadOnly: true})
		},
		"odd name":    func(s *Spec) { s.Name = "bridged_Family.Ünï-" + strings.Repeat("x", 80) },
		"extra label": func(s *Spec) { s.Labels = map[string]string{"bridged.test": "a value with spaces"} },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			spec, _ := kubeSpec("bridged-family-7", "hi")
			mod(&spec)
			pod, err := e.PodFor(spec)
			if err != nil {
				t.Fatal(err)
			}
			if why := restrictedProblem(t, pod); why != "" {
				t.Fatalf("fails restricted: %s", why)
			}
			c := pod.Spec.Containers[0]
			sc := c.SecurityContext
			if *sc.RunAsUser != 61001 || *sc.RunAsGroup != 61001 || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("security context %+v", sc)
			}
			if *pod.Spec.AutomountServiceAccountToken {
				t.Error("the service account token is mounted")
			}
			if !c.Stdin || !c.StdinOnce || c.TTY {
				t.Errorf("stdin %v once %v tty %v; want stdin once, no tty", c.Stdin, c.StdinOnce, c.TTY)
			}
			if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != "uid-1" {
				t.Errorf("owner %+v", pod.OwnerReferences)
			}
			if pod.Labels[LabelManaged] != ManagedValue || pod.Annotations[LabelGroup] != spec.Group {
				t.Errorf("labels %v annotations %v", pod.Labels, pod.Annotations)
			}
			if spec.Limits.MemoryBytes > 0 && c.Resources.Limits.Memory().Value() != spec.Limits.MemoryBytes {
				t.Errorf("memory limit %v", c.Resources.Limits.Memory())
			}
			if c.VolumeMounts[0].SubPath != "groups/family" || c.VolumeMounts[0].MountPath != ContainerGroupDir {
				t.Errorf("mount %+v; want the claim's sub-path groups/family", c.VolumeMounts[0])
			}
			// The API server would refuse what the checks above let by.
			ctx := context.Background()
			if _, err := k.cs.CoreV1().Pods(kubeNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			_ = k.cs.CoreV1().Pods(kubeNS).Delete(ctx, pod.Name, metav1.DeleteOptions{})
		})
	}
}

// What the engine cannot carry it refuses: a mount outside the home's
// claim, a user that is not numeric, root.
func TestKubernetesRefusesSpec(t *testing.T) {
	k := newKubelet(t)
	e, _ := k.engine(t, nil)
	for name, mod := range map[string]func(*Spec){
		"outside the home": func(s *Spec) {
			s.Mounts = append(s.Mounts, Mount{Source: "/home/owner/projects", Target: "/workspace/extra/p"})
		},
		"named user": func(s *Spec) { s.User = "agent:agent" },
		"root":       func(s *Spec) { s.User = "0:0" },
	} {
		t.Run(name, func(t *testing.T) {
			spec, _ := kubeSpec("bridged-family-8", "hi")
			mod(&spec)
			if _, err := e.Start(context.Background(), spec); !errors.Is(err, ErrBadSpec) {
				t.Errorf("start: %v; want ErrBadSpec", err)
			}
		})
	}
	if list, _ := k.cs.CoreV1().Pods(kubeNS).List(context.Background(), metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("%d Pods created; want none", len(list.Items))
	}
}

// proxyAgent asks the API through the proxy's TCP channel as the runner
// does (ipc.EnvAPIAddr from its Pod, the token from its input) and answers
// with what the API said.
func proxyAgent(ctx context.Context, pod *corev1.Pod, in ipc.RunInput, out, errw io.Writer) int {
	addr := ""
	for _, ev := range pod.Spec.Containers[0].Env {
		if ev.Name == ipc.EnvAPIAddr {
			addr = ev.Value
		}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		fmt.Fprintln(errw, "dial:", err)
		return 1
	}
	defer c.Close()
	fmt.Fprintf(c, "%s%s\n", ipc.ProxyTokenLine, in.ProxyToken)
	body := `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: api\r\nx-api-key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", ipc.APIAuthAPIKey, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		fmt.Fprintln(errw, "read:", err)
		return 1
	}
	b, _ := io.ReadAll(resp.Body)
	var msg struct {
		Content []struct{ Text string } `json:"content"`
	}
	_ = json.Unmarshal(b, &msg)
	text := resp.Status
	if len(msg.Content) > 0 {
		text = msg.Content[0].Text
	}
	ev, _ := json.Marshal(ipc.Event{Type: ipc.EventResult, Text: text})
	_, _ = out.Write(append(ev, '\n'))
	return 0
}

// A message → reply through the kubernetes engine with the credential
// proxy reached over its cross-node channel: the spec as SpecBuilder makes
// it (the proxy socket mounted) becomes the TCP address in the Pod's
// environment and the run's token on its stdin; the upstream sees the real
// key, which is nowhere in the Pod (spec, environment, volumes), and nor is
// the token. After the run its token opens nothing.
func TestKubernetesProxyAcrossNodes(t *testing.T) {
	const secret = "sk-ant-api03-kube-SECRET-never-in-a-pod"
	var mu sync.Mutex
	var keys []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"message","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hello from the API"}],"usage":{"input_tokens":5,"output_tokens":4}}`)
	}))
	t.Cleanup(up.Close)
	p, err := credproxy.New(credproxy.Config{Upstream: up.URL, APIKey: secret, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := p.ListenTCP("127.0.0.1:0", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })

	k := newKubelet(t)
	var token string
	k.agent = func(ctx context.Context, pod *corev1.Pod, in ipc.RunInput, out, errw io.Writer) int {
		mu.Lock()
		token = in.ProxyToken
		mu.Unlock()
		return proxyAgent(ctx, pod, in, out, errw)
	}
	e, _ := k.engine(t, func(o *KubeOptions) { o.Proxy = tcp })
	spec, _ := kubeSpec("bridged-family-proxy", "what does the API say?")
	spec.Forbidden = []string{secret}
	spec.Mounts = append(spec.Mounts, Mount{Source: "/var/lib/bridged/data/proxy/bridged-family-proxy", Target: ipc.ContainerProxyDir, ReadOnly: true})
	spec.Env = append(spec.Env, ipc.EnvAPISocket+"="+ipc.ContainerProxyDir+"/"+ipc.ProxySocketName, ipc.EnvAPIAuth+"="+ipc.APIAuthAPIKey)
	run := start(t, e, spec)
	var reply string
	for ev := range run.Events() {
		if ev.Type == ipc.EventResult {
			reply = ev.Text
		}
	}
	if exit := waitExit(t, run, 10*time.Second); exit.Code != 0 {
		t.Errorf("exit %+v", exit)
	}
	if reply != "hello from the API" {
		t.Fatalf("reply %q; want the API's answer through the proxy", reply)
	}
	mu.Lock()
	if len(keys) != 1 || keys[0] != secret {
		t.Errorf("upstream saw keys %q; want the real key, added by the proxy", keys)
	}
	tok := token
	mu.Unlock()
	if len(tok) != 64 {
		t.Fatalf("token %q; want 32 random bytes in hex", tok)
	}
	pod := k.agentOf(run.ID()).pod
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]string{"the key": secret, "the token": tok, "the proxy socket": ipc.EnvAPISocket} {
		if strings.Contains(string(raw), v) {
			t.Errorf("the Pod holds %s: %s", what, raw)
		}
	}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.MountPath == ipc.ContainerProxyDir {
			t.Errorf("the proxy's socket directory is mounted: %+v", m)
		}
	}
	// The run is over: its token opens nothing.
	c, err := net.Dial("tcp", tcp.ListenAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s%s\nGET /v1/messages HTTP/1.1\r\nHost: api\r\n\r\n", ipc.ProxyTokenLine, tok)
	if _, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		t.Error("the ended run's token still opens the proxy")
	}
}

// The daemon's own Pod owns the agents' Pods; its IP is the proxy's.
func TestKubeSelf(t *testing.T) {
	cs := fake.NewClientset(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bridged-0", Namespace: kubeNS, UID: "uid-daemon"},
		Status:     corev1.PodStatus{PodIP: "10.1.2.3"},
	})
	owner, ip, err := KubeSelf(context.Background(), cs.CoreV1().Pods(kubeNS), "bridged-0")
	if err != nil || owner.UID != "uid-daemon" || owner.Kind != "Pod" || ip != "10.1.2.3" {
		t.Fatalf("owner %+v ip %q err %v", owner, ip, err)
	}
	if _, _, err := KubeSelf(context.Background(), cs.CoreV1().Pods(kubeNS), "nope"); err == nil {
		t.Error("a missing Pod: want an error")
	}
}
