package container

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/home"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadAllowlistMissingFileAllowsNothing(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadAllowlist(filepath.Join(dir, "nope.json"))
	if err != nil {
		t.Fatalf("LoadAllowlist: got %v; want no error for a missing file", err)
	}
	if !a.Empty() {
		t.Error("Empty() = false; want true")
	}
	mounts, err := a.CheckAll([]MountRequest{{HostPath: dir}}, true)
	if len(mounts) != 0 || !errors.Is(err, ErrMountRefused) {
		t.Errorf("got %v, %v; want no mounts and ErrMountRefused", mounts, err)
	}
}

func TestLoadAllowlistInvalid(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, data, want string }{
		{"bad json", `{"allowedRoots": [`, "invalid JSON"},
		{"unknown field", `{"allowedRoots": [], "nonMainReadOnlyy": false}`, "unknown field"},
		{"wrong type", `{"allowedRoots": {}}`, "invalid JSON"},
		{"root without path", `{"allowedRoots": [{"allowReadWrite": true}]}`, "no path"},
		{"relative root", `{"allowedRoots": [{"path": "projects"}]}`, "not an absolute path"},
		{"bad pattern", `{"allowedRoots": [], "blockedPatterns": ["[x"]}`, "blockedPatterns[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".json")
			writeFile(t, file, tt.data)
			_, err := LoadAllowlist(file)
			if err == nil {
				t.Fatal("got no error; want one")
			}
			if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q; want it to name %s and say %q", err, file, tt.want)
			}
		})
	}
}

// allowlistFixture lays out:
//
//	user/projects/{app, app/.env.local, notes.environment, .ssh, keys/prod.pem, link-app → app, escape → ../../outside}
//	user/docs/report            (read-only root)
//	outside/secret
//	bridged/                    (the bridged home, inside projects: refused)
//	config/allowlist.json
type allowlistFixture struct {
	dir, projects, docs, outside, home, file string
}

func newAllowlistFixture(t *testing.T, nonMainReadOnly string) allowlistFixture {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := allowlistFixture{
		dir:      dir,
		projects: filepath.Join(dir, "user", "projects"),
		docs:     filepath.Join(dir, "user", "docs"),
		outside:  filepath.Join(dir, "outside"),
		file:     filepath.Join(dir, "user", "projects", "config", "allowlist.json"),
	}
	f.home = filepath.Join(f.projects, "bridged")
	mkdirs(t, filepath.Join(f.projects, "app"), filepath.Join(f.projects, "notes.environment"),
		filepath.Join(f.projects, ".ssh"), filepath.Join(f.projects, "keys"), filepath.Join(f.docs, "report"),
		filepath.Join(f.outside, "secret"), filepath.Join(f.home, "store"))
	writeFile(t, filepath.Join(f.projects, "app", ".env.local"), "TOKEN=x")
	writeFile(t, filepath.Join(f.projects, "keys", "prod.pem"), "key")
	if err := os.Symlink(filepath.Join(f.projects, "app"), filepath.Join(f.projects, "link-app")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.outside, "secret"), filepath.Join(f.projects, "escape")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", filepath.Join(dir, "user"))
	writeFile(t, f.file, `{
  "allowedRoots": [
    {"path": "~/projects", "allowReadWrite": true, "description": "code"},
    {"path": "`+f.docs+`", "allowReadWrite": false},
    {"path": "/does/not/exist", "allowReadWrite": true}
  ],
  "blockedPatterns": ["*.pem"]`+nonMainReadOnly+`
}`)
	return f
}

func TestAllowlistCheck(t *testing.T) {
	f := newAllowlistFixture(t, "")
	a, err := LoadAllowlist(f.file, f.home)
	if err != nil {
		t.Fatalf("LoadAllowlist: %v", err)
	}
	app := filepath.Join(f.projects, "app")
	tests := []struct {
		name    string
		req     MountRequest
		isMain  bool
		want    Mount
		refused string // substring of the refusal; "" means accepted
	}{
		{name: "main read-write", req: MountRequest{HostPath: app, ReadWrite: true}, isMain: true,
			want: Mount{Source: app, Target: "/workspace/extra/app"}},
		{name: "tilde expanded, named", req: MountRequest{HostPath: "~/projects/app", ContainerPath: "code"}, isMain: true,
			want: Mount{Source: app, Target: "/workspace/extra/code", ReadOnly: true}},
		{name: "non-main forced read-only", req: MountRequest{HostPath: app, ReadWrite: true},
			want: Mount{Source: app, Target: "/workspace/extra/app", ReadOnly: true}},
		{name: "read-only root stays read-only for main", req: MountRequest{HostPath: filepath.Join(f.docs, "report"), ReadWrite: true}, isMain: true,
			want: Mount{Source: filepath.Join(f.docs, "report"), Target: "/workspace/extra/report", ReadOnly: true}},
		{name: "symlink inside the root resolved", req: MountRequest{HostPath: filepath.Join(f.projects, "link-app")}, isMain: true,
			want: Mount{Source: app, Target: "/workspace/extra/app", ReadOnly: true}},
		{name: "substring that is not the pattern", req: MountRequest{HostPath: filepath.Join(f.projects, "notes.environment")}, isMain: true,
			want: Mount{Source: filepath.Join(f.projects, "notes.environment"), Target: "/workspace/extra/notes.environment", ReadOnly: true}},
		{name: "symlink escaping the root", req: MountRequest{HostPath: filepath.Join(f.projects, "escape")}, isMain: true, refused: "not under an allowed root"},
		{name: "outside every root", req: MountRequest{HostPath: filepath.Join(f.outside, "secret")}, isMain: true, refused: "not under an allowed root"},
		{name: "blocked .ssh", req: MountRequest{HostPath: filepath.Join(f.projects, ".ssh")}, isMain: true, refused: `".ssh"`},
		{name: "blocked .env.local", req: MountRequest{HostPath: filepath.Join(f.projects, "app", ".env.local")}, isMain: true, refused: `".env"`},
		{name: "user's glob pattern", req: MountRequest{HostPath: filepath.Join(f.projects, "keys", "prod.pem")}, isMain: true, refused: `"*.pem"`},
		{name: "dot-dot container name", req: MountRequest{HostPath: app, ContainerPath: "../escape"}, isMain: true, refused: "container name"},
		{name: "dot-dot alone", req: MountRequest{HostPath: app, ContainerPath: ".."}, isMain: true, refused: "container name"},
		{name: "absolute container name", req: MountRequest{HostPath: app, ContainerPath: "/etc"}, isMain: true, refused: "container name"},
		{name: "nested container name", req: MountRequest{HostPath: app, ContainerPath: "a/b"}, isMain: true, refused: "container name"},
		{name: "container name of 64", req: MountRequest{HostPath: app, ContainerPath: strings.Repeat("c", 64)}, isMain: true,
			want: Mount{Source: app, Target: "/workspace/extra/" + strings.Repeat("c", 64), ReadOnly: true}},
		{name: "container name of 65", req: MountRequest{HostPath: app, ContainerPath: strings.Repeat("c", 65)}, isMain: true, refused: "at most 64"},
		{name: "missing path", req: MountRequest{HostPath: filepath.Join(f.projects, "nope")}, isMain: true, refused: "does not exist"},
		{name: "relative path", req: MountRequest{HostPath: "projects/app"}, isMain: true, refused: "absolute"},
		{name: "empty path", req: MountRequest{}, isMain: true, refused: "no host path"},
		{name: "inside the bridged home", req: MountRequest{HostPath: filepath.Join(f.home, "store")}, isMain: true, refused: "never mounted"},
		{name: "containing the bridged home", req: MountRequest{HostPath: f.projects}, isMain: true, refused: "never mounted"},
		{name: "the allowlist's directory", req: MountRequest{HostPath: filepath.Dir(f.file)}, isMain: true, refused: "never mounted"},
		{name: "the allowlist itself", req: MountRequest{HostPath: f.file}, isMain: true, refused: "never mounted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Check(tt.req, tt.isMain)
			if tt.refused != "" {
				if !errors.Is(err, ErrMountRefused) || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("got %+v, %v; want a refusal saying %q", got, err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v; want %+v", err, tt.want)
			}
			if got != tt.want {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestAllowlistNonMainMayWrite(t *testing.T) {
	f := newAllowlistFixture(t, `, "nonMainReadOnly": false`)
	a, err := LoadAllowlist(f.file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Check(MountRequest{HostPath: filepath.Join(f.projects, "app"), ReadWrite: true}, false)
	if err != nil || got.ReadOnly {
		t.Errorf("got %+v, %v; want a read-write mount", got, err)
	}
	got, err = a.Check(MountRequest{HostPath: filepath.Join(f.projects, "app")}, false)
	if err != nil || !got.ReadOnly {
		t.Errorf("got %+v, %v; want read-only when not asked for read-write", got, err)
	}
}

func TestAllowlistCheckAll(t *testing.T) {
	f := newAllowlistFixture(t, "")
	a, err := LoadAllowlist(f.file)
	if err != nil {
		t.Fatal(err)
	}
	reqs := []MountRequest{
		{HostPath: filepath.Join(f.projects, "app")},
		{HostPath: filepath.Join(f.projects, "link-app")}, // same target name
		{HostPath: filepath.Join(f.projects, ".ssh")},
		{HostPath: filepath.Join(f.docs, "report")},
	}
	// app holds .env.local: with masks it is mounted with the file hidden.
	l := home.Layout{Dir: t.TempDir()}
	mounts, err := a.WithMasks(l).CheckAll(reqs, true)
	if len(mounts) != 3 || mounts[0].Target != "/workspace/extra/app" || mounts[2].Target != "/workspace/extra/report" ||
		mounts[1] != (Mount{Source: filepath.Join(l.EmptyDir(), "file"), Target: "/workspace/extra/app/.env.local", ReadOnly: true}) {
		t.Errorf("got %+v; want app, a mask over app/.env.local, and report", mounts)
	}
	if !errors.Is(err, ErrMountRefused) || !strings.Contains(err.Error(), "already mounted") || !strings.Contains(err.Error(), ".ssh") {
		t.Errorf("got %v; want refusals for the duplicate and .ssh", err)
	}
	// Without masks, a directory holding a blocked name is refused
	// rather than exposed.
	mounts, err = a.CheckAll(reqs, true)
	if len(mounts) != 1 || mounts[0].Target != "/workspace/extra/report" {
		t.Errorf("got %+v; want only report", mounts)
	}
	if !errors.Is(err, ErrMountRefused) || !strings.Contains(err.Error(), ".env.local inside it matches a blocked pattern") {
		t.Errorf("got %v; want app refused for its .env.local", err)
	}
}

func TestComponentMatches(t *testing.T) {
	tests := []struct {
		comp, pat string
		want      bool
	}{
		{".env", ".env", true},
		{".env.local", ".env", true},
		{"prod.env", ".env", true},
		{".environment", ".env", false},
		{"credentials", "credentials", true},
		{"aws_credentials.json", "credentials", true},
		{"nocredentialsx", "credentials", false},
		{"id_rsa.pub", "id_rsa", true},
		{"my-private_key.pem", "private_key", true},
		{"key.pem", "*.pem", true},
		{"pem", "*.pem", false},
		{".ssh", ".ssh", true},
		{"x.sshd", ".ssh", false},
	}
	for _, tt := range tests {
		if got := componentMatches(tt.comp, tt.pat); got != tt.want {
			t.Errorf("componentMatches(%q, %q) = %v; want %v", tt.comp, tt.pat, got, tt.want)
		}
	}
}
