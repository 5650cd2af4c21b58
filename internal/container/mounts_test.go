package container

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

func TestMounts(t *testing.T) {
	p := Paths{Home: "/srv/bridged"}
	extra := []Mount{{Source: "/home/bob/projects/app", Target: "/workspace/extra/app", ReadOnly: true}}
	tests := []struct {
		name   string
		isMain bool
		extra  []Mount
		want   []Mount
	}{
		{
			name: "non-main",
			want: []Mount{
				{Source: "/srv/bridged/groups/family", Target: "/workspace/group"},
				{Source: "/srv/bridged/groups/global", Target: "/workspace/global", ReadOnly: true},
				{Source: "/srv/bridged/data/sessions/family/.claude", Target: "/home/agent/.claude"},
				{Source: "/srv/bridged/data/ipc/family", Target: "/workspace/ipc"},
			},
		},
		{
			name:   "main gets global read-write and every group",
			isMain: true,
			extra:  extra,
			want: []Mount{
				{Source: "/srv/bridged/groups/family", Target: "/workspace/group"},
				{Source: "/srv/bridged/groups/global", Target: "/workspace/global"},
				{Source: "/srv/bridged/data/sessions/family/.claude", Target: "/home/agent/.claude"},
				{Source: "/srv/bridged/data/ipc/family", Target: "/workspace/ipc"},
				{Source: "/srv/bridged/groups", Target: "/workspace/groups"},
				extra[0],
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Mounts(p, "family", tt.isMain, tt.extra)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
			for _, m := range got {
				if m.Source == filepath.Join(p.Home, "store") || m.Source == filepath.Join(p.Home, "data") || m.Source == p.Home {
					t.Errorf("mounts %s, which must never be mounted", m.Source)
				}
			}
		})
	}
}

func TestCheckFolder(t *testing.T) {
	for _, f := range []string{"", ".", "..", "../x", "a/b", `a\b`, ".hidden", "global", "x\x00"} {
		if err := CheckFolder(f); !errors.Is(err, ErrBadFolder) {
			t.Errorf("CheckFolder(%q) = %v; want ErrBadFolder", f, err)
		}
	}
	for _, f := range []string{"main", "family", "team-2"} {
		if err := CheckFolder(f); err != nil {
			t.Errorf("CheckFolder(%q) = %v; want nil", f, err)
		}
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
	p := Paths{Home: t.TempDir()}
	// Something the host wrote earlier, and a symlink the agent planted
	// pointing outside its folder.
	outside := filepath.Join(p.Home, "outside.txt")
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

	if err := PrepareGroupDirs(p, "family", 4242, 4343); err != nil {
		t.Fatalf("PrepareGroupDirs: %v", err)
	}
	dirs := []string{
		p.GroupDir("family"), p.GlobalDir(), p.ClaudeDir("family"), p.IPCDir("family"),
		filepath.Join(p.IPCDir("family"), "input"), filepath.Join(p.IPCDir("family"), "requests"),
		filepath.Join(p.IPCDir("family"), "responses"),
	}
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: got %v; want a directory", d, err)
		}
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
	if u, _ := owner(t, p.Home); u != 0 {
		t.Errorf("home owned by %d; want it untouched", u)
	}
}

func TestPrepareGroupDirsRefusesBadFolder(t *testing.T) {
	p := Paths{Home: t.TempDir()}
	for _, f := range []string{"../escape", "global", ""} {
		if err := PrepareGroupDirs(p, f, 1000, 1000); !errors.Is(err, ErrBadFolder) {
			t.Errorf("PrepareGroupDirs(%q) = %v; want ErrBadFolder", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(p.Home, "escape")); err == nil {
		t.Error("a directory was created outside groups/")
	}
}

func TestEnsureSettings(t *testing.T) {
	p := Paths{Home: t.TempDir()}
	if err := PrepareGroupDirs(p, "family", 4242, 4343); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSettings(p, "family"); err != nil {
		t.Fatalf("EnsureSettings: %v", err)
	}
	data, err := os.ReadFile(p.SettingsFile("family"))
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
		if u, g := owner(t, p.SettingsFile("family")); u != 4242 || g != 4343 {
			t.Errorf("settings.json owned by %d:%d; want its directory's owner 4242:4343", u, g)
		}
	}

	// The user edits it; the next run must not undo that.
	edited := []byte(`{"env":{"MY_SETTING":"kept"}}`)
	if err := os.WriteFile(p.SettingsFile("family"), edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSettings(p, "family"); err != nil {
		t.Fatalf("EnsureSettings again: %v", err)
	}
	got, _ := os.ReadFile(p.SettingsFile("family"))
	if string(got) != string(edited) {
		t.Errorf("settings.json = %s; want the user's edit %s", got, edited)
	}
	entries, _ := os.ReadDir(p.ClaudeDir("family"))
	if len(entries) != 1 {
		t.Errorf("got %d entries in .claude; want only settings.json (no temp files left)", len(entries))
	}
	if err := EnsureSettings(p, "../x"); !errors.Is(err, ErrBadFolder) {
		t.Errorf("EnsureSettings(../x) = %v; want ErrBadFolder", err)
	}
}

func TestContainerUser(t *testing.T) {
	uid, gid := ContainerUser()
	if os.Geteuid() == 0 {
		if uid != 1000 || gid != 1000 {
			t.Errorf("as root got %d:%d; want 1000:1000", uid, gid)
		}
		return
	}
	if uid != os.Geteuid() || gid != os.Getegid() {
		t.Errorf("got %d:%d; want the daemon's %d:%d", uid, gid, os.Geteuid(), os.Getegid())
	}
}
