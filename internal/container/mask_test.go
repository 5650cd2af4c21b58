package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/home"
)

// maskFixture is an allowlist over one root, a layout for the masks, and a
// directory "share" under the root to mount.
type maskFixture struct {
	a      *Allowlist
	layout home.Layout
	share  string
}

func newMaskFixture(t *testing.T, extra string) maskFixture {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	share := filepath.Join(root, "share")
	mkdirs(t, share)
	file := filepath.Join(dir, "allowlist.json")
	writeFile(t, file, `{"allowedRoots": [{"path": "`+root+`", "allowReadWrite": true}]`+extra+`}`)
	layout := home.Layout{Dir: filepath.Join(dir, "home")}
	a, err := LoadAllowlist(file, layout.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return maskFixture{a: a.WithMasks(layout), layout: layout, share: share}
}

func (f maskFixture) dirMask() string  { return filepath.Join(f.layout.EmptyDir(), "dir") }
func (f maskFixture) fileMask() string { return filepath.Join(f.layout.EmptyDir(), "file") }

func TestMasksHideBlockedEntries(t *testing.T) {
	f := newMaskFixture(t, `, "blockedPatterns": ["*.pem"]`)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "id_ed25519"), "key")
	s := f.share
	writeFile(t, filepath.Join(s, "readme.md"), "hello")
	writeFile(t, filepath.Join(s, ".ssh", "id_rsa"), "key")
	writeFile(t, filepath.Join(s, "sub", ".env"), "TOKEN=x")
	writeFile(t, filepath.Join(s, "sub", "notes.environment"), "not a secret")
	writeFile(t, filepath.Join(s, "sub", "deeper", "tls.pem"), "key")             // level 3: masked
	writeFile(t, filepath.Join(s, "a", "b", "c", ".env"), "too deep")             // level 4: not searched
	writeFile(t, filepath.Join(s, "a", "b", "c", "d", ".aws", "credentials"), "") // deeper still
	mkdirs(t, filepath.Join(s, "Credentials"))                                    // patterns ignore case
	if err := os.Symlink(outside, filepath.Join(s, ".gnupg")); err != nil {       // a link: not masked
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(s, "root-link")); err != nil { // never followed
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "id_ed25519"), filepath.Join(s, "sub", "key-link")); err != nil {
		t.Fatal(err)
	}

	mounts, err := f.a.CheckAll([]MountRequest{{HostPath: s, ContainerPath: "data", ReadWrite: true}}, true)
	if err != nil {
		t.Fatalf("CheckAll: %v", err)
	}
	if len(mounts) == 0 || mounts[0] != (Mount{Source: s, Target: "/workspace/extra/data"}) {
		t.Fatalf("got %+v; want the share first, read-write", mounts)
	}
	got := map[string]string{}
	for _, m := range mounts[1:] {
		if !m.ReadOnly {
			t.Errorf("mask %+v is writable; want read-only", m)
		}
		got[m.Target] = m.Source
	}
	want := map[string]string{
		"/workspace/extra/data/.ssh":               f.dirMask(),
		"/workspace/extra/data/sub/.env":           f.fileMask(),
		"/workspace/extra/data/sub/deeper/tls.pem": f.fileMask(),
		"/workspace/extra/data/Credentials":        f.dirMask(),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got masks %v; want %v", got, want)
	}

	// The masks exist, empty, and cannot be written by their mode.
	for p, mode := range map[string]os.FileMode{f.dirMask(): os.ModeDir | 0o555, f.fileMask(): 0o444} {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode() != mode || (!fi.IsDir() && fi.Size() != 0) {
			t.Errorf("got %s %v, %v; want mode %v and empty", p, fi.Mode(), err, mode)
		}
	}
	// Every mask source passes the check right before container create.
	for _, m := range mounts[1:] {
		if err := f.layout.CheckMountSource(m.Source); err != nil {
			t.Errorf("CheckMountSource(%s): %v", m.Source, err)
		}
	}
}

func TestMasksFollowNoLink(t *testing.T) {
	f := newMaskFixture(t, "")
	// The share itself is fine, but a link inside it leads to a directory
	// full of blocked names: they are not searched, nor masked.
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, ".ssh", "id_rsa"), "key")
	if err := os.Symlink(outside, filepath.Join(f.share, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	got, err := f.a.findBlocked(f.share)
	if err != nil || len(got) != 0 {
		t.Errorf("got %+v, %v; want nothing found behind a link", got, err)
	}
}

func TestMaskLimits(t *testing.T) {
	f := newMaskFixture(t, "")
	for i := range 5 {
		writeFile(t, filepath.Join(f.share, fmt.Sprintf("d%d", i), ".env"), "")
	}
	if _, err := f.a.findBlockedWithin(f.share, 7, 100); err == nil || !strings.Contains(err.Error(), "more than 7 entries") {
		t.Errorf("got %v; want the search refused after 7 entries", err)
	}
	if _, err := f.a.findBlockedWithin(f.share, 100, 4); err == nil || !strings.Contains(err.Error(), "more than 4 entries inside it match blocked patterns") {
		t.Errorf("got %v; want more than 4 blocked entries refused", err)
	}
	got, err := f.a.findBlockedWithin(f.share, 10, 5)
	if err != nil || len(got) != 5 {
		t.Errorf("got %+v, %v; want the 5 entries at the limits", got, err)
	}
	// CheckAll refuses such a mount, saying why.
	writeFile(t, filepath.Join(f.share, "one-more", ".env"), "")
	for i := range MaxMasks {
		writeFile(t, filepath.Join(f.share, "many", fmt.Sprintf("%d.env", i)), "")
	}
	mounts, err := f.a.CheckAll([]MountRequest{{HostPath: f.share}}, true)
	if len(mounts) != 0 || !errors.Is(err, ErrMountRefused) || !strings.Contains(err.Error(), "mount a narrower directory") {
		t.Errorf("got %+v, %v; want the mount refused", mounts, err)
	}
}

func TestMasksNeedAHome(t *testing.T) {
	f := newMaskFixture(t, "")
	writeFile(t, filepath.Join(f.share, ".env"), "x")
	noMasks, err := LoadAllowlist(f.a.file)
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]*Allowlist{"without masks": noMasks} {
		mounts, err := a.CheckAll([]MountRequest{{HostPath: f.share}}, true)
		if len(mounts) != 0 || !errors.Is(err, ErrMountRefused) || !strings.Contains(err.Error(), ".env inside it matches a blocked pattern and cannot be hidden") {
			t.Errorf("%s: got %+v, %v; want the mount refused", name, mounts, err)
		}
		if err := a.Validate([]MountRequest{{HostPath: f.share}}, true); err == nil {
			t.Errorf("%s: Validate accepted what CheckAll refuses", name)
		}
	}
	if (*Allowlist)(nil).WithMasks(f.layout) != nil {
		t.Error("WithMasks on nil; want nil")
	}
}

func TestMaskSourcesChecked(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir, file string)
		wantErr string
	}{
		{"made fresh", func(*testing.T, string, string) {}, ""},
		{"modes repaired", func(t *testing.T, dir, file string) {
			mkdirs(t, dir)
			writeFile(t, file, "")
		}, ""},
		{"directory not empty", func(t *testing.T, dir, file string) {
			writeFile(t, filepath.Join(dir, "x"), "")
		}, "must be empty"},
		{"file not empty", func(t *testing.T, dir, file string) {
			writeFile(t, file, "secret")
		}, "must be empty"},
		{"directory is a link", func(t *testing.T, dir, file string) {
			mkdirs(t, filepath.Dir(dir))
			if err := os.Symlink(t.TempDir(), dir); err != nil {
				t.Fatal(err)
			}
		}, "want an empty directory"},
		{"file is a link", func(t *testing.T, dir, file string) {
			mkdirs(t, filepath.Dir(file))
			if err := os.Symlink("/etc/passwd", file); err != nil {
				t.Fatal(err)
			}
		}, "want an empty file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newMaskFixture(t, "")
			writeFile(t, filepath.Join(f.share, ".env"), "x")
			tt.prepare(t, f.dirMask(), f.fileMask())
			mounts, err := f.a.CheckAll([]MountRequest{{HostPath: f.share}}, true)
			if tt.wantErr != "" {
				if len(mounts) != 0 || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("got %+v, %v; want the mount refused: %s", mounts, err, tt.wantErr)
				}
				return
			}
			if err != nil || len(mounts) != 2 {
				t.Fatalf("got %+v, %v; want the share and its mask", mounts, err)
			}
			if fi, err := os.Stat(f.fileMask()); err != nil || fi.Mode().Perm() != 0o444 {
				t.Errorf("got file mask %v, %v; want mode 0444", fi.Mode(), err)
			}
			if fi, err := os.Stat(f.dirMask()); err != nil || fi.Mode().Perm() != 0o555 {
				t.Errorf("got directory mask %v, %v; want mode 0555", fi.Mode(), err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	f := newMaskFixture(t, "")
	writeFile(t, filepath.Join(f.share, ".env"), "x")
	ro := filepath.Join(t.TempDir(), "ro-root")
	mkdirs(t, filepath.Join(ro, "docs"))
	writeFile(t, f.a.file, `{"allowedRoots": [{"path": "`+filepath.Dir(f.share)+`", "allowReadWrite": true}, {"path": "`+ro+`"}]}`)
	loaded, err := LoadAllowlist(f.a.file, f.layout.Dir)
	if err != nil {
		t.Fatal(err)
	}
	a := loaded.WithMasks(f.layout)
	tests := []struct {
		name    string
		reqs    []MountRequest
		isMain  bool
		wantErr []string
	}{
		{"read-only share with a masked entry", []MountRequest{{HostPath: f.share}}, false, nil},
		{"read-write for main", []MountRequest{{HostPath: f.share, ReadWrite: true}}, true, nil},
		{"read-write for a non-main group", []MountRequest{{HostPath: f.share, ReadWrite: true}}, false,
			[]string{"read-write was asked for", "nonMainReadOnly"}},
		{"read-write under a read-only root", []MountRequest{{HostPath: filepath.Join(ro, "docs"), ReadWrite: true}}, true,
			[]string{"read-write was asked for", "allowReadWrite is false"}},
		{"outside every root", []MountRequest{{HostPath: t.TempDir()}}, true, []string{"not under an allowed root of " + f.a.file}},
		{"the same name twice", []MountRequest{{HostPath: f.share}, {HostPath: filepath.Join(ro, "docs"), ContainerPath: "share"}}, true,
			[]string{"/workspace/extra/share is already mounted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := a.Validate(tt.reqs, tt.isMain)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Errorf("got %v; want accepted", err)
				}
				return
			}
			if !errors.Is(err, ErrMountRefused) || !slices.ContainsFunc(tt.wantErr, func(s string) bool { return strings.Contains(err.Error(), s) }) {
				t.Errorf("got %v; want ErrMountRefused saying %q", err, tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v; want it to say %q", err, w)
				}
			}
		})
	}
	// Validate creates nothing.
	if _, err := os.Lstat(f.layout.EmptyDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v for %s after Validate; want it not made", err, f.layout.EmptyDir())
	}
}
