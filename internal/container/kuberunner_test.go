package container

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// socketProxy is the daemon's APIProxy (cmd/bridged's proxyAdapter): a
// socket per container, which the kubernetes engine replaces by the TCP
// channel.
type socketProxy struct{ p *credproxy.Proxy }

func (a socketProxy) Open(group, name string) (string, func(), error) {
	ep, err := a.p.Open(group, name)
	if err != nil {
		return "", nil, err
	}
	return ep.Dir, func() { _ = ep.Close() }, nil
}

func (a socketProxy) Auth() string { return a.p.Mode() }

// buildBinary builds pkg into dir and returns its path.
func buildBinary(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, "github.com/bridged-app/bridged/"+pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// A message → reply through the kubernetes engine with the real agent
// runner and the fake claude in the Pod (run here as processes behind the
// kubelet's attach code, the Pod's sub-path mounts mapped onto the home):
// SpecBuilder builds the spec as the daemon does (the proxy's socket
// mounted), the engine makes it a Pod whose runner reaches the credential
// proxy over TCP with the run's token, claude's API call is answered by
// the upstream with the real key the proxy added, and the key is in
// nothing of the Pod nor in any file of the home.
func TestKubernetesRunnerMessageToReply(t *testing.T) {
	requireMainPackage(t, "../../agent-runner")
	requireMainPackage(t, "../../cmd/fakeclaude")
	bins := t.TempDir()
	runner := buildBinary(t, bins, "agent-runner")
	claude := buildBinary(t, bins, "cmd/fakeclaude")

	const secret = "sk-ant-api03-kube-runner-SECRET"
	var mu sync.Mutex
	var keys []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{`{"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":7,"output_tokens":1}}}`,
			`{"type":"content_block_delta","delta":{"type":"text_delta","text":"hello from a Pod"}}`,
			`{"type":"message_delta","usage":{"output_tokens":3}}`, `{"type":"message_stop"}`} {
			fmt.Fprintf(w, "data: %s\n\n", d)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(up.Close)

	b := newBuilder(t)
	b.Secrets = map[string]string{"ANTHROPIC_API_KEY": secret}
	b.Timezone = nil
	homeDir := b.Home.Layout().Dir
	p, err := credproxy.New(credproxy.Config{Upstream: up.URL, APIKey: secret, Dir: filepath.Join(b.Home.Layout().DataDir(), "proxy"), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	b.APIProxy = socketProxy{p}
	family := store.Group{Chat: "local:family", Name: "Family", Folder: "family"}
	host, _ := ipcHost(t, b.Home, family)
	tcp, err := p.ListenTCP("127.0.0.1:0", "", host.Channel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })

	spec, release, err := b.Build(zerolog.Nop(), family, "bridged-family-1", ipc.RunInput{
		Prompt: "fake:api stream", Group: "family", Chat: "local:family", AssistantName: "Robo", Timezone: "UTC",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	k := newKubelet(t)
	var podSeen *corev1.Pod
	agent := podRunner(t, runner, claude, homeDir)
	k.agent = func(ctx context.Context, pod *corev1.Pod, in ipc.RunInput, out, errw io.Writer) int {
		podSeen = pod
		return agent(ctx, pod, in, out, errw)
	}
	e, logs := k.engine(t, func(o *KubeOptions) { o.Proxy = tcp; o.HomeDir = homeDir; o.StartTimeout = time.Minute })
	spec.Stderr = (&stderrLines{}).add
	run := start(t, e, spec)
	res := nextResult(t, run, time.Minute)
	if res.IsError || res.Text != "hello from a Pod" {
		t.Fatalf("result %+v; want the API's answer through the proxy", res)
	}
	if err := b.Home.WriteClose("family"); err != nil {
		t.Fatal(err)
	}
	for range run.Events() {
	}
	if exit := waitExit(t, run, time.Minute); exit.Code != 0 || exit.Err != nil {
		t.Errorf("exit %+v; want 0 after the close sentinel", exit)
	}
	mu.Lock()
	if len(keys) != 1 || keys[0] != secret {
		t.Errorf("upstream saw keys %q; want the real key, once", keys)
	}
	mu.Unlock()
	raw := fmt.Sprintf("%+v", podSeen)
	if strings.Contains(raw, secret) || strings.Contains(raw, ipc.EnvAPISocket) || strings.Contains(logs.String(), secret) {
		t.Error("the Pod or the engine's log holds the key, or the proxy socket")
	}
	err = filepath.WalkDir(homeDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if data, err := os.ReadFile(path); err == nil && bytes.Contains(data, []byte(secret)) {
			t.Errorf("%s holds the key", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
