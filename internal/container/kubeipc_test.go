package container

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipchost"
	"github.com/bridged-app/bridged/internal/ipchost/ipchosttest"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// ipcHost is the daemon's real IPC host over hm, with group registered, as
// credproxy.ListenTCP's IPC (the daemon's wiring on this engine).
func ipcHost(t *testing.T, hm *home.Home, group store.Group) (*ipchost.Host, *store.DB) {
	t.Helper()
	db := storetest.OpenHome(t, hm.Layout().Dir)
	if _, err := db.Groups.Add(context.Background(), group); err != nil {
		t.Fatal(err)
	}
	h, err := ipchost.New(ipchost.Config{Trees: hm, AssistantName: "Robo"}, db, ipchosttest.Outbox{DB: db}, nil, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return h, db
}

// podRunner is the Pod's agent of the kubelet: the real runner with the
// Pod's environment and its mounts where the claim's sub-paths are on this
// host, except the mount paths in elsewhere, which get a directory of
// their own (what another node's view of the volume shows the daemon:
// nothing).
func podRunner(t *testing.T, runner, claude, homeDir string, elsewhere ...string) func(context.Context, *corev1.Pod, ipc.RunInput, io.Writer, io.Writer) int {
	return func(ctx context.Context, pod *corev1.Pod, in ipc.RunInput, out, errw io.Writer) int {
		c := pod.Spec.Containers[0]
		at := map[string]string{}
		for _, m := range c.VolumeMounts {
			if m.Name == homeVolume {
				at[m.MountPath] = filepath.Join(homeDir, m.SubPath)
			}
		}
		for _, p := range elsewhere {
			at[p] = t.TempDir()
		}
		args := []string{"--ipc-dir", at[ContainerIPCDir], "--workdir", at[ContainerGroupDir], "--global-dir", at[ContainerGlobalDir], "--extra-dir", t.TempDir(), "--claude", claude}
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "IS_SANDBOX=1", "GORACE=atexit_sleep_ms=0"}
		for _, e := range c.Env {
			if e.Name != "HOME" {
				env = append(env, e.Name+"="+e.Value)
			}
		}
		cmd := exec.CommandContext(ctx, runner, args...)
		cmd.Env = env
		stdin, _ := json.Marshal(in)
		cmd.Stdin = bytes.NewReader(stdin)
		cmd.Stdout, cmd.Stderr = out, errw
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(errw, "runner:", err)
			if x, ok := err.(*exec.ExitError); ok {
				return x.ExitCode()
			}
			return 1
		}
		return 0
	}
}

// IPC across nodes (decision record 42): a run of the kubernetes engine
// whose Pod's IPC directory is not the daemon's (another node, a network
// volume that raises no event there) still makes its tool call and takes
// its follow-up input and its close, all over the run's channel: the
// agent's send_message is committed by the real IPC host as the token's
// group, the follow-up reaches the same claude, and the close ends the
// run with exit 0, each in far less than the sweep's interval.
func TestKubernetesRunnerIPCOverTheChannel(t *testing.T) {
	requireMainPackage(t, "../../agent-runner")
	requireMainPackage(t, "../../cmd/fakeclaude")
	bins := t.TempDir()
	runner := buildBinary(t, bins, "agent-runner")
	claude := buildBinary(t, bins, "cmd/fakeclaude")

	b := newBuilder(t)
	b.Timezone = nil
	homeDir := b.Home.Layout().Dir
	family := store.Group{Chat: "local:family", Name: "Family", Folder: "family", Trigger: "@Robo"}
	host, db := ipcHost(t, b.Home, family)
	p, err := credproxy.New(credproxy.Config{Upstream: "http://127.0.0.1:1", APIKey: testSecret, Dir: filepath.Join(b.Home.Layout().DataDir(), "proxy"), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	b.APIProxy = socketProxy{p}
	tcp, err := p.ListenTCP("127.0.0.1:0", "", host.Channel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })

	spec, release, err := b.Build(zerolog.Nop(), family, "bridged-family-1", ipc.RunInput{
		Prompt: `fake:tool send_message {"text":"hello from another node"}`, Group: "family", Chat: "local:family", AssistantName: "Robo", Timezone: "UTC",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	k := newKubelet(t)
	k.agent = podRunner(t, runner, claude, homeDir, ContainerIPCDir)
	e, _ := k.engine(t, func(o *KubeOptions) { o.Proxy = tcp; o.HomeDir = homeDir; o.StartTimeout = time.Minute })
	spec.Stderr = (&stderrLines{}).add
	run := start(t, e, spec)

	res := nextResult(t, run, 20*time.Second)
	if res.IsError || !strings.Contains(res.Text, "Message queued for delivery to this chat.") {
		t.Fatalf("result %q; want the IPC host's answer", res.Text)
	}
	out, err := db.Outbox.Pending(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Group != "family" || out[0].Chat != "local:family" || out[0].Text != "hello from another node" {
		t.Fatalf("outbox %+v; want the message once, to family's chat", out)
	}
	if _, err := b.Home.WriteInput("family", "fake:reply the follow-up crossed"); err != nil {
		t.Fatal(err)
	}
	if res := nextResult(t, run, 20*time.Second); res.Text != "the follow-up crossed" {
		t.Fatalf("result %q; want the follow-up's answer", res.Text)
	}
	if err := b.Home.WriteClose("family"); err != nil {
		t.Fatal(err)
	}
	for range run.Events() {
	}
	if exit := waitExit(t, run, 20*time.Second); exit.Code != 0 || exit.Err != nil {
		t.Errorf("exit %+v; want 0 after the close", exit)
	}
	in, err := b.Home.Input("family")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if names, _, _ := in.List(10); len(names) != 0 {
		t.Errorf("the daemon's input still holds %v after the run took it", names)
	}
}
