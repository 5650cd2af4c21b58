package e2e

// A home made under a `docker` group member before each group had a uid
// of its own (docs/decisions.md, record 44): every file its agents wrote is
// the daemon's. After the upgrade the group's agent runs as its own uid
// and keeps writing, renaming and removing what it wrote before; what it
// writes now the daemon still reads.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/bridged-app/bridged/internal/ipc"
)

func TestE2EDockerGroupHomeMovesOver(t *testing.T) {
	parallel(t, light)
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: the test runs the daemon as a user of its own, which needs a root test process")
	}
	e := newEnvAs(t, nonRootUID, nonRootUID, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "other", "--no-trigger", "local:other")
	// What the agent left when it ran as the daemon: the daemon's files.
	old := filepath.Join(e.home, "groups", "other", "old")
	if err := os.MkdirAll(filepath.Join(old, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(old, "notes.txt"), "before\n")
	writeFile(t, filepath.Join(old, "sub", "x.txt"), "x\n")
	for _, p := range []string{filepath.Join(e.home, "groups"), filepath.Join(e.home, "groups", "other"), old, filepath.Join(old, "sub"), filepath.Join(old, "notes.txt"), filepath.Join(old, "sub", "x.txt")} {
		if err := os.Chown(p, nonRootUID, nonRootUID); err != nil {
			t.Fatal(err)
		}
	}
	d := e.start()
	got := e.bash("local:other", `cd /workspace/group && echo "ID=$(id -u)" && echo after >> old/notes.txt && rm -r old/sub && mv old older && echo "NOTES=$(cat older/notes.txt | tr '\n' ,)" && (umask 077; echo mine > new.txt) && echo done`, turnWait)
	uid := groupUID(t, e.home, "other")
	if !strings.Contains(got, "ID="+strconv.Itoa(uid)) || uid == nonRootUID {
		t.Errorf("the other group's agent says %q; want it running as its group's uid %d, not the daemon's %d", got, uid, nonRootUID)
	}
	if !strings.Contains(got, "NOTES=before,after,") || !strings.HasSuffix(got, "done") {
		t.Errorf("the other group's agent, on the files it wrote as the daemon's uid: %q; want them appended to, removed and renamed", got)
	}
	if _, err := os.Stat(filepath.Join(e.home, "groups", "other", "older", "notes.txt")); err != nil {
		t.Errorf("the renamed folder on the host: %v", err)
	}
	// The daemon reads what the agent wrote now, closed to everyone
	// else: the default ACL grants it (the daemon's user does the read).
	cmd := exec.Command("cat", filepath.Join(e.home, "groups", "other", "new.txt"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred}
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "mine\n" {
		t.Errorf("the daemon's user reads the agent's new.txt (written with umask 077): %q, %v; want %q", out, err, "mine\n")
	}
	if fi, err := os.Stat(filepath.Join(e.home, "groups", "other", "new.txt")); err == nil {
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
			t.Errorf("new.txt is owned by %d; want the group's uid %d", st.Uid, uid)
		}
	}
	d.stop(t)
}

// Under the unit's umask (UMask=0027, which install-service writes), what
// the daemon makes for an agent of another uid stays within its reach: the
// credential proxy's socket (a turn that calls the API through it answers)
// and, for the main group, the folder of a group it sees. Serial: the umask
// is the process's.
func TestE2EDockerGroupUnderUnitUmask(t *testing.T) {
	needDocker(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: the test runs the daemon as a user of its own, which needs a root test process")
	}
	old := syscall.Umask(0o027) // inherited by the daemon and the commands
	t.Cleanup(func() { syscall.Umask(old) })
	up := newFakeUpstream(t)
	e := newEnvAs(t, nonRootUID, nonRootUID, "--idle-timeout", "2m")
	e.extraEnv = append(e.extraEnv, "BRIDGED_ANTHROPIC_URL="+up.srv.URL)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "other", "--no-trigger", "local:other")
	e.mustCLI("groups", "set", "--sees", "other", "main")
	d := e.start()
	if got := e.bash("local:other", "echo theirs > /workspace/group/note.txt && echo wrote", turnWait); got != "wrote" {
		t.Fatalf("the other group's agent answered %q; want its note written", got)
	}
	got := e.bash("local:main", `echo "ID=$(id -u)"; ls -ld `+ipc.ContainerProxyDir+`; test -S `+ipc.ContainerProxyDir+`/`+ipc.ProxySocketName+` && echo PROXY=reachable; echo "NOTE=$(cat /workspace/groups/other/note.txt 2>&1)"`, turnWait)
	t.Logf("the main agent, under the daemon's umask 0027:\n%s", got)
	if strings.Contains(got, "ID="+strconv.Itoa(nonRootUID)+"\n") {
		t.Fatalf("the main agent runs as the daemon's uid: %q", got)
	}
	if !strings.Contains(got, "PROXY=reachable") {
		t.Errorf("the main agent cannot reach the credential proxy's socket under the daemon's umask 0027: %q", got)
	}
	if !strings.Contains(got, "NOTE=theirs") {
		t.Errorf("the main agent, which sees the other group, cannot read its note under the daemon's umask 0027: %q", got)
	}
	if got := e.ask("local:main", "fake:api hello", turnWait); got != "upstream says: hello" {
		t.Errorf("a turn that calls the API through the proxy answered %q; want the upstream's answer", got)
	}
	d.stop(t)
}
