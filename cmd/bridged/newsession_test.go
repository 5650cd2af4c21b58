package main

import (
	"context"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/store"
)

// With the daemon stopped, `groups new-session` forgets the group's stored
// session itself; an unknown folder is an error.
func TestGroupsNewSessionWithDaemonStopped(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--home", home, "--name", "main", "--main", "local:main"); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, home)
	if err := db.Sessions.Set(ctx, store.Session{Folder: "main", SessionID: "old-session"}); err != nil {
		t.Fatal(err)
	}
	out, _, err := cli(t, ctx, nil, "", "groups", "new-session", "--home", home, "main")
	if err != nil || !strings.Contains(out, "New session for main") {
		t.Fatalf("groups new-session: %q, %v; want the new session told", out, err)
	}
	if s, err := db.Sessions.Get(ctx, "main"); err != nil || s.SessionID != "" {
		t.Errorf("session after groups new-session: %+v, %v; want none", s, err)
	}
	if _, _, err := cli(t, ctx, nil, "", "groups", "new-session", "--home", home, "nosuch"); err == nil || !strings.Contains(err.Error(), `no group with folder "nosuch"`) {
		t.Errorf("groups new-session of an unknown folder: %v; want no group with folder", err)
	}
}
