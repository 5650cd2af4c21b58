package router

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/ipc"
)

// fakeProxy records the sockets the router opens and closes.
type fakeProxy struct {
	dir    string
	mu     sync.Mutex
	opened []string
	closed chan string
}

func (p *fakeProxy) Open(group, name string) (string, func(), error) {
	d := filepath.Join(p.dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", nil, err
	}
	p.mu.Lock()
	p.opened = append(p.opened, group+"/"+name)
	p.mu.Unlock()
	return d, func() { p.closed <- name }, nil
}

func (p *fakeProxy) Auth() string { return ipc.APIAuthOAuth }

func TestContainerGetsItsOwnProxySocket(t *testing.T) {
	var fp *fakeProxy
	h := newHarness(t, func(c *Config) {
		fp = &fakeProxy{dir: filepath.Join(c.Home.Layout().DataDir(), "proxy"), closed: make(chan string, 4)}
		c.Container.APIProxy = fp
		c.Container.Network = "none"
	})
	h.start()
	h.post(mainChat, "hi")
	run := h.nextRun()
	spec := run.spec
	want := container.Mount{Source: filepath.Join(fp.dir, spec.Name), Target: ipc.ContainerProxyDir, ReadOnly: true}
	if !slices.ContainsFunc(spec.Mounts, func(m container.Mount) bool { m.ID = container.FileID{}; return m == want }) {
		t.Fatalf("mounts %+v; want %+v", spec.Mounts, want)
	}
	for _, kv := range []string{ipc.EnvAPISocket + "=" + ipc.ContainerProxyDir + "/" + ipc.ProxySocketName, ipc.EnvAPIAuth + "=" + ipc.APIAuthOAuth} {
		if !slices.Contains(spec.Env, kv) {
			t.Errorf("env %q lacks %s", spec.Env, kv)
		}
	}
	if spec.Network != "none" {
		t.Errorf("network %q; want none", spec.Network)
	}
	fp.mu.Lock()
	if len(fp.opened) != 1 || fp.opened[0] != "main/"+spec.Name {
		t.Errorf("opened %q", fp.opened)
	}
	fp.mu.Unlock()
	select {
	case n := <-fp.closed:
		t.Fatalf("socket of %s closed while the container runs", n)
	default:
	}
	run.result("done")
	h.nextSend()
	run.exit(0)
	if n := <-fp.closed; n != spec.Name {
		t.Fatalf("closed %q; want %q", n, spec.Name)
	}
}
