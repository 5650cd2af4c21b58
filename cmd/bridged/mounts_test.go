package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `groups set --mount` with the daemon stopped: checked against the mount
// allowlist file when set, with the allowlist's own words.
func TestGroupsSetMounts(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	allowed := filepath.Join(dir, "allowed")
	share := filepath.Join(allowed, "share")
	for p, data := range map[string]string{
		filepath.Join(share, "readme.md"):      "hello",
		filepath.Join(share, ".ssh", "id_rsa"): "key",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "mount-allowlist.json")
	if err := os.WriteFile(file, []byte(`{"allowedRoots": [{"path": "`+allowed+`", "allowReadWrite": true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"BRIDGED_MOUNT_ALLOWLIST": file}
	run := func(args ...string) (string, string, error) {
		return cli(t, ctx, env, "", append(args, "--home", home)...)
	}
	if _, _, err := run("groups", "add", "--name", "fam", "local:fam"); err != nil {
		t.Fatalf("groups add: %v", err)
	}

	out, _, err := run("groups", "set", "--mount", share+":data", "fam")
	if err != nil {
		t.Fatalf("groups set --mount: %v", err)
	}
	if !strings.Contains(out, "extra mounts "+share+":data:ro") {
		t.Errorf("groups set printed %q; want the mount, read-only", out)
	}
	out, _, err = run("groups", "list")
	if err != nil || !strings.Contains(out, share+":data:ro") {
		t.Errorf("groups list got %q, %v; want the mount shown", out, err)
	}

	refusals := []struct {
		name string
		args []string
		want string
	}{
		{"outside the allowed roots", []string{"--mount", "/etc"}, "mount refused: /etc: not under an allowed root of " + file},
		{"read-write for a non-main group", []string{"--mount", share + ":rw"}, "mount refused: " + share + ": read-write was asked for"},
		{"a blocked name", []string{"--mount", filepath.Join(share, ".ssh")}, `matches blocked pattern ".ssh"`},
		{"missing", []string{"--mount", filepath.Join(allowed, "nope")}, "does not exist"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := run(append(append([]string{"groups", "set"}, tt.args...), "fam")...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want %q", err, tt.want)
			}
		})
	}
	out, _, _ = run("groups", "list")
	if !strings.Contains(out, share+":data:ro") {
		t.Errorf("a refused change altered the mounts:\n%s", out)
	}

	for _, args := range [][]string{
		{"groups", "set", "--mount", "/a:b:c:d", "fam"},
		{"groups", "set", "--mount", share, "--clear-mounts", "fam"},
	} {
		if _, stderr, err := run(args...); !errors.Is(err, errUsage) {
			t.Errorf("%q got %v (%s); want a usage error", args, err, stderr)
		}
	}

	out, _, err = run("groups", "set", "--clear-mounts", "fam")
	if err != nil || !strings.Contains(out, "extra mounts none") {
		t.Errorf("groups set --clear-mounts got %q, %v; want no mounts", out, err)
	}

	// With no allowlist file, nothing may be mounted.
	env["BRIDGED_MOUNT_ALLOWLIST"] = filepath.Join(dir, "none.json")
	if _, _, err := run("groups", "set", "--mount", share, "fam"); err == nil || !strings.Contains(err.Error(), "allows no directories") {
		t.Errorf("without an allowlist file got %v; want the mount refused", err)
	}
}
