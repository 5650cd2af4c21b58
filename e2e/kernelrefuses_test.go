package e2e

// Every group its own uid (issue 34): no agent can rename a sibling
// group's folder or plant a link in groups/, refused by the kernel itself,
// not by a check of the daemon. The daemon never mounts groups/ writable
// (the main group sees it read-only, TestE2EMountRace), so here the owner
// makes the mistake the allowlist cannot see: groups/ bind-mounted at
// another path under an allowed root and given to the main group
// read-write as an extra mount. The main agent can write its own folder
// through it, and the kernel refuses it everything else there.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/testimage"
)

// TestE2EKernelRefusesSiblings runs the attacks per daemon user, each of
// whose agents has a uid of its own: root on Docker, a `docker` group
// member (granted by ACL, its mounts confirmed from the runner's report,
// docs/decisions.md, record 44) and the rootless Podman service's user.
func TestE2EKernelRefusesSiblings(t *testing.T) {
	parallel(t, light)
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: the test bind-mounts groups/ at another path, which needs a root test process")
	}
	for _, u := range daemonUsers() {
		t.Run(u.name, func(t *testing.T) {
			u.skipUnavailable(t)
			testKernelRefusesSiblings(t, u)
		})
	}
}

func testKernelRefusesSiblings(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "2m")
	base := t.TempDir()
	allowed := filepath.Join(base, "allowed")
	alias := filepath.Join(allowed, "groups")
	if err := os.MkdirAll(alias, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(base), base, allowed} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	allowlist := filepath.Join(base, "mount-allowlist.json")
	writeFile(t, allowlist, `{"allowedRoots": [{"path": "`+allowed+`", "allowReadWrite": true}]}`)
	e.extraEnv = append(e.extraEnv, "BRIDGED_MOUNT_ALLOWLIST="+allowlist)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "other", "--no-trigger", "local:other")
	d := e.start()
	groups := filepath.Join(e.home, "groups")

	// The sibling's folder, with a file of its own in it.
	if got := e.bash("local:other", "echo mine > /workspace/group/mine.txt && echo wrote", turnWait); got != "wrote" {
		t.Fatalf("the other group's agent answered %q; want its file written", got)
	}
	bindMount(t, groups, alias, u.rootless)
	e.mustCLI("groups", "set", "--mount", alias+":allgroups:rw", "main")

	g := "/workspace/extra/allgroups"
	// Each attempt's output on a line of its own, after its label.
	attempts := []struct{ label, what, cmd string }{
		{"RENAME_SIBLING", "rename the sibling's folder", "mv " + g + "/other " + g + "/stolen"},
		{"LINK_IN_GROUPS", "plant a symlink in groups/", "ln -s ../store " + g + "/evil"},
		{"LINK_IN_SIBLING", "plant a symlink in the sibling's folder", "ln -s ../store " + g + "/other/evil"},
		{"WRITE_SIBLING", "write into the sibling's folder", "echo w > " + g + "/other/w.txt"},
		{"RENAME_OWN", "rename its own folder in groups/", "mv " + g + "/main " + g + "/main2"},
	}
	cmd := "grep ' " + g + " ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1 | sed 's/^/MOUNT=/'; " +
		"echo own > " + g + "/main/own.txt && echo OWN=$(cat " + g + "/main/own.txt)"
	for _, a := range attempts {
		cmd += fmt.Sprintf(`; echo "%s=$({ %s; } 2>&1 && echo done)"`, a.label, a.cmd)
	}
	got := e.bash("local:main", cmd, turnWait)
	t.Logf("the main agent, with groups/ mounted read-write at %s:\n%s", g, got)
	if !strings.Contains(got, "MOUNT=rw") || !strings.Contains(got, "OWN=own") {
		t.Fatalf("the main agent's groups/ mount is not writable (%q): the attempts prove nothing", got)
	}
	said := map[string]string{}
	for _, l := range strings.Split(got, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			said[k] = v
		}
	}
	for _, a := range attempts {
		if v := said[a.label]; !strings.Contains(v, "Permission denied") && !strings.Contains(v, "Operation not permitted") {
			t.Errorf("the main agent's attempt to %s (%s) answered %q; want the kernel's EACCES or EPERM (\"Permission denied\" or \"Operation not permitted\")", a.what, a.cmd, v)
		}
	}
	for _, name := range []string{"stolen", "evil", "other/evil", "other/w.txt", "main2"} {
		if _, err := os.Lstat(filepath.Join(groups, name)); err == nil {
			t.Errorf("the main agent made groups/%s", name)
		}
	}
	if b, err := os.ReadFile(filepath.Join(groups, "other", "mine.txt")); err != nil || string(b) != "mine\n" {
		t.Errorf("groups/other/mine.txt after the attacks: %q, %v; want the sibling's file intact", b, err)
	}
	if got := e.bash("local:other", "cat /workspace/group/mine.txt", turnWait); got != "mine" {
		t.Errorf("the other group's agent reads %q from its folder after the attacks; want %q", got, "mine")
	}
	d.stop(t)
}

// bindMount mounts dir at alias for the test's length: in this mount
// namespace, where the daemon checks its mounts and Docker mounts them,
// and for rootless Podman also in its own, where it mounts them.
func bindMount(t *testing.T, dir, alias string, podmanToo bool) {
	t.Helper()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("mount", "--bind", dir, alias)
	t.Cleanup(func() { exec.Command("umount", "-l", alias).Run() })
	if !podmanToo {
		return
	}
	// The service's pause process holds its user and mount namespaces.
	host, _ := strings.CutPrefix(testimage.PodmanHost(), "unix://")
	pauseFile := filepath.Join(filepath.Dir(filepath.Dir(host)), "libpod", "tmp", "pause.pid")
	b, err := os.ReadFile(pauseFile)
	if err != nil {
		t.Fatalf("rootless Podman's pause process: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", pauseFile, err)
	}
	ns := fmt.Sprintf("--mount=/proc/%d/ns/mnt", pid)
	run("nsenter", ns, "mount", "--bind", dir, alias)
	t.Cleanup(func() { exec.Command("nsenter", ns, "umount", "-l", alias).Run() })
}
