package container

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// fakeProxy opens a directory per container and records the closes.
type fakeProxy struct {
	dir    string
	opened []string
	closed []string
	err    error
}

func (p *fakeProxy) Open(group, name string) (string, func(), error) {
	if p.err != nil {
		return "", nil, p.err
	}
	p.opened = append(p.opened, group+"/"+name)
	return filepath.Join(p.dir, name), func() { p.closed = append(p.closed, name) }, nil
}

func (p *fakeProxy) Auth() string { return ipc.APIAuthOAuth }

func newBuilder(t *testing.T) SpecBuilder {
	t.Helper()
	uid, gid := testUser()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	return SpecBuilder{
		Home:          newHome(t),
		AssistantName: "Robo",
		Timezone:      berlin,
		Image:         "bridged-agent:test",
		Instance:      "inst-1",
		Limits:        Limits{MemoryBytes: 512 << 20, CPUs: 1, Pids: 128},
		Secrets:       map[string]string{"ANTHROPIC_API_KEY": testSecret},
		UID:           uid,
		GID:           gid,
	}
}

var mainGroup = store.Group{Chat: "local:main", Name: "Main", Folder: "main", IsMain: true}

func TestBuildSpec(t *testing.T) {
	b := newBuilder(t)
	input := ipc.RunInput{Prompt: "hello", Group: "main", Chat: "local:main", IsMain: true, AssistantName: "Robo"}
	spec, release, err := b.Build(zerolog.Nop(), mainGroup, "bridged-main-1", input)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	release()
	l := b.Home.Layout()
	if spec.Name != "bridged-main-1" || spec.Image != "bridged-agent:test" || spec.Group != "main" ||
		spec.Instance != "inst-1" || spec.Home != HomeLabel(l.Dir) || spec.Limits != b.Limits {
		t.Fatalf("spec: got %+v", spec)
	}
	if want := UserSpec(b.UID, b.GID); spec.User != want {
		t.Errorf("user: got %q; want %q", spec.User, want)
	}
	if want := append(Mounts(l, "main", true, store.Sees{}, nil), PolicyMount(l, "main")); !slices.Equal(spec.Mounts, want) {
		t.Errorf("mounts: got %+v; want %+v", spec.Mounts, want)
	}
	if !slices.Equal(spec.Env, []string{"TZ=Europe/Berlin"}) {
		t.Errorf("env: got %q; want only the time zone", spec.Env)
	}
	if !slices.Equal(spec.Forbidden, []string{testSecret}) {
		t.Errorf("forbidden: got %q; want the credential", spec.Forbidden)
	}
	if spec.Input != input {
		t.Errorf("input: got %+v; want %+v", spec.Input, input)
	}
	if err := checkSpec(spec); err != nil {
		t.Errorf("the built spec is refused: %v", err)
	}
	for _, p := range []string{
		filepath.Join(l.GroupDir("main"), "CLAUDE.md"),
		filepath.Join(l.GlobalDir(), "CLAUDE.md"),
		filepath.Join(l.ClaudeDir("main"), SettingsName),
		filepath.Join(l.IPCDir("main"), ipc.InputDir),
	} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("prepared: %v", err)
		}
	}
	if err := b.CheckMounts(&spec); err != nil {
		t.Errorf("CheckMounts of fresh directories: %v", err)
	}
}

func TestBuildSpecOtherGroup(t *testing.T) {
	b := newBuilder(t)
	b.Timezone = time.UTC
	g := store.Group{Chat: "local:fam", Name: "Family", Folder: "fam"}
	spec, release, err := b.Build(zerolog.Nop(), g, "bridged-fam-1", ipc.RunInput{Prompt: "hi", Group: "fam"})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	release()
	l := b.Home.Layout()
	if want := append(Mounts(l, "fam", false, store.Sees{}, nil), PolicyMount(l, "fam")); !slices.Equal(spec.Mounts, want) {
		t.Errorf("mounts: got %+v; want %+v (no groups dir, global read-only)", spec.Mounts, want)
	}
	if _, err := os.Stat(filepath.Join(l.GroupDir("fam"), "CLAUDE.md")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a non-main group got the main template: %v", err)
	}
	if !slices.Equal(spec.Env, []string{"TZ=UTC"}) {
		t.Errorf("env: got %q", spec.Env)
	}
}

func TestBuildSpecRefusesBadFolder(t *testing.T) {
	b := newBuilder(t)
	g := store.Group{Chat: "local:x", Folder: "../escape"}
	if _, _, err := b.Build(zerolog.Nop(), g, "bridged-x-1", ipc.RunInput{}); err == nil {
		t.Fatal("Build of folder ../escape: got nil error")
	}
}

// The container gets its own proxy socket, read-only, and the proxy is
// released by the caller.
func TestBuildSpecProxySocket(t *testing.T) {
	b := newBuilder(t)
	fp := &fakeProxy{dir: filepath.Join(b.Home.Layout().DataDir(), "proxy")}
	b.APIProxy, b.Network = fp, "none"
	spec, release, err := b.Build(zerolog.Nop(), mainGroup, "bridged-main-2", ipc.RunInput{Prompt: "hi", Group: "main"})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	want := Mount{Source: filepath.Join(fp.dir, "bridged-main-2"), Target: ipc.ContainerProxyDir, ReadOnly: true}
	if !slices.Contains(spec.Mounts, want) {
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
	if !slices.Equal(fp.opened, []string{"main/bridged-main-2"}) || len(fp.closed) != 0 {
		t.Fatalf("opened %q, closed %q; want one socket open", fp.opened, fp.closed)
	}
	release()
	if !slices.Equal(fp.closed, []string{"bridged-main-2"}) {
		t.Fatalf("closed %q after release", fp.closed)
	}

	fp.err = errors.New("no room")
	if _, _, err := b.Build(zerolog.Nop(), mainGroup, "bridged-main-3", ipc.RunInput{}); err == nil || !strings.Contains(err.Error(), "credential proxy") {
		t.Fatalf("Build with a failing proxy: got %v; want a credential proxy error", err)
	}
}

func TestBuildSpecExtraMounts(t *testing.T) {
	f := newAllowlistFixture(t, "")
	a, err := LoadAllowlist(f.file, f.home)
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(t)
	g := mainGroup
	g.ContainerConfig.ExtraMounts = []store.MountRequest{
		{HostPath: filepath.Join(f.docs, "report"), ReadWrite: true},
		{HostPath: filepath.Join(f.outside, "secret")},
	}
	spec, release, err := b.Build(zerolog.Nop(), g, "bridged-main-4", ipc.RunInput{})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if n := len(spec.Mounts); n != len(Mounts(b.Home.Layout(), "main", true, store.Sees{}, nil))+1 {
		t.Fatalf("with no allowlist: got %d mounts; want no extra ones", n)
	}

	b.Allowlist = a
	spec, release, err = b.Build(zerolog.Nop(), g, "bridged-main-5", ipc.RunInput{})
	if err != nil {
		t.Fatal(err)
	}
	release()
	var extra []Mount
	for _, m := range spec.Mounts {
		if strings.HasPrefix(m.Target, ContainerExtraDir) {
			extra = append(extra, m)
		}
	}
	report := filepath.Join(f.docs, "report")
	if len(extra) != 1 || extra[0].Source != report || extra[0].Target != ContainerExtraDir+"/report" || !extra[0].ReadOnly {
		t.Fatalf("extra mounts: got %+v; want only %s, read-only (its root is), at %s/report (the one outside the roots refused)", extra, report, ContainerExtraDir)
	}
	for _, m := range extra {
		if strings.HasPrefix(m.Source, f.outside) {
			t.Fatalf("a mount outside the allowed roots was granted: %+v", m)
		}
	}
}

// A group directory an agent swapped for a link after Prepare fails the
// mount check.
func TestCheckMountsRefusesLink(t *testing.T) {
	b := newBuilder(t)
	spec, release, err := b.Build(zerolog.Nop(), mainGroup, "bridged-main-6", ipc.RunInput{})
	if err != nil {
		t.Fatal(err)
	}
	release()
	dir := b.Home.Layout().GroupDir("main")
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), dir); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckMounts(&spec); err == nil || !strings.Contains(err.Error(), "refused to start") {
		t.Fatalf("CheckMounts over a linked group dir: got %v; want a refusal", err)
	}
	// Preparing again moves the link aside.
	if err := b.Prepare(mainGroup); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckMounts(&spec); err != nil {
		t.Fatalf("CheckMounts after Prepare: %v", err)
	}
}

// The main group's container gets a read-only mount of each folder it
// sees, the folder made when its group has not run yet, and every source
// passes the mount check; a folder it does not see is in no mount.
func TestBuildSpecMainSees(t *testing.T) {
	b := newBuilder(t)
	l := b.Home.Layout()
	g := mainGroup
	g.Sees = store.Sees{Folders: []store.Folder{"family"}}
	input := ipc.RunInput{Prompt: "hello", Group: "main", Chat: "local:main", IsMain: true, AssistantName: "Robo"}
	spec, release, err := b.Build(zerolog.Nop(), g, "bridged-main-1", input)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	release()
	want := Mount{Source: l.GroupDir("family"), Target: ContainerGroupsDir + "/family", ReadOnly: true}
	if !slices.Contains(spec.Mounts, want) {
		t.Errorf("mounts %+v; want %+v", spec.Mounts, want)
	}
	for _, m := range spec.Mounts {
		if m.Source == l.GroupsDir() || m.Source == l.GroupDir("work") {
			t.Errorf("mounts %s at %s; want only the folders main sees", m.Source, m.Target)
		}
	}
	if fi, err := os.Lstat(l.GroupDir("family")); err != nil || !fi.IsDir() {
		t.Fatalf("the seen folder of a group that has not run: %v; want a directory made", err)
	}
	if err := b.CheckMounts(&spec); err != nil {
		t.Errorf("CheckMounts: %v", err)
	}
}
