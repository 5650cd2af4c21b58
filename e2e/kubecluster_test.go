package e2e

// kubeCluster is the smallest Kubernetes the daemon's kubernetes engine can
// run its agents on: an API server of one namespace (httptest) that serves
// what the engine's REST client asks (create, get, list, watch and delete
// of Pods, the attach subresource), admits only Pods that pass the
// `restricted` Pod Security Standard (a namespace labelled
// pod-security.kubernetes.io/enforce=restricted), and a kubelet that runs
// each created Pod as a real Docker container made from the Pod's spec
// (its image, environment, uid and gid, capabilities, limits, the home
// claim's sub-paths as bind mounts of the daemon's home, the memory-backed
// /tmp) on the Docker bridge network, whose status follows the container,
// and whose attach is served by the kubelet's own attach server code
// (k8s.io/cri-streaming) bridged to the container's attach. What a real
// cluster adds (a scheduler, a node's network, its own kubelet and
// runtime) is the manual smoke test of docs/kubernetes.md.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	containertypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	criattach "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/bridged-app/bridged/internal/container"
)

// The fake cluster's names.
const (
	kubeNamespace = "bridged"
	kubeClaim     = "bridged-home"
	kubeDaemonPod = "bridged-daemon"
	kubeToken     = "e2e-service-account-token"
	// kubePodLabel names, on a Docker container, the Pod it runs.
	kubePodLabel = "e2e.kube.pod"
)

type kubeCluster struct {
	t    testing.TB
	home string // where the claim is: the daemon's home
	srv  *httptest.Server
	// gateway is the Docker bridge's address on the host: where the Pods
	// reach the daemon (its Pod's IP).
	gateway string

	closing chan struct{}
	mu      sync.Mutex
	rv      int64
	pods    map[string]*kubePod
	// created holds each Pod as the API server received it (the request's
	// body).
	created  [][]byte
	watchers map[*kubeWatcher]bool
	// changed is signalled (never blocking) after every change of a Pod.
	changed chan struct{}
	// kubelets counts the kubelet goroutines (a Pod's container).
	kubelets sync.WaitGroup
	// noClaim: the home's claim does not exist; denied: the access
	// reviews ("verb resource[/subresource]") refused.
	noClaim atomic.Bool
	denied  sync.Map
	// noReview: the API server serves no SelfSubjectAccessReview (an
	// authorizer that answers none).
	noReview atomic.Bool
}

// kubePod is a Pod and its container.
type kubePod struct {
	pod      *corev1.Pod
	id       string // the Docker container, once created
	att      *client.HijackedResponse
	attached bool
	deleting bool
	// settled: the kubelet made the container (id) or will not.
	settled bool
}

type kubeWatcher struct {
	name   string // metadata.name the watch selects ("" for any)
	sel    labels.Selector
	events chan []byte
}

// newKubeCluster serves the fake cluster for the daemon whose home is home.
func newKubeCluster(t testing.TB, home string) *kubeCluster {
	t.Helper()
	c := &kubeCluster{t: t, home: home, gateway: bridgeGateway(t), closing: make(chan struct{}),
		pods: map[string]*kubePod{}, watchers: map[*kubeWatcher]bool{}, changed: make(chan struct{}, 1)}
	// The daemon's own Pod: the owner of the agents' Pods, its IP where
	// they reach the credential proxy.
	c.pods[kubeDaemonPod] = &kubePod{pod: &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: kubeDaemonPod, Namespace: kubeNamespace, UID: types.UID(randomHex(8)), ResourceVersion: "1", Labels: map[string]string{"app": "bridged"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: c.gateway},
	}}
	c.rv = 1
	// Over TLS, as an API server is: clientcmd gives a token only to a
	// server it verifies.
	c.srv = httptest.NewTLSServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.close)
	return c
}

// bridgeGateway is the host's address on Docker's default bridge network.
func bridgeGateway(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := docker.NetworkInspect(ctx, "bridge", client.NetworkInspectOptions{})
	if err != nil {
		t.Fatalf("inspect Docker's bridge network: %v", err)
	}
	for _, cfg := range res.Network.IPAM.Config {
		if cfg.Gateway.IsValid() && cfg.Gateway.Is4() {
			return cfg.Gateway.String()
		}
	}
	name := res.Network.Options["com.docker.network.bridge.name"]
	if name == "" {
		name = "docker0"
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatalf("Docker's bridge %s: %v", name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Fatalf("Docker's bridge %s has no IPv4 address", name)
	return ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// kubeconfig is a kubeconfig for the cluster.
func (c *kubeCluster) kubeconfig() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: bridged
  user: {token: %q}
contexts:
- name: fake
  context: {cluster: fake, user: bridged, namespace: %s}
current-context: fake
`, c.srv.URL, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.srv.Certificate().Raw})), kubeToken, kubeNamespace)
}

// close stops the API server and removes any container left: a Pod the
// daemon did not delete is an error.
func (c *kubeCluster) close() {
	close(c.closing)
	c.srv.CloseClientConnections()
	c.srv.Close()
	c.kubelets.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, kp := range c.pods {
		if name == kubeDaemonPod {
			continue
		}
		c.t.Errorf("the daemon left Pod %s", name)
		if kp.id != "" {
			_, _ = docker.ContainerRemove(ctx, kp.id, client.ContainerRemoveOptions{Force: true})
		}
	}
}

// serve routes /api/v1/namespaces/<ns>/pods[/<name>[/attach]].
func (c *kubeCluster) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+kubeToken {
		c.status(w, http.StatusUnauthorized, "Unauthorized", "no valid token")
		return
	}
	switch r.URL.Path {
	case "/version":
		c.reply(w, http.StatusOK, map[string]string{"major": "1", "minor": "37", "gitVersion": "v1.37.2-e2e"})
		return
	case "/api/v1/namespaces/" + kubeNamespace:
		c.reply(w, http.StatusOK, &corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: kubeNamespace}})
		return
	case "/api/v1/namespaces/" + kubeNamespace + "/persistentvolumeclaims/" + kubeClaim:
		if c.noClaim.Load() {
			c.status(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("persistentvolumeclaims %q not found", kubeClaim))
			return
		}
		c.reply(w, http.StatusOK, &corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: kubeClaim, Namespace: kubeNamespace}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}})
		return
	case "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
		if c.noReview.Load() {
			c.status(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
			return
		}
		c.accessReview(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/namespaces/"+kubeNamespace+"/pods")
	if !ok {
		c.status(w, http.StatusNotFound, "NotFound", "no such resource: "+r.URL.Path)
		return
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	switch {
	case rest == "" && r.Method == http.MethodPost:
		c.create(w, r)
	case rest == "" && r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		c.watch(w, r)
	case rest == "" && r.Method == http.MethodGet:
		c.list(w, r)
	case len(parts) == 1 && r.Method == http.MethodGet:
		c.mu.Lock()
		kp := c.pods[parts[0]]
		var pod *corev1.Pod
		if kp != nil {
			pod = kp.pod.DeepCopy()
		}
		c.mu.Unlock()
		if pod == nil {
			c.notFound(w, parts[0])
			return
		}
		c.reply(w, http.StatusOK, pod)
	case len(parts) == 1 && r.Method == http.MethodDelete:
		c.delete(w, r, parts[0])
	case len(parts) == 2 && parts[1] == "attach" && (r.Method == http.MethodPost || r.Method == http.MethodGet):
		c.attach(w, r, parts[0])
	default:
		c.status(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" "+r.URL.Path)
	}
}

// accessReview answers a SelfSubjectAccessReview of the namespace's
// Pods: allowed unless denied.
func (c *kubeCluster) accessReview(w http.ResponseWriter, r *http.Request) {
	var rev struct {
		Spec struct {
			ResourceAttributes struct {
				Namespace, Verb, Resource, Subresource string
			} `json:"resourceAttributes"`
		} `json:"spec"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&rev) != nil {
		c.status(w, http.StatusBadRequest, "BadRequest", "want a SelfSubjectAccessReview")
		return
	}
	a := rev.Spec.ResourceAttributes
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	_, denied := c.denied.Load(a.Verb + " " + res)
	allowed := a.Namespace == kubeNamespace && !denied
	c.reply(w, http.StatusCreated, map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
		"spec": rev.Spec, "status": map[string]any{"allowed": allowed}})
}

func (c *kubeCluster) reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (c *kubeCluster) status(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	c.reply(w, code, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg})
}

func (c *kubeCluster) notFound(w http.ResponseWriter, name string) {
	c.reply(w, http.StatusNotFound, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("pods %q not found", name), Details: &metav1.StatusDetails{Name: name, Kind: "pods"}})
}

// restrictedProblem is why pod fails the restricted Pod Security Standard
// ("" when it passes).
func restrictedProblem(pod *corev1.Pod) string {
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return err.Error()
	}
	res := policy.AggregateCheckResults(ev.EvaluatePod(psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}, &pod.ObjectMeta, &pod.Spec))
	if res.Allowed {
		return ""
	}
	return res.ForbiddenReason() + ": " + res.ForbiddenDetail()
}

func (c *kubeCluster) create(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		c.status(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(body, pod); err != nil {
		c.status(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	if why := restrictedProblem(pod); why != "" {
		c.t.Errorf("Pod %s fails restricted: %s", pod.Name, why)
		c.status(w, http.StatusForbidden, metav1.StatusReasonForbidden, "violates PodSecurity restricted:latest: "+why)
		return
	}
	c.mu.Lock()
	c.created = append(c.created, body)
	if _, dup := c.pods[pod.Name]; dup {
		c.mu.Unlock()
		c.status(w, http.StatusConflict, metav1.StatusReasonAlreadyExists, fmt.Sprintf("pods %q already exists", pod.Name))
		return
	}
	pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	pod.Namespace = kubeNamespace
	pod.UID = types.UID(randomHex(8))
	pod.CreationTimestamp = metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
	c.pods[pod.Name] = &kubePod{pod: pod}
	out := c.changeLocked("ADDED", pod)
	c.kubelets.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.kubelets.Done()
		c.run(pod.Name)
	}()
	c.reply(w, http.StatusCreated, out)
}

// changeLocked stamps pod with the next resource version, tells the
// watchers and returns a copy.
func (c *kubeCluster) changeLocked(typ string, pod *corev1.Pod) *corev1.Pod {
	c.rv++
	pod.ResourceVersion = strconv.FormatInt(c.rv, 10)
	out := pod.DeepCopy()
	ev, _ := json.Marshal(struct {
		Type   string      `json:"type"`
		Object *corev1.Pod `json:"object"`
	}{typ, out})
	for wt := range c.watchers {
		if wt.matches(out) {
			select {
			case wt.events <- ev:
			default:
				// A watcher that does not read is cut, as the API
				// server does: it opens another.
				close(wt.events)
				delete(c.watchers, wt)
			}
		}
	}
	select {
	case c.changed <- struct{}{}:
	default:
	}
	return out
}

func (wt *kubeWatcher) matches(p *corev1.Pod) bool {
	return (wt.name == "" || wt.name == p.Name) && wt.sel.Matches(labels.Set(p.Labels))
}

// setStatus changes the status of a Pod that is not being deleted.
func (c *kubeCluster) setStatus(name string, f func(*corev1.PodStatus)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kp := c.pods[name]
	if kp == nil || kp.deleting {
		return
	}
	f(&kp.pod.Status)
	c.changeLocked("MODIFIED", kp.pod)
}

func selectors(r *http.Request) (name string, sel labels.Selector, err error) {
	q := r.URL.Query()
	sel, err = labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return "", nil, err
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return "", nil, err
	}
	name, _ = fs.RequiresExactMatch("metadata.name")
	return name, sel, nil
}

func (c *kubeCluster) list(w http.ResponseWriter, r *http.Request) {
	name, sel, err := selectors(r)
	if err != nil {
		c.status(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	wt := &kubeWatcher{name: name, sel: sel}
	c.mu.Lock()
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(c.rv, 10)}}
	for _, kp := range c.pods {
		if wt.matches(kp.pod) {
			list.Items = append(list.Items, *kp.pod.DeepCopy())
		}
	}
	c.mu.Unlock()
	c.reply(w, http.StatusOK, list)
}

// watch streams the changes of the selected Pods, starting with an ADDED
// event for each that exists, until the client leaves or the cluster
// closes.
func (c *kubeCluster) watch(w http.ResponseWriter, r *http.Request) {
	name, sel, err := selectors(r)
	if err != nil {
		c.status(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	wt := &kubeWatcher{name: name, sel: sel, events: make(chan []byte, 256)}
	c.mu.Lock()
	var initial [][]byte
	for _, kp := range c.pods {
		if wt.matches(kp.pod) {
			ev, _ := json.Marshal(struct {
				Type   string      `json:"type"`
				Object *corev1.Pod `json:"object"`
			}{"ADDED", kp.pod})
			initial = append(initial, ev)
		}
	}
	c.watchers[wt] = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.watchers, wt)
		c.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	for _, ev := range initial {
		_, _ = w.Write(append(ev, '\n'))
	}
	fl.Flush()
	for {
		select {
		case ev, ok := <-wt.events:
			if !ok {
				return
			}
			if _, err := w.Write(append(ev, '\n')); err != nil {
				return
			}
			fl.Flush()
		case <-r.Context().Done():
			return
		case <-c.closing:
			return
		}
	}
}

// delete marks the Pod as deleted, then the kubelet stops its container
// (SIGTERM, SIGKILL after the grace period), removes it, and the Pod goes.
func (c *kubeCluster) delete(w http.ResponseWriter, r *http.Request, name string) {
	var opts metav1.DeleteOptions
	if body, _ := io.ReadAll(r.Body); len(body) > 0 {
		if err := json.Unmarshal(body, &opts); err != nil {
			c.status(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
	}
	grace := 30
	if opts.GracePeriodSeconds != nil {
		grace = int(*opts.GracePeriodSeconds)
	}
	c.mu.Lock()
	kp := c.pods[name]
	if kp == nil {
		c.mu.Unlock()
		c.notFound(w, name)
		return
	}
	first := !kp.deleting
	if first {
		kp.deleting = true
		now := metav1.Now()
		kp.pod.DeletionTimestamp = &now
		c.changeLocked("MODIFIED", kp.pod)
		c.kubelets.Add(1)
	}
	out := kp.pod.DeepCopy()
	c.mu.Unlock()
	if first {
		go func() {
			defer c.kubelets.Done()
			c.remove(name, grace)
		}()
	}
	c.reply(w, http.StatusOK, out)
}

// remove stops and removes a deleted Pod's container, then forgets the
// Pod. A Pod whose container is still being made is left to run, which
// sees it deleted once it is made.
func (c *kubeCluster) remove(name string, grace int) {
	c.mu.Lock()
	kp := c.pods[name]
	settled, id := kp.settled, kp.id
	c.mu.Unlock()
	if !settled {
		return
	}
	if id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(grace)*time.Second+time.Minute)
		defer cancel()
		_, _ = docker.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &grace})
		if _, err := docker.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil {
			c.t.Errorf("remove the container of Pod %s: %v", name, err)
		}
	}
	c.forget(name)
}

func (c *kubeCluster) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kp := c.pods[name]
	if kp == nil {
		return
	}
	if kp.att != nil {
		kp.att.Close()
	}
	delete(c.pods, name)
	c.changeLocked("DELETED", kp.pod)
}

// containerFor is the Docker container the kubelet makes of pod: the
// image's entrypoint as PID 1, the Pod's uid and gid, environment and
// working directory, its capabilities dropped, no privilege escalation,
// its limits, the home claim's sub-paths bound from the home, the
// memory-backed emptyDir a tmpfs.
func (c *kubeCluster) containerFor(pod *corev1.Pod) (client.ContainerCreateOptions, error) {
	if len(pod.Spec.Containers) != 1 {
		return client.ContainerCreateOptions{}, fmt.Errorf("want one container, got %d", len(pod.Spec.Containers))
	}
	ctr := pod.Spec.Containers[0]
	psc, sc := pod.Spec.SecurityContext, ctr.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	uid, gid := psc.RunAsUser, psc.RunAsGroup
	if sc.RunAsUser != nil {
		uid = sc.RunAsUser
	}
	if sc.RunAsGroup != nil {
		gid = sc.RunAsGroup
	}
	user := ""
	if uid != nil {
		user = strconv.FormatInt(*uid, 10)
		if gid != nil {
			user += ":" + strconv.FormatInt(*gid, 10)
		}
	}
	var groups []string
	for _, g := range psc.SupplementalGroups {
		groups = append(groups, strconv.FormatInt(g, 10))
	}
	if psc.FSGroup != nil {
		groups = append(groups, strconv.FormatInt(*psc.FSGroup, 10))
	}
	env := make([]string, 0, len(ctr.Env))
	for _, e := range ctr.Env {
		if e.ValueFrom != nil {
			return client.ContainerCreateOptions{}, fmt.Errorf("env %s from a source: not served here", e.Name)
		}
		env = append(env, e.Name+"="+e.Value)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	var mounts []mount.Mount
	tmpfs := map[string]string{}
	for _, m := range ctr.VolumeMounts {
		v, ok := vols[m.Name]
		switch {
		case !ok:
			return client.ContainerCreateOptions{}, fmt.Errorf("mount of unknown volume %s", m.Name)
		case v.PersistentVolumeClaim != nil:
			if v.PersistentVolumeClaim.ClaimName != kubeClaim {
				return client.ContainerCreateOptions{}, fmt.Errorf("claim %s does not exist", v.PersistentVolumeClaim.ClaimName)
			}
			src := filepath.Join(c.home, m.SubPath)
			if rel, err := filepath.Rel(c.home, src); err != nil || strings.HasPrefix(rel, "..") {
				return client.ContainerCreateOptions{}, fmt.Errorf("subPath %s leaves the volume", m.SubPath)
			}
			mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
		case v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory:
			opt := "rw,nosuid,nodev,mode=1777"
			if v.EmptyDir.SizeLimit != nil {
				opt += ",size=" + strconv.FormatInt(v.EmptyDir.SizeLimit.Value(), 10)
			}
			tmpfs[m.MountPath] = opt
		default:
			return client.ContainerCreateOptions{}, fmt.Errorf("volume %s: only the claim and memory emptyDirs are served here", m.Name)
		}
	}
	res := containertypes.Resources{}
	if q, ok := ctr.Resources.Limits[corev1.ResourceMemory]; ok {
		res.Memory = q.Value()
	}
	if q, ok := ctr.Resources.Limits[corev1.ResourceCPU]; ok {
		res.NanoCPUs = q.MilliValue() * 1e6
	}
	var capDrop []string
	if sc.Capabilities != nil {
		for _, d := range sc.Capabilities.Drop {
			capDrop = append(capDrop, string(d))
		}
	}
	var secOpt []string
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		secOpt = append(secOpt, "no-new-privileges")
	}
	lbl := map[string]string{kubePodLabel: pod.Name}
	for k, v := range pod.Labels {
		lbl[k] = v
	}
	return client.ContainerCreateOptions{
		Name: "k8s_" + ctr.Name + "_" + pod.Name + "_" + string(pod.UID),
		Config: &containertypes.Config{
			Image: ctr.Image, Cmd: append(slices.Clone(ctr.Command), ctr.Args...), User: user, WorkingDir: ctr.WorkingDir,
			Env: env, Labels: lbl, OpenStdin: ctr.Stdin, StdinOnce: ctr.StdinOnce,
			AttachStdin: ctr.Stdin, AttachStdout: true, AttachStderr: true, Tty: ctr.TTY,
		},
		HostConfig: &containertypes.HostConfig{
			Mounts: mounts, Tmpfs: tmpfs, GroupAdd: groups, CapDrop: capDrop, SecurityOpt: secOpt,
			Resources: res, Privileged: sc.Privileged != nil && *sc.Privileged,
		},
	}, nil
}

// run is the kubelet's part of a Pod: its container made, attached to
// (before it starts: nothing it writes is lost), started, the Pod running;
// then its exit is the Pod's end.
func (c *kubeCluster) run(name string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	c.mu.Lock()
	pod := c.pods[name].pod.DeepCopy()
	c.mu.Unlock()
	waiting := func(reason string, err error) {
		c.setStatus(name, func(s *corev1.PodStatus) {
			s.ContainerStatuses = []corev1.ContainerStatus{{Name: container.AgentContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}}}}
		})
	}
	opts, err := c.containerFor(pod)
	var created client.ContainerCreateResult
	if err == nil {
		created, err = docker.ContainerCreate(ctx, opts)
	}
	c.mu.Lock()
	kp := c.pods[name]
	kp.settled, kp.id = true, created.ID
	deleted := kp.deleting
	c.mu.Unlock()
	if deleted {
		if created.ID != "" {
			_, _ = docker.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
		}
		c.forget(name)
		return
	}
	if err != nil {
		waiting("CreateContainerError", err)
		return
	}
	att, err := docker.ContainerAttach(ctx, created.ID, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		waiting("CreateContainerError", err)
		return
	}
	c.mu.Lock()
	kp.att = &att.HijackedResponse
	c.mu.Unlock()
	wait := docker.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: containertypes.WaitConditionNextExit})
	if _, err := docker.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		waiting("CreateContainerError", err)
		return
	}
	c.setStatus(name, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.PodIP = "10.0.0.2"
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: container.AgentContainer, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	})
	var code int64
	select {
	case res := <-wait.Result:
		code = res.StatusCode
	case <-wait.Error:
		return // removed (deleted) or the cluster closed
	}
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	if ins, err := docker.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{}); err == nil && ins.Container.State != nil && ins.Container.State.OOMKilled {
		reason = "OOMKilled"
	}
	c.setStatus(name, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodSucceeded
		if code != 0 {
			s.Phase = corev1.PodFailed
		}
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: container.AgentContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason}}}}
	})
}

// attach serves the attach subresource with the kubelet's attach server
// code, on the container's attach the kubelet opened before it started.
func (c *kubeCluster) attach(w http.ResponseWriter, r *http.Request, name string) {
	q := r.URL.Query()
	if ctr := q.Get("container"); ctr != "" && ctr != container.AgentContainer {
		c.status(w, http.StatusBadRequest, "BadRequest", "no container "+ctr)
		return
	}
	// The API server's parameters (stdin=true) are the kubelet's
	// (input=1) past its proxy.
	opts := &criattach.Options{Stdin: q.Get("stdin") == "true", Stdout: q.Get("stdout") == "true", Stderr: q.Get("stderr") == "true", TTY: q.Get("tty") == "true"}
	c.mu.Lock()
	kp := c.pods[name]
	ok := kp != nil && kp.att != nil && !kp.attached && kp.pod.Status.Phase == corev1.PodRunning
	if ok {
		kp.attached = true
	}
	c.mu.Unlock()
	if !ok {
		c.status(w, http.StatusBadRequest, "BadRequest", "pod "+name+" is not running, or already attached")
		return
	}
	criattach.ServeAttach(w, r, dockerAttacher{kp.att}, name, "", container.AgentContainer, opts, time.Minute, 30*time.Second, criattach.SupportedStreamingProtocols)
}

// dockerAttacher joins the attach stream to the container's: stdin
// copied in, then half-closed (the container's stdin ends, stdinOnce);
// stdout and stderr demultiplexed out until the container's end.
type dockerAttacher struct{ h *client.HijackedResponse }

func (a dockerAttacher) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan criattach.TerminalSize) error {
	stop := context.AfterFunc(ctx, a.h.Close)
	defer stop()
	if in != nil {
		go func() {
			_, _ = io.Copy(a.h.Conn, in)
			_ = a.h.CloseWrite()
		}()
	}
	var ow, ew io.Writer = io.Discard, io.Discard
	if out != nil {
		ow = out
	}
	if errw != nil {
		ew = errw
	}
	_, err := stdcopy.StdCopy(ow, ew, a.h.Reader)
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// createdPods returns every Pod the API server received, as it received
// it.
func (c *kubeCluster) createdPods() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.created...)
}

// agentPods returns the agent Pods that exist (not the daemon's).
func (c *kubeCluster) agentPods() []*corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*corev1.Pod
	for name, kp := range c.pods {
		if name != kubeDaemonPod {
			out = append(out, kp.pod.DeepCopy())
		}
	}
	return out
}

// waitPods waits until cond holds of the agent Pods.
func (c *kubeCluster) waitPods(t testing.TB, what string, within time.Duration, cond func([]*corev1.Pod) bool) []*corev1.Pod {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		pods := c.agentPods()
		if cond(pods) {
			return pods
		}
		select {
		case <-c.changed:
		case <-deadline.C:
			var b bytes.Buffer
			for _, p := range pods {
				fmt.Fprintf(&b, " %s(%s)", p.Name, p.Status.Phase)
			}
			t.Fatalf("waited %s for %s; Pods:%s", within, what, b.String())
		}
	}
}
