package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/router"
)

// routerLive is a control.StatusSource over a fixed router status.
type routerLive struct{ st router.Status }

func (l routerLive) Live() control.Live { return liveFromRouter(l.st) }

// A boundary incident (a group folder the main agent replaced by a
// symlink) shows in `bridged status`, in text and JSON, for its group.
func TestStatusShowsBoundaryIncidents(t *testing.T) {
	ctx := context.Background()
	dir := newHome(t)
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "main", "--main", "local:main", "--home", dir); err != nil {
		t.Fatal(err)
	}
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(hm.Layout().GroupsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../store", hm.Layout().GroupDir("fam")); err != nil {
		t.Fatal(err)
	}
	tree, err := hm.Group("fam")
	if err != nil {
		t.Fatal(err)
	}
	tree.Close()
	inc := hm.Incidents()
	if len(inc) != 1 {
		t.Fatalf("incidents %+v; want one", inc)
	}
	in := inc[0]
	st := router.Status{Failures: []router.Failure{{Time: in.Time, Group: in.Group, Kind: router.KindBoundary, Error: in.String()}}}
	startDaemonWithStatus(t, dir, nil, routerLive{st})

	out, _, err := cli(t, ctx, nil, "", "status", "--home", dir, "--timezone", "UTC")
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "boundary") {
			line = l
		}
	}
	for _, want := range []string{"boundary", "fam", "groups/fam", "symlink", in.MovedTo} {
		if !strings.Contains(line, want) {
			t.Errorf("status line %q lacks %q:\n%s", line, want, out)
		}
	}

	out, _, err = cli(t, ctx, nil, "", "status", "--json", "--home", dir)
	if err != nil {
		t.Fatalf("status --json: %v", err)
	}
	var js control.Status
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	api, err := control.NewClient(filepath.Join(dir, "bridged.sock")).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]control.Status{"status --json": js, "/v1/status": api} {
		found := false
		for _, f := range s.Failures {
			if f.Kind == "boundary" && f.Where == "fam" && strings.Contains(f.Error, "groups/fam") && strings.Contains(f.Error, "symlink") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s failures %+v; want the boundary incident for fam", name, s.Failures)
		}
	}
}

func TestDoctorContainerUser(t *testing.T) {
	passwd := filepath.Join(t.TempDir(), "passwd")
	write := func(s string) {
		if err := os.WriteFile(passwd, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.Config{ContainerUID: 61000, ContainerGID: 61000}
	tests := []struct {
		name, passwd string
		status       string
		want         string
	}{
		{"free id", "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\n", "ok", "no login user"},
		{"login user", "root:x:0:0:root:/root:/bin/bash\nbob:x:61000:61000::/home/bob:/bin/zsh\n", "warn", "login user bob"},
		{"empty shell is /bin/sh", "carol:x:61000:61000::/home/carol:\n", "warn", "login user carol"},
		{"service user", "agents:x:61000:61000::/nonexistent:/usr/sbin/nologin\n", "ok", "no login"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write(tt.passwd)
			c := checkContainerUser(cfg, 0, passwd)
			if c.status != tt.status || !strings.Contains(c.detail, tt.want) {
				t.Errorf("got %s %q; want %s mentioning %q", c.status, c.detail, tt.status, tt.want)
			}
		})
	}
	// A daemon that is not root grants each group's uid by ACL
	// (records 33 and 44): the line says so, on any engine.
	cfg.Home = t.TempDir()
	if err := os.Mkdir(filepath.Join(cfg.Home, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if c := checkContainerUser(cfg, 1000, passwd); c.name != "uid" || c.status != "ok" || !strings.Contains(c.detail, "from 61001 up, granted by ACL") {
		t.Errorf("non-root: got %s %s %q; want ok, saying each group's agent has a uid of its own, granted by ACL", c.name, c.status, c.detail)
	}
}

func TestContainerUserDefaultWhenRoot(t *testing.T) {
	a := &app{stderr: io.Discard, getenv: func(string) string { return "" }}
	_, cfg, err := a.parseConfig(a.newFlagSet("run", "run"), []string{"--home", newHome(t)}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := containerUser(cfg, zerolog.Nop())
	switch {
	case os.Geteuid() == 0 && (uid != 61000 || gid != 61000):
		t.Errorf("as root: got %d:%d; want the default 61000:61000", uid, gid)
	case os.Geteuid() != 0 && (uid != os.Geteuid() || gid != os.Getegid()):
		t.Errorf("not root: got %d:%d; want the daemon's own %d:%d", uid, gid, os.Geteuid(), os.Getegid())
	}
	if uid == 0 || uid == 1000 && os.Geteuid() == 0 {
		t.Errorf("container uid %d", uid)
	}
}
