package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
)

// kubeEnv is a daemon with BRIDGED_ENGINE=kubernetes on the fake cluster,
// its credential proxy listening over TCP on the Docker bridge's address.
// newEnvFn makes the env (newEnv, or a daemon of another user).
func kubeEnv(t *testing.T, up *fakeUpstream, newEnvFn func(*testing.T, ...string) *env, daemonArgs ...string) (*env, *kubeCluster, string) {
	t.Helper()
	e := newEnvFn(t, daemonArgs...)
	c := newKubeCluster(t, e.home)
	proxyAddr := net.JoinHostPort(c.gateway, freePort(t, c.gateway))
	dir := e.daemonDir(t)
	kubeconfig := e.daemonFile(t, dir, "kubeconfig", c.kubeconfig())
	e.extraEnv = append(e.extraEnv,
		"BRIDGED_ENGINE=kubernetes", "KUBECONFIG="+kubeconfig,
		"BRIDGED_KUBE_NAMESPACE="+kubeNamespace, "BRIDGED_KUBE_CLAIM="+kubeClaim, "BRIDGED_KUBE_POD="+kubeDaemonPod,
		"BRIDGED_PROXY_LISTEN="+proxyAddr, "BRIDGED_ANTHROPIC_URL="+up.srv.URL,
	)
	return e, c, proxyAddr
}

// kubeDaemonUsers are who the daemon runs as: root (the CI case) and,
// when the test runs as root, a user that is not, as the daemon of
// docs/kubernetes.md's manifests is (it grants each group's uid its
// directories by ACL); when the test does not run as root, its own user.
func kubeDaemonUsers() map[string]func(*testing.T, ...string) *env {
	if os.Geteuid() != 0 {
		return map[string]func(*testing.T, ...string) *env{"user": newEnv}
	}
	return map[string]func(*testing.T, ...string) *env{"root": newEnv, "user": func(t *testing.T, args ...string) *env {
		return newEnvAs(t, nonRootUID, nonRootUID, args...)
	}}
}

// freePort is a TCP port free on host now.
func freePort(t testing.TB, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// A message → reply through the kubernetes engine, end to end: the real
// daemon (router, ingest, outbox, the local chat) with
// BRIDGED_ENGINE=kubernetes creates a Pod per group through the API
// server, the kubelet runs it as a container of the test image, the
// daemon attaches to it and writes the run's input, and the agent's reply
// comes back into the chat. Its claude calls the API through the daemon's
// credential proxy, reached over TCP from the container network with the
// run's token (the Pod has no proxy socket: the upstream hears the agent
// only that way); the upstream sees the real key, which is nowhere in the
// Pods the API server received, their environment, or a file of the
// volumes they mount. A tool call (send_message through the runner's MCP
// server) reaches the chat too. Each group's Pod runs as its own uid, from
// data/group-uids.json, and every Pod passes `restricted`. Once idle, the
// Pods end and the daemon deletes them.
func TestE2EKubernetesMessageToReply(t *testing.T) {
	for name, newEnvFn := range kubeDaemonUsers() {
		t.Run(name, func(t *testing.T) {
			parallel(t, light)
			kubeMessageToReply(t, newEnvFn)
		})
	}
}

func kubeMessageToReply(t *testing.T, newEnvFn func(*testing.T, ...string) *env) {
	up := newFakeUpstream(t)
	e, cluster, proxyAddr := kubeEnv(t, up, newEnvFn, "--idle-timeout", "20s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "family", "--no-trigger", "local:family")
	d := e.start()

	if got := e.ask("local:main", "fake:api hello from a Pod", 3*time.Minute); got != "upstream says: hello from a Pod" {
		t.Fatalf("reply %q; want the upstream's answer through the proxy", got)
	}
	reqs := up.requests()
	if len(reqs) != 1 || reqs[0].path != "/v1/messages" || reqs[0].header.Get("X-Api-Key") != secret {
		t.Fatalf("upstream requests %+v; want one POST /v1/messages with the daemon's key", reqs)
	}
	// A tool call of the agent reaches the chat, in the same turn as its
	// reply (bridged chat -m prints both).
	out := e.mustCLI("chat", "-m", `fake:tool send_message {"text":"sent by a tool in a Pod"}`+"\nfake:reply done", "main")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) < 2 || lines[0] != "sent by a tool in a Pod" || lines[len(lines)-1] != "done" {
		t.Errorf("chat -m printed %q; want the tool's message, then the reply", out)
	}
	if got := e.ask("local:family", "fake:reply family here", 3*time.Minute); got != "family here" {
		t.Errorf("family's reply %q", got)
	}

	// Every connection the agents made to the proxy carried a valid token;
	// the proxy's port answers nothing to one without, and forwards
	// nothing.
	const refused = "a TCP connection without a valid token"
	if strings.Contains(d.logs(), refused) {
		t.Error("the proxy refused a connection of an agent's")
	}
	before := len(up.requests())
	conn, err := net.DialTimeout("tcp", proxyAddr, 10*time.Second)
	if err != nil {
		t.Fatalf("the proxy does not listen on %s: %v", proxyAddr, err)
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "BRIDGED-PROXY %s\nPOST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", strings.Repeat("0", 64))
	// Closed unread, the connection may end in a reset: either way, no
	// answer.
	if b, err := io.ReadAll(conn); len(b) != 0 || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Errorf("a connection with a wrong token got %q (%v); want it closed without an answer", b, err)
	}
	conn.Close()
	if n := len(up.requests()); n != before {
		t.Errorf("a connection with a wrong token reached the upstream")
	}
	if !d.waitLog(refused, time.Minute) {
		t.Error("the daemon did not log the refused connection")
	}

	// Idle, the agents end; the daemon deletes their Pods.
	cluster.waitPods(t, "the idle Pods to be deleted", 3*time.Minute, func(p []*corev1.Pod) bool { return len(p) == 0 })

	uids := groupUIDs(t, e.home)
	created := cluster.createdPods()
	if len(created) < 2 {
		t.Fatalf("the API server received %d Pods; want one per group at least", len(created))
	}
	seen := map[string]int64{}
	for _, raw := range created {
		if strings.Contains(string(raw), secret) {
			t.Errorf("a Pod spec holds the key: %s", raw)
		}
		var pod corev1.Pod
		if err := json.Unmarshal(raw, &pod); err != nil {
			t.Fatal(err)
		}
		group := pod.Annotations[container.LabelGroup]
		ctr := pod.Spec.Containers[0]
		env := map[string]string{}
		for _, ev := range ctr.Env {
			env[ev.Name] = ev.Value
		}
		if env[ipc.EnvAPIAddr] != proxyAddr {
			t.Errorf("Pod %s: %s=%q; want the proxy's TCP address %s", pod.Name, ipc.EnvAPIAddr, env[ipc.EnvAPIAddr], proxyAddr)
		}
		if _, ok := env[ipc.EnvAPISocket]; ok || slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == ipc.ContainerProxyDir }) {
			t.Errorf("Pod %s has the proxy's socket, which does not cross nodes", pod.Name)
		}
		if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].Name != kubeDaemonPod {
			t.Errorf("Pod %s owners %+v; want the daemon's Pod", pod.Name, pod.OwnerReferences)
		}
		if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != int64(uids[group]) || sc.RunAsGroup == nil || *sc.RunAsGroup != int64(uids[group]) {
			t.Errorf("Pod %s of %s runs as %+v; want the group's own uid and gid %d (data/group-uids.json)", pod.Name, group, sc, uids[group])
		}
		seen[group] = *pod.Spec.SecurityContext.RunAsUser
		// No file of what the Pod mounts holds the key.
		for _, m := range ctr.VolumeMounts {
			if m.Name != "home" {
				continue
			}
			if hits := grepFiles(t, filepath.Join(e.home, m.SubPath), secret); len(hits) > 0 {
				t.Errorf("Pod %s mounts %s, whose files %v hold the key", pod.Name, m.SubPath, hits)
			}
		}
	}
	if seen["main"] == 0 || seen["main"] == seen["family"] {
		t.Errorf("Pods ran as %v; want a uid of its own per group", seen)
	}
	d.stop(t)
	if hits := grepFiles(t, e.home, secret); len(hits) > 0 {
		t.Errorf("the key was written to %v", hits)
	}
	if strings.Contains(d.logs(), secret) {
		t.Error("the key appears in the daemon's log")
	}
}

// groupUIDs reads the home's data/group-uids.json.
func groupUIDs(t *testing.T, h string) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join(h, "data", home.GroupUIDsName))
	if err != nil {
		t.Fatalf("the group uids: %v", err)
	}
	defer f.Close()
	var v struct {
		UIDs map[string]int `json:"uids"`
	}
	if err := json.NewDecoder(bufio.NewReader(f)).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.UIDs
}

// `bridged doctor` on the kubernetes engine checks the cluster the daemon
// would use: the API server answers, the namespace exists, the daemon may
// create, watch, delete and attach to Pods there, the home's claim
// exists; each failure names its fix.
func TestE2EKubernetesDoctor(t *testing.T) {
	parallel(t, light)
	up := newFakeUpstream(t)
	e, cluster, _ := kubeEnv(t, up, newEnv)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	lines := func() map[string]string {
		out, _ := e.cli("doctor")
		got := map[string]string{}
		name := ""
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) > 1 && f[0] == "→":
				got[name+" hint"] = l
			case len(f) > 1:
				name = f[0]
				if f[0] == "group" {
					name = "group uids"
				}
				got[name] = l
			}
		}
		t.Logf("doctor:\n%s", out)
		return got
	}
	got := lines()
	for _, name := range []string{"kubernetes", "namespace", "rbac", "claim", "group uids"} {
		if l := got[name]; !strings.Contains(l, " ok ") {
			t.Errorf("doctor's %s line %q; want ok", name, l)
		}
	}
	cluster.noClaim.Store(true)
	cluster.denied.Store("create pods/attach", true)
	cluster.denied.Store("delete pods", true)
	got = lines()
	if l := got["rbac"]; !strings.Contains(l, "FAIL") || !strings.Contains(l, "delete pods, create pods/attach") || !strings.Contains(got["rbac hint"], "Role and RoleBinding of docs/kubernetes.md") {
		t.Errorf("doctor's rbac lines %q, %q; want a failure naming the missing rights and the Role to apply", l, got["rbac hint"])
	}
	if l := got["claim"]; !strings.Contains(l, "FAIL") || !strings.Contains(l, kubeClaim) || !strings.Contains(got["claim hint"], "BRIDGED_KUBE_CLAIM") {
		t.Errorf("doctor's claim lines %q, %q; want a failure naming the claim and how to fix it", l, got["claim hint"])
	}
	// Where the rights cannot be asked, listing the Pods is tried.
	cluster.noReview.Store(true)
	got = lines()
	if l := got["rbac"]; !strings.Contains(l, "warn") || !strings.Contains(l, "may list Pods") {
		t.Errorf("doctor's rbac line %q without access reviews; want a warning that only the list was tried", l)
	}
}
