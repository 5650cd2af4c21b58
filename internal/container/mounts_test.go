package container

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

// newHome is a bridged home in a temporary directory.
func newHome(t *testing.T) *home.Home {
	t.Helper()
	h, err := home.New(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Layout().Prepare(); err != nil {
		t.Fatal(err)
	}
	return h
}

// testUser is the uid:gid test containers run as: the daemon's default
// when the tests run as root, else the tests' own.
func testUser() (int, int) {
	if os.Geteuid() == 0 {
		return 61000, 61000
	}
	return os.Geteuid(), os.Getegid()
}

func TestMounts(t *testing.T) {
	p := home.Layout{Dir: "/srv/bridged"}
	extra := []Mount{{Source: "/home/bob/projects/app", Target: "/workspace/extra/app", ReadOnly: true}}
	base := func(global bool) []Mount {
		return []Mount{
			{Source: "/srv/bridged/groups/family", Target: "/workspace/group"},
			{Source: "/srv/bridged/groups/global", Target: "/workspace/global", ReadOnly: !global},
			{Source: "/srv/bridged/data/sessions/family/.claude", Target: "/home/agent/.claude"},
			{Source: "/srv/bridged/data/ipc/family", Target: "/workspace/ipc"},
		}
	}
	own := Mount{Source: "/srv/bridged/groups/family", Target: "/workspace/groups/family"}
	tests := []struct {
		name   string
		isMain bool
		sees   store.Sees
		extra  []Mount
		want   []Mount
	}{
		{
			name: "non-main",
			want: base(false),
		},
		{
			name: "a group that is not main sees no other group whatever its setting",
			sees: store.SeesAll,
			want: base(false),
		},
		{
			name:   "main seeing all gets global read-write and every group read-only but its own",
			isMain: true,
			sees:   store.SeesAll,
			extra:  extra,
			want: append(base(true),
				Mount{Source: "/srv/bridged/groups", Target: "/workspace/groups", ReadOnly: true},
				own,
				extra[0]),
		},
		{
			name:   "main seeing none gets only its own folder under /workspace/groups",
			isMain: true,
			extra:  extra,
			want:   append(base(true), own, extra[0]),
		},
		{
			name:   "main seeing some gets each of them read-only, not the groups directory",
			isMain: true,
			sees:   store.Sees{Folders: []store.Folder{"friends", "work"}},
			want: append(base(true),
				Mount{Source: "/srv/bridged/groups/friends", Target: "/workspace/groups/friends", ReadOnly: true},
				Mount{Source: "/srv/bridged/groups/work", Target: "/workspace/groups/work", ReadOnly: true},
				own),
		},
		{
			name:   "main's own folder and a name that is not a folder are left out of the list",
			isMain: true,
			sees:   store.Sees{Folders: []store.Folder{"..", "family", "global", "work"}},
			want: append(base(true),
				Mount{Source: "/srv/bridged/groups/work", Target: "/workspace/groups/work", ReadOnly: true},
				own),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Mounts(p, "family", tt.isMain, tt.sees, tt.extra)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
			for _, m := range got {
				if m.Source == p.StoreDir() || m.Source == p.DataDir() || m.Source == p.Dir || strings.HasPrefix(m.Source, filepath.Join(p.DataDir(), "logs")) {
					t.Errorf("mounts %s, which must never be mounted", m.Source)
				}
				if strings.HasPrefix(m.Target, ContainerGroupsDir) && m.Source != p.GroupDir("family") && !m.ReadOnly {
					t.Errorf("mounts %s read-write at %s: main sees other groups read-only", m.Source, m.Target)
				}
			}
		})
	}
}

func owner(t *testing.T, path string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

func TestPrepareGroupDirs(t *testing.T) {
	h := newHome(t)
	p := h.Layout()
	// Something the host wrote earlier, and a symlink the agent planted
	// pointing outside its folder.
	outside := filepath.Join(p.Dir, "outside.txt")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(p.GroupDir("family"), 0o755); err != nil {
		t.Fatal(err)
	}
	memory := filepath.Join(p.GroupDir("family"), "CLAUDE.md")
	if err := os.WriteFile(memory, []byte("# family"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(p.GroupDir("family"), "link")); err != nil {
		t.Fatal(err)
	}

	if err := PrepareGroupDirs(h, "family", true, 4242, 4343); err != nil {
		t.Fatalf("PrepareGroupDirs: %v", err)
	}
	dirs := []string{
		p.GroupDir("family"), p.GlobalDir(), p.ClaudeDir("family"), p.IPCDir("family"),
		filepath.Join(p.IPCDir("family"), "input"), filepath.Join(p.IPCDir("family"), "requests"),
		filepath.Join(p.IPCDir("family"), "responses"),
	}
	for _, d := range dirs {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: got %v; want a directory", d, err)
		}
	}
	if len(h.Incidents()) != 0 {
		t.Errorf("incidents %v; want none for a clean home", h.Incidents())
	}
	if os.Geteuid() != 0 {
		t.Log("not root: ownership not checked")
		return
	}
	for _, path := range append(dirs, memory) {
		if u, g := owner(t, path); u != 4242 || g != 4343 {
			t.Errorf("%s owned by %d:%d; want 4242:4343", path, u, g)
		}
	}
	if u, _ := owner(t, outside); u != 0 {
		t.Errorf("symlink target outside the folder owned by %d; want 0 (symlinks must not be followed)", u)
	}
	if u, _ := owner(t, p.Dir); u != 0 {
		t.Errorf("home owned by %d; want it untouched", u)
	}
}

// The main agent can rewrite groups/: a group folder (or an IPC
// subdirectory) replaced by a symlink into store/ is moved aside and
// recreated as a real directory before anything is mounted, and reported.
func TestPrepareGroupDirsReplacesSymlinkedDirs(t *testing.T) {
	h := newHome(t)
	p := h.Layout()
	db := filepath.Join(p.StoreDir(), "bridged.db")
	if err := os.WriteFile(db, []byte("database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../store", p.GroupDir("other")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(p.IPCDir("other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p.StoreDir(), filepath.Join(p.IPCDir("other"), "requests")); err != nil {
		t.Fatal(err)
	}

	if err := PrepareGroupDirs(h, "other", false, 4242, 4343); err != nil {
		t.Fatalf("PrepareGroupDirs: %v", err)
	}
	for _, d := range []string{p.GroupDir("other"), filepath.Join(p.IPCDir("other"), "requests")} {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: got %v; want a real directory", d, err)
		}
		if err := p.CheckMountSource(d); err != nil {
			t.Errorf("CheckMountSource(%s) = %v; want nil", d, err)
		}
	}
	for _, m := range Mounts(p, "other", false, store.Sees{}, nil) {
		if err := p.CheckMountSource(m.Source); err != nil {
			t.Errorf("CheckMountSource(%s) = %v; want nil after prepare", m.Source, err)
		}
	}
	inc := h.Incidents()
	if len(inc) != 2 {
		t.Fatalf("incidents %v; want two", inc)
	}
	for _, in := range inc {
		if in.Group != "other" || in.Found != "symlink" || !strings.Contains(in.String(), "symlink") {
			t.Errorf("incident %+v; want a symlink in group other", in)
		}
	}
	if data, err := os.ReadFile(db); err != nil || string(data) != "database" {
		t.Errorf("store/bridged.db = %q, %v; want it untouched", data, err)
	}
	if os.Geteuid() == 0 {
		if u, _ := owner(t, db); u != 0 {
			t.Errorf("store/bridged.db owned by %d; want it untouched", u)
		}
	}
}

// Only the main group writes the global memory, so only its start hands
// it over: a tree main put there never costs another group's start.
func TestPrepareGroupDirsWalksGlobalForMainOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	h := newHome(t)
	p := h.Layout()
	note := filepath.Join(p.GlobalDir(), "note.md")
	if err := os.MkdirAll(p.GlobalDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(note, []byte("shared"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := PrepareGroupDirs(h, "family", false, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	if u, _ := owner(t, note); u != 0 {
		t.Errorf("a non-main group's start gave the global memory to %d; want it left to main's", u)
	}
	if err := PrepareGroupDirs(h, "main", true, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	if u, g := owner(t, note); u != 4242 || g != 4343 {
		t.Errorf("after main's start the global memory is owned by %d:%d; want 4242:4343", u, g)
	}
}

func TestPrepareGroupDirsRefusesBadFolder(t *testing.T) {
	h := newHome(t)
	for _, f := range []string{"../escape", "global", ""} {
		if err := PrepareGroupDirs(h, f, false, 1000, 1000); !errors.Is(err, home.ErrBadFolder) {
			t.Errorf("PrepareGroupDirs(%q) = %v; want ErrBadFolder", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(h.Layout().Dir, "escape")); err == nil {
		t.Error("a directory was created outside groups/")
	}
}

func TestEnsureSettings(t *testing.T) {
	h := newHome(t)
	p := h.Layout()
	settings := filepath.Join(p.ClaudeDir("family"), "settings.json")
	if err := PrepareGroupDirs(h, "family", true, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSettings(h, "family", 4242, 4343); err != nil {
		t.Fatalf("EnsureSettings: %v", err)
	}
	data, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Env map[string]string `json:"env"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("settings.json is not JSON: %v", err)
	}
	for _, k := range []string{"CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS", "CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD"} {
		if s.Env[k] != "1" {
			t.Errorf("env %s = %q; want \"1\"", k, s.Env[k])
		}
	}
	if os.Geteuid() == 0 {
		if u, g := owner(t, settings); u != 4242 || g != 4343 {
			t.Errorf("settings.json owned by %d:%d; want 4242:4343", u, g)
		}
	}

	// The user edits it; the next run must not undo that.
	edited := []byte(`{"env":{"MY_SETTING":"kept"}}`)
	if err := os.WriteFile(settings, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSettings(h, "family", 4242, 4343); err != nil {
		t.Fatalf("EnsureSettings again: %v", err)
	}
	got, _ := os.ReadFile(settings)
	if string(got) != string(edited) {
		t.Errorf("settings.json = %s; want the user's edit %s", got, edited)
	}
	entries, _ := os.ReadDir(p.ClaudeDir("family"))
	if len(entries) != 1 {
		t.Errorf("got %d entries in .claude; want only settings.json (no temp files left)", len(entries))
	}
	if err := EnsureSettings(h, "../x", 4242, 4343); !errors.Is(err, home.ErrBadFolder) {
		t.Errorf("EnsureSettings(../x) = %v; want ErrBadFolder", err)
	}
}

// A settings.json the agent made a dangling symlink is left alone: nothing
// is created at its target.
func TestEnsureSettingsDanglingLink(t *testing.T) {
	h := newHome(t)
	p := h.Layout()
	target := filepath.Join(p.StoreDir(), "planted.json")
	if err := os.MkdirAll(p.ClaudeDir("family"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(p.ClaudeDir("family"), "settings.json")); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSettings(h, "family", 4242, 4343); err != nil {
		t.Fatalf("EnsureSettings: %v", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("link target: %v; want nothing created", err)
	}
}

// No container can write a directory that holds another mount's source:
// renaming an entry needs write access to its parent, and a source renamed
// and replaced by a link between the daemon's check and the engine's mount
// would be followed. Every read-write source of every group's container is
// checked against every source of every container.
func TestMountsNoWritableParentOfASource(t *testing.T) {
	p := home.Layout{Dir: "/srv/bridged"}
	all := map[string][]Mount{
		"main":      Mounts(p, "main", true, store.SeesAll, nil),
		"main-some": Mounts(p, "main", true, store.Sees{Folders: []store.Folder{"family", "work"}}, nil),
		"main-none": Mounts(p, "main", true, store.Sees{}, nil),
		"family":    Mounts(p, "family", false, store.Sees{}, nil),
		"work":      Mounts(p, "work", false, store.Sees{}, nil),
	}
	for g, ms := range all {
		for _, w := range ms {
			if w.ReadOnly {
				continue
			}
			for h, others := range all {
				for _, o := range others {
					if strings.HasPrefix(o.Source, w.Source+"/") {
						t.Errorf("%s's container writes %s (at %s), the parent of %s's mount source %s", g, w.Source, w.Target, h, o.Source)
					}
				}
			}
		}
	}
}
