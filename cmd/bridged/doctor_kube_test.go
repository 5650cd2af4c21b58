package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/config"
)

// The group uids line: a root daemon gives each group a uid; one that is
// not needs ACLs on the home's file system, which doctor tries.
func TestGroupUIDCheck(t *testing.T) {
	h := t.TempDir()
	cfg := &config.Config{Home: h}
	if c := groupUIDCheck(cfg, 0); c.status != "ok" || !strings.Contains(c.detail, "uid of its own") {
		t.Errorf("root: %+v", c)
	}
	if c := groupUIDCheck(cfg, 1000); c.status != "ok" || !strings.Contains(c.detail, "not checked") {
		t.Errorf("no data/ yet: %+v; want not checked", c)
	}
	if err := os.Mkdir(filepath.Join(h, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if c := groupUIDCheck(cfg, 1000); c.status != "ok" || !strings.Contains(c.detail, "granted by ACL") {
		t.Errorf("not root, ACLs taken: %+v", c)
	}
}
