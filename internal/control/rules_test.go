package control

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/store"
)

// The cases where the command line and the agents' tools used to disagree
// (issue 12): the command line now follows internal/rules, like the tools.
func TestTaskRulesShared(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:main", Folder: "main", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	a := &Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC, Now: func() time.Time { return now }}

	running := createTask(t, db, "main", store.TaskOnce, "2026-11-22T09:00:00Z", now)
	if err := db.Tasks.SetStatus(ctx, running.ID, store.TaskRunning); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ResumeTask(ctx, string(running.ID)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "is running") {
		t.Errorf("resume of a running task got %+v, %v; want ErrInvalid, is running (it used to answer ok)", got, err)
	}

	spent := createTask(t, db, "main", store.TaskOnce, "2026-11-22T09:00:00Z", now)
	spent.NextRun, spent.Status = nil, store.TaskPaused
	if err := db.Tasks.Update(ctx, spent); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ResumeTask(ctx, string(spent.ID)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no run left") {
		t.Errorf("resume of a once task with no run left got %+v, %v; want ErrInvalid, no run left (it used to store an active task that never runs)", got, err)
	}
	if stored, _ := db.Tasks.Get(ctx, spent.ID); stored.Status != store.TaskPaused {
		t.Errorf("got stored status %s after a refused resume; want paused", stored.Status)
	}
}

func TestGroupRulesShared(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	a := &Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC}
	for _, req := range []GroupAdd{
		{Chat: "local:../../x", Name: "x"},
		{Chat: "local:nl", Name: "nl", Trigger: "@nl\nx"},
		{Chat: "x@g.us", Name: "x"},
		{Chat: "local:x", Name: "two\nlines"},
	} {
		if g, err := a.AddGroup(ctx, req); !errors.Is(err, ErrInvalid) {
			t.Errorf("AddGroup(%+v) = %+v, %v; want ErrInvalid", req, g, err)
		}
	}
	g, err := a.AddGroup(ctx, GroupAdd{Chat: " local:noat ", Name: "noat", Trigger: "Bob"})
	if err != nil || g.Chat != "local:noat" || g.Trigger != "@Bob" {
		t.Errorf("got %+v, %v; want local:noat with trigger @Bob", g, err)
	}
}

// fakeAllowlist refuses every host path under /forbidden, like the mount
// allowlist does, and records what it was asked.
type fakeAllowlist struct {
	calls [][]store.MountRequest
	main  []bool
}

func (f *fakeAllowlist) check(_ context.Context, ms []store.MountRequest, isMain bool) error {
	f.calls = append(f.calls, ms)
	f.main = append(f.main, isMain)
	var errs []error
	for _, m := range ms {
		if strings.HasPrefix(m.HostPath, "/forbidden") {
			errs = append(errs, fmt.Errorf("mount refused: %s: not under an allowed root of /etc/allowlist.json", m.HostPath))
		}
	}
	return errors.Join(errs...)
}

func TestGroupMounts(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	al := &fakeAllowlist{}
	adm := &Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC, CheckMounts: al.check}
	if _, err := adm.AddGroup(ctx, GroupAdd{Chat: "local:fam", Name: "fam"}); err != nil {
		t.Fatal(err)
	}
	srv, err := Listen(Options{Socket: filepath.Join(shortDir(t), "bridged.sock"), Admin: adm, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c := NewClient(srv.opts.Socket)

	want := []store.MountRequest{{HostPath: "/srv/photos", ContainerPath: "pics"}, {HostPath: "~/code", ReadWrite: true}}
	g, err := c.UpdateGroup(ctx, "fam", GroupPatch{ExtraMounts: &want})
	if err != nil {
		t.Fatalf("set mounts: %v", err)
	}
	if len(g.ExtraMounts) != 2 || g.ExtraMounts[0] != want[0] || g.ExtraMounts[1] != want[1] {
		t.Errorf("got mounts %+v; want %+v", g.ExtraMounts, want)
	}
	if len(al.calls) != 1 || len(al.calls[0]) != 2 || al.main[0] {
		t.Errorf("allowlist asked %+v (main %v); want the two mounts, once, for a non-main group", al.calls, al.main)
	}

	bad := []store.MountRequest{{HostPath: "/srv/ok"}, {HostPath: "/forbidden/keys"}}
	_, err = c.UpdateGroup(ctx, "fam", GroupPatch{ExtraMounts: &bad})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "mount refused: /forbidden/keys: not under an allowed root of /etc/allowlist.json") {
		t.Errorf("refused mount got %v; want ErrInvalid with the allowlist's own words", err)
	}
	stored, _ := db.Groups.ByFolder(ctx, "fam")
	if len(stored.ContainerConfig.ExtraMounts) != 2 {
		t.Errorf("a refused change left mounts %+v; want the two set before", stored.ContainerConfig.ExtraMounts)
	}

	// Other changes do not ask the allowlist again.
	name := "Family"
	if _, err := c.UpdateGroup(ctx, "fam", GroupPatch{Name: &name}); err != nil || len(al.calls) != 2 {
		t.Errorf("rename got %v with %d allowlist checks; want ok without a new check", err, len(al.calls))
	}

	// Clearing needs no allowlist at all.
	noAllow := &Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC}
	if _, err := noAllow.UpdateGroup(ctx, "fam", GroupPatch{ExtraMounts: &want}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no mount allowlist") {
		t.Errorf("set mounts without an allowlist got %v; want ErrInvalid, no mount allowlist", err)
	}
	g, err = c.UpdateGroup(ctx, "fam", GroupPatch{ExtraMounts: &[]store.MountRequest{}})
	if err != nil || len(g.ExtraMounts) != 0 || len(al.calls) != 2 {
		t.Errorf("clear got %+v, %v after %d allowlist checks; want no mounts, without a check", g.ExtraMounts, err, len(al.calls))
	}
	if stored, _ := db.Groups.ByFolder(ctx, "fam"); stored.ContainerConfig.ExtraMounts != nil {
		t.Errorf("got stored mounts %+v after clearing; want none", stored.ContainerConfig.ExtraMounts)
	}
}
