package e2e

// The start-up ownership walk (issue 20, findings 6 and 8): a root daemon
// gives each agent's tree to the container user before the container
// starts. The agent owns that tree and can make it as deep or as strange as
// it likes; the walk must neither cost the daemon (memory, time, another
// group's start) nor reach a file outside the home through a hard link.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// walkTimes returns, per tree (its path in the home), the time the
// ownership walks the daemon logged took ("took", a Go duration).
func walkTimes(t *testing.T, logs string) map[string]time.Duration {
	t.Helper()
	sum := map[string]time.Duration{}
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"message":"ownership walk:`) {
			continue
		}
		var l struct {
			Tree string `json:"tree"`
			Took string `json:"took"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("an ownership walk's log line: %v: %s", err, line)
		}
		took, err := time.ParseDuration(l.Took)
		if err != nil {
			t.Fatalf("an ownership walk's took: %v: %s", err, line)
		}
		sum[l.Tree] += took
	}
	return sum
}

// peakRSSKB reads a process's peak resident set size (VmHWM) in kB.
func peakRSSKB(t testing.TB, pid int) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, err := strconv.Atoi(strings.Fields(l)[1])
			if err != nil {
				t.Fatalf("parse %q: %v", l, err)
			}
			return kb
		}
	}
	t.Fatalf("no VmHWM line in /proc/%d/status", pid)
	return 0
}

// containerUID is BRIDGED_CONTAINER_UID's default: each group's uid is
// above it (groupUID).
const containerUID = 61000

// makeDeepTree makes dir/deep and, below it, n nested directories with
// 200-character names, owned by uid:gid, as an agent would in its folder:
// at each level a new top directory wraps the tree, so no path it uses
// grows past PATH_MAX. It is made from the host, as the agent's user: an
// agent's shell takes minutes of forks on two busy cores for the same tree.
func makeDeepTree(t *testing.T, dir string, n, uid, gid int) {
	t.Helper()
	name := strings.Repeat("d", 200)
	deep, wrap := filepath.Join(dir, "deep"), filepath.Join(dir, "wrap")
	mkdir := func(p string) {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	mkdir(deep)
	for range n {
		mkdir(wrap)
		if err := os.Rename(deep, filepath.Join(wrap, name)); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(wrap, deep); err != nil {
			t.Fatal(err)
		}
	}
}

// TestE2EOwnershipWalkDeepTree: two agents' trees hold 2,000 nested
// directories with long names — one group's folder, and main's own and the
// shared global memory — and the daemon restarts. The walk of each tree in
// its group's first turn after the restart (a fresh container each, so a
// fresh walk) takes less than a second, and the daemon's peak memory stays
// where it was.
func TestE2EOwnershipWalkDeepTree(t *testing.T) {
	// Serial: the walk's bound of a second is CPU and disk time that the
	// parallel tests take (beside them, one walk took 1.1 s).
	needDocker(t)
	if os.Geteuid() != 0 {
		t.Skip("the ownership walk is the root daemon's; run the tests as root")
	}
	onEngines(t, testOwnershipWalkDeepTree)
}

// testOwnershipWalkDeepTree is TestE2EOwnershipWalkDeepTree on u's engine.
// On Docker the trees are the old shared uid's, which the root daemon's
// walk gives to each group's; on rootless Podman they are the daemon's
// own, which its walk grants each group's uid by ACL, entry by entry: the
// most work either walk can be given.
func testOwnershipWalkDeepTree(t *testing.T, u daemonUser) {
	e := u.env(t)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	for _, g := range []string{"deep", "other"} {
		e.mustCLI("groups", "add", "--tools", "full", "--name", g, "--no-trigger", "local:"+g)
	}
	chats := []string{"local:other", "local:deep", "local:main"}
	// turns times one turn of each group, one after the other: each the
	// group's first since the daemon started, so each starts a container.
	turns := func() map[string]time.Duration {
		t.Helper()
		took := map[string]time.Duration{}
		for _, c := range chats {
			start := time.Now()
			if got := e.bash(c, "echo turn-ok", 2*turnWait); !strings.Contains(got, "turn-ok") {
				t.Fatalf("%s: the turn did not run: %q", c, got)
			}
			took[c] = time.Since(start)
		}
		return took
	}

	d := e.start()
	before := turns()
	beforeKB := peakRSSKB(t, d.cmd.Process.Pid)
	const depth = 2000
	owner := containerUID
	if u.rootless {
		owner = podman.uid
	}
	for _, folder := range []string{"deep", "main", "global"} { // main's agent has groups/global too
		makeDeepTree(t, filepath.Join(e.home, "groups", folder), depth, owner, owner)
	}
	d.stop(t)

	d = e.start()
	after := turns()
	afterKB := peakRSSKB(t, d.cmd.Process.Pid)
	// What the deep trees add to a group's first turn is the ownership
	// walk of its trees (main's: its folder and groups/global), which the
	// daemon logs with its duration: that is what is bounded, per tree. The
	// turns' own times are only shown: on two busy cores one container
	// start varies by seconds, more than the bound.
	for _, c := range chats {
		t.Logf("%s: first turn %s before the deep trees, %s after", c, before[c].Round(time.Millisecond), after[c].Round(time.Millisecond))
	}
	walks := walkTimes(t, d.logs())
	for _, tree := range []string{"groups/deep", "groups/main", "groups/global"} {
		took, ok := walks[tree]
		t.Logf("%s: walked in %s after the restart", tree, took.Round(time.Millisecond))
		if !ok {
			t.Errorf("the daemon logged no ownership walk of %s after the restart", tree)
		} else if took > time.Second {
			t.Errorf("the ownership walk of %s (a tree %d deep) took %s in a first turn after a restart; want under 1 s", tree, depth, took.Round(time.Millisecond))
		}
	}
	t.Logf("daemon peak RSS: %d MB before the deep trees, %d MB after a restart with them", beforeKB>>10, afterKB>>10)
	if afterKB > beforeKB+64<<10 {
		t.Errorf("the daemon's peak RSS grew from %d MB to %d MB walking the deep trees; want under 64 MB more", beforeKB>>10, afterKB>>10)
	}
	// The walk did its work: the deepest level is the container user's
	// (Docker), or grants it by ACL (Podman).
	levels, deepest, acl := deepestOwner(t, filepath.Join(e.home, "groups", "deep", "deep"))
	switch want := groupUID(t, e.home, "deep"); {
	case u.rootless && (levels != depth || !acl):
		t.Errorf("groups/deep: %d levels, the deepest with an access ACL: %v; want %d levels, the deepest granted to the group's uid", levels, acl, depth)
	case !u.rootless && (levels != depth || int(deepest) != want):
		t.Errorf("groups/deep: %d levels, the deepest owned by %d; want %d levels owned by %d (the group's uid)", levels, deepest, depth, want)
	}
	d.stop(t)
}

// deepestOwner follows the only subdirectory of each level under dir down
// to the last, by descriptor, and returns the levels, the last's owner and
// whether it has an access ACL.
func deepestOwner(t *testing.T, dir string) (levels int, uid uint32, acl bool) {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 200)
	for {
		next, err := syscall.Openat(fd, name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			var st syscall.Stat_t
			if err := syscall.Fstat(fd, &st); err != nil {
				t.Fatal(err)
			}
			_, err := syscall.Getxattr(fmt.Sprintf("/proc/self/fd/%d", fd), "system.posix_acl_access", nil)
			syscall.Close(fd)
			return levels, st.Uid, err == nil
		}
		syscall.Close(fd)
		fd = next
		levels++
	}
}

// TestE2EOwnershipWalkHardLink: a file outside the home hard-linked into a
// group's folder (the link is made here, as root: the host's
// fs.protected_hardlinks would stop the agent) is left as it is when the
// daemon's walk hands the folder to the group's uid, and the daemon says
// which file it left alone. The root daemon's walk changes owners: the
// file, someone else's, keeps its owner. A daemon that is not root (rootless
// Podman's user, a docker group member) grants the group's uid by ACL what
// it owns: the file, the daemon's own and private to it, gets no grant, and
// the agent cannot read it.
func TestE2EOwnershipWalkHardLink(t *testing.T) {
	parallel(t, light)
	if os.Geteuid() != 0 {
		t.Skip("the ownership walk is the root daemon's; run the tests as root")
	}
	for _, u := range daemonUsers() {
		t.Run(u.name, func(t *testing.T) {
			u.skipUnavailable(t)
			testOwnershipWalkHardLink(t, u)
		})
	}
}

func testOwnershipWalkHardLink(t *testing.T, u daemonUser) {
	e := u.env(t)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "linked", "--no-trigger", "local:linked")
	d := e.start()
	if got := e.bash("local:linked", "echo turn-ok", turnWait); !strings.Contains(got, "turn-ok") {
		t.Fatalf("the first turn did not run: %q", got)
	}
	d.stop(t)

	// Outside the home: someone else's file under a root daemon, the
	// daemon's own, private to it, under one that grants by ACL (rootless
	// Podman's user, a docker group member).
	owner, mode := 4321, os.FileMode(0o644)
	grants := u.rootless || u.uid != 0
	switch {
	case u.rootless:
		owner, mode = podman.uid, 0o600
	case grants:
		owner, mode = u.uid, 0o600
	}
	victim := filepath.Join(t.TempDir(), "shadow")
	writeFile(t, victim, "root:x:0:0::/root:/bin/sh\n")
	if err := os.Chown(victim, owner, owner); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(victim, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, filepath.Join(e.home, "groups", "linked", "shadow")); err != nil {
		t.Fatalf("hard-link the outside file into the group folder: %v", err)
	}

	d = e.start()
	got := e.bash("local:linked", "ls -ln /workspace/group/shadow; cat /workspace/group/shadow 2>&1", turnWait)
	if !strings.Contains(got, "shadow") {
		t.Fatalf("the agent does not see the linked file: %q", got)
	}
	t.Logf("the agent: %q", got)
	if grants && !strings.Contains(got, "Permission denied") {
		t.Errorf("the agent read the daemon's private file through the hard link: %q; want Permission denied (the walk granted it)", got)
	}
	fi, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != owner || int(st.Gid) != owner || fi.Mode().Perm() != mode {
		t.Errorf("the file outside the home is now %d:%d %v; want %d:%d %v (the walk changed it through the hard link)", st.Uid, st.Gid, fi.Mode().Perm(), owner, owner, mode)
	}
	if n, err := syscall.Getxattr(victim, "system.posix_acl_access", nil); err == nil {
		t.Errorf("the file outside the home has an access ACL now (%d bytes); want none (the walk granted it through the hard link)", n)
	}
	if !d.waitLog(`"first_linked":"groups/linked/shadow"`, 10*time.Second) {
		t.Errorf("the daemon did not report the hard-linked file it left alone")
	}
	d.stop(t)
}
