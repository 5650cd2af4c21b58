package testimage

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// fakeEngine is an in-memory image store: it records imports and answers
// inspect with the labels of what was imported.
type fakeEngine struct {
	labels   map[string]map[string]string // tag → labels
	imports  int
	lastTar  []byte
	changes  []string
	progress string // the import's response body
}

func (f *fakeEngine) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	l, ok := f.labels[ref]
	if !ok {
		return client.ImageInspectResult{}, cerrdefs.ErrNotFound.WithMessage("no such image: " + ref)
	}
	cfg := &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{Labels: l}}
	return client.ImageInspectResult{InspectResponse: image.InspectResponse{Config: cfg}}, nil
}

func (f *fakeEngine) ImageImport(_ context.Context, src client.ImageImportSource, ref string, opts client.ImageImportOptions) (client.ImageImportResult, error) {
	data, err := io.ReadAll(src.Source)
	if err != nil {
		return nil, err
	}
	f.imports++
	f.lastTar = data
	f.changes = opts.Changes
	if f.progress != "" {
		return io.NopCloser(strings.NewReader(f.progress)), nil
	}
	labels := map[string]string{}
	for _, c := range opts.Changes {
		if kv, ok := strings.CutPrefix(c, "LABEL "); ok {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = v
		}
	}
	if f.labels == nil {
		f.labels = map[string]map[string]string{}
	}
	f.labels[ref] = labels
	return io.NopCloser(strings.NewReader(`{"status":"sha256:abc"}` + "\n")), nil
}

func writeBin(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

type entry struct {
	hdr  *tar.Header
	data string
}

func readTar(t *testing.T, data []byte) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		b, _ := io.ReadAll(tr)
		out[strings.TrimSuffix(h.Name, "/")] = entry{h, string(b)}
	}
}

func TestWriteRootfs(t *testing.T) {
	bins := map[string]string{
		Entrypoint:              writeBin(t, "runner", "RUNNER"),
		"/usr/local/bin/claude": writeBin(t, "claude", "CLAUDE"),
		"/opt/x/tool":           writeBin(t, "tool", "TOOL"),
	}
	var buf bytes.Buffer
	if err := WriteRootfs(&buf, bins); err != nil {
		t.Fatalf("WriteRootfs: %v", err)
	}
	fs := readTar(t, buf.Bytes())
	tests := []struct {
		name     string
		dir      bool
		mode     int64
		uid, gid int
		data     string
	}{
		{name: "tmp", dir: true, mode: 0o1777},
		{name: "home/agent", dir: true, mode: 0o755, uid: 1000, gid: 1000},
		{name: "home/agent/.claude", dir: true, mode: 0o755, uid: 1000, gid: 1000},
		{name: "workspace/group", dir: true, mode: 0o755, uid: 1000, gid: 1000},
		{name: "workspace/global", dir: true, mode: 0o755, uid: 1000, gid: 1000},
		{name: "workspace/ipc", dir: true, mode: 0o755, uid: 1000, gid: 1000},
		{name: "workspace/groups", dir: true, mode: 0o755, uid: 1000, gid: 1000},
		{name: "workspace/extra", dir: true, mode: 0o755},
		{name: "opt/x", dir: true, mode: 0o755},
		{name: "usr/local/bin/agent-runner", mode: 0o755, data: "RUNNER"},
		{name: "usr/local/bin/claude", mode: 0o755, data: "CLAUDE"},
		{name: "opt/x/tool", mode: 0o755, data: "TOOL"},
	}
	for _, tt := range tests {
		e, ok := fs[tt.name]
		if !ok {
			t.Errorf("%s missing from the rootfs", tt.name)
			continue
		}
		if (e.hdr.Typeflag == tar.TypeDir) != tt.dir || e.hdr.Mode != tt.mode || e.hdr.Uid != tt.uid || e.hdr.Gid != tt.gid || e.data != tt.data {
			t.Errorf("%s: got dir=%v mode=%o owner=%d:%d data=%q; want dir=%v mode=%o owner=%d:%d data=%q", tt.name,
				e.hdr.Typeflag == tar.TypeDir, e.hdr.Mode, e.hdr.Uid, e.hdr.Gid, e.data, tt.dir, tt.mode, tt.uid, tt.gid, tt.data)
		}
	}
	if !strings.Contains(fs["etc/passwd"].data, "agent:x:1000:1000:agent:/home/agent:") {
		t.Errorf("passwd %q; want user agent 1000:1000 with home /home/agent", fs["etc/passwd"].data)
	}
	if !strings.Contains(fs["etc/group"].data, "agent:x:1000:") {
		t.Errorf("group %q; want group agent 1000", fs["etc/group"].data)
	}
}

func TestEnsureImage(t *testing.T) {
	ctx := context.Background()
	eng := &fakeEngine{}
	bins := map[string]string{Entrypoint: writeBin(t, "runner", "v1")}

	imported, err := EnsureImage(ctx, eng, "bridged-agent:test", bins)
	if err != nil || !imported || eng.imports != 1 {
		t.Fatalf("first EnsureImage = %v, %v (%d imports); want an import", imported, err, eng.imports)
	}
	for _, want := range []string{`ENTRYPOINT ["/usr/local/bin/agent-runner"]`, "USER 1000:1000", "WORKDIR /workspace/group", "ENV HOME=/home/agent", "ENV PATH=/usr/local/bin:/bin"} {
		if !slices.Contains(eng.changes, want) {
			t.Errorf("changes %q; want %q", eng.changes, want)
		}
	}
	if fs := readTar(t, eng.lastTar); fs["usr/local/bin/agent-runner"].data != "v1" {
		t.Errorf("imported runner %q; want v1", fs["usr/local/bin/agent-runner"].data)
	}

	imported, err = EnsureImage(ctx, eng, "bridged-agent:test", bins)
	if err != nil || imported || eng.imports != 1 {
		t.Errorf("unchanged EnsureImage = %v, %v (%d imports); want no import", imported, err, eng.imports)
	}

	if err := os.WriteFile(bins[Entrypoint], []byte("v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	imported, err = EnsureImage(ctx, eng, "bridged-agent:test", bins)
	if err != nil || !imported || eng.imports != 2 {
		t.Errorf("changed EnsureImage = %v, %v (%d imports); want a new import", imported, err, eng.imports)
	}
}

func TestImportError(t *testing.T) {
	eng := &fakeEngine{progress: `{"status":"working"}` + "\n" + `{"errorDetail":{"message":"disk full"},"error":"disk full"}` + "\n"}
	err := Build(context.Background(), eng, "bridged-agent:test", map[string]string{Entrypoint: writeBin(t, "r", "x")})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Build = %v; want the engine's error", err)
	}
}

func TestContentHash(t *testing.T) {
	a := writeBin(t, "a", "same")
	b := writeBin(t, "b", "same")
	c := writeBin(t, "c", "other")
	h := func(m map[string]string) string {
		s, err := ContentHash(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if h(map[string]string{Entrypoint: a}) != h(map[string]string{Entrypoint: b}) {
		t.Error("equal content, different hash")
	}
	if h(map[string]string{Entrypoint: a}) == h(map[string]string{Entrypoint: c}) {
		t.Error("different content, equal hash")
	}
	if h(map[string]string{Entrypoint: a}) == h(map[string]string{"/usr/local/bin/claude": a}) {
		t.Error("different path, equal hash")
	}
	if _, err := ContentHash(map[string]string{Entrypoint: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("missing binary: no error")
	}
}

func TestWriteRootfsBusybox(t *testing.T) {
	bins := map[string]string{Entrypoint: writeBin(t, "runner", "RUNNER"), Busybox: writeBin(t, "busybox", "BUSYBOX")}
	var buf bytes.Buffer
	if err := WriteRootfs(&buf, bins); err != nil {
		t.Fatalf("WriteRootfs: %v", err)
	}
	fs := readTar(t, buf.Bytes())
	if e := fs["bin/busybox"]; e.data != "BUSYBOX" || e.hdr.Mode != 0o755 {
		t.Errorf("bin/busybox: data %q mode %o; want the binary, 0755", e.data, e.hdr.Mode)
	}
	for _, a := range []string{"sh", "ls", "cat", "ln", "rm", "mv", "mkdir", "mkfifo", "echo", "printf", "dd",
		"head", "id", "stat", "readlink", "find", "touch", "sleep", "seq", "true", "false", "test", "[", "wc", "grep", "chmod", "env"} {
		e, ok := fs["bin/"+a]
		if !ok || e.hdr.Typeflag != tar.TypeSymlink || e.hdr.Linkname != "busybox" {
			t.Errorf("bin/%s: %+v; want a symbolic link to busybox", a, e.hdr)
		}
	}

	// Without busybox there is no /bin at all.
	buf.Reset()
	if err := WriteRootfs(&buf, map[string]string{Entrypoint: bins[Entrypoint]}); err != nil {
		t.Fatal(err)
	}
	if _, ok := readTar(t, buf.Bytes())["bin/sh"]; ok {
		t.Error("bin/sh in an image without busybox")
	}
}

func TestContentHashBusybox(t *testing.T) {
	runner := writeBin(t, "runner", "RUNNER")
	h := func(m map[string]string) string {
		s, err := ContentHash(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	without := h(map[string]string{Entrypoint: runner})
	v1 := h(map[string]string{Entrypoint: runner, Busybox: writeBin(t, "bb1", "busybox 1")})
	v2 := h(map[string]string{Entrypoint: runner, Busybox: writeBin(t, "bb2", "busybox 2")})
	if without == v1 || v1 == v2 {
		t.Errorf("hashes without busybox %s, busybox 1 %s, busybox 2 %s; want all different", without, v1, v2)
	}
}

func TestCheckBusybox(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "busybox")
	if err := CheckBusybox(missing); err == nil || !strings.Contains(err.Error(), "apt-get install busybox-static") {
		t.Errorf("CheckBusybox(missing) = %v; want an error naming apt-get install busybox-static", err)
	}
	if err := CheckBusybox(writeBin(t, "busybox", "#!/bin/sh\n")); err == nil || !strings.Contains(err.Error(), "apt-get install busybox-static") {
		t.Errorf("CheckBusybox(script) = %v; want an error naming apt-get install busybox-static", err)
	}
	// A dynamically linked executable: the test binary itself usually is
	// not, so look for one on the host.
	for _, p := range []string{"/bin/ls", "/usr/bin/env"} {
		if f, err := elf.Open(p); err == nil {
			dynamic := false
			for _, prog := range f.Progs {
				dynamic = dynamic || prog.Type == elf.PT_INTERP
			}
			f.Close()
			if dynamic {
				if err := CheckBusybox(p); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
					t.Errorf("CheckBusybox(%s) = %v; want refused as dynamically linked", p, err)
				}
				break
			}
		}
	}
	if _, err := os.Stat(HostBusybox); err == nil {
		if err := CheckBusybox(HostBusybox); err != nil {
			t.Errorf("CheckBusybox(%s) = %v; want the installed busybox accepted", HostBusybox, err)
		}
	}
}
