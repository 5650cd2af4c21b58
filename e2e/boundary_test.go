package e2e

// The container boundary (issue 9, DESIGN §14): an agent owns every
// directory mounted into its container and can put symlinks there or replace
// whole subdirectories; nothing it does may reach outside its own group. Each
// test plays the attacking agent with fake:bash, which runs a real shell
// (the test image's busybox) inside the container, against the real daemon,
// and checks what the owner would notice.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// nonRootUID is the daemon's user in the runs as a non-root daemon:
	// no login user on a test host.
	nonRootUID = 61500
	// turnWait bounds one agent turn, container start included.
	turnWait = 60 * time.Second
)

// shWaitGone is a shell fragment that waits, at most 20 s, until none of
// paths exists any more (the host took the request files).
func shWaitGone(paths ...string) string {
	conds := make([]string, len(paths))
	for i, p := range paths {
		conds[i] = "[ -e " + p + " ]"
	}
	return "for n in $(seq 200); do " + strings.Join(conds, " || ") + " || break; sleep 0.1; done"
}

// shSwapForLink is a shell fragment that replaces the directory dir by a
// symlink to target, as an attacking agent would, and prints "planted" when
// the link is in place, or "refused" when the daemon put a real directory
// back first.
func shSwapForLink(dir, target string) string {
	return fmt.Sprintf("mv %[1]s %[1]s.real; ln -s %[2]s %[1]s 2>/dev/null; if [ -L %[1]s ]; then echo planted; else echo refused; fi", dir, target)
}

// attack has the agent of chat run cmd, which ends by printing "planted" or
// "refused" (see shSwapForLink); anything else means the attack did not
// run at all, and the test stops.
func attack(t testing.TB, e *env, chat, cmd string) {
	t.Helper()
	got := e.bash(chat, cmd, turnWait)
	switch {
	case strings.Contains(got, "planted"):
	case strings.Contains(got, "refused"):
		t.Logf("the daemon put a real directory back before the agent's link was in place: %q", got)
	default:
		t.Fatalf("the attack did not run: %q", got)
	}
}

// shRequest is a shell fragment that writes an IPC request (DESIGN §8) into
// dir the way the MCP server does: a .tmp file renamed into place.
func shRequest(dir, id, typ, args string) string {
	body := fmt.Sprintf(`{"id":"%s","type":"%s","args":%s}`, id, typ, args)
	tmp := dir + "/" + id + ".json.tmp"
	return fmt.Sprintf("printf '%%s' '%s' > %s && mv %s %s/%s.json", body, tmp, tmp, dir, id)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkUnchanged fails unless path still holds want.
func checkUnchanged(t testing.TB, what, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	switch {
	case err != nil:
		t.Errorf("%s (%s) is gone: %v", what, path, err)
	case string(got) != want:
		t.Errorf("the daemon wrote through the agent's symlink: %s (%s) now holds %q; want it unchanged, %q", what, path, short(string(got), 200), short(want, 60))
	}
}

// checkEmptyDir fails if anything was written into dir.
func checkEmptyDir(t testing.TB, what, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Errorf("%s (%s): %v", what, dir, err)
		return
	}
	if len(ents) > 0 {
		names := make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name()
		}
		t.Errorf("the daemon wrote into %s (%s) through the agent's symlink: %v; want nothing there", what, dir, names)
	}
}

// ensureWhatsAppDB puts a dummy store/whatsapp.db in place unless the daemon
// made one (it does on start, even unpaired), so attacks on the store have
// both databases to hit.
func ensureWhatsAppDB(t testing.TB, e *env) {
	t.Helper()
	p := filepath.Join(e.home, "store", "whatsapp.db")
	if _, err := os.Lstat(p); err == nil {
		return
	}
	e.daemonFile(t, filepath.Dir(p), "whatsapp.db", "dummy device store\n")
}

// checkStore fails unless store/bridged.db (still a SQLite database) and
// store/whatsapp.db (not empty) are in place.
func checkStore(t testing.TB, home string) {
	t.Helper()
	for _, name := range []string{"bridged.db", "whatsapp.db"} {
		p := filepath.Join(home, "store", name)
		b, err := os.ReadFile(p)
		switch {
		case err != nil:
			moved := grepNames(home, name)
			t.Errorf("store/%s is gone (%v); found at %v", name, err, moved)
		case len(b) == 0:
			t.Errorf("store/%s was truncated to 0 bytes", name)
		case name == "bridged.db" && !bytes.HasPrefix(b, []byte("SQLite format 3\x00")):
			t.Errorf("store/%s is no SQLite database any more: starts with %q", name, short(string(b), 40))
		}
	}
}

// grepNames lists the paths under dir whose base name contains name.
func grepNames(dir, name string) []string {
	var out []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.Contains(filepath.Base(p), name) {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	return out
}

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// checkAnswers fails unless the agent of chat still answers.
func checkAnswers(t testing.TB, e *env, chat string) {
	t.Helper()
	if got := e.ask(chat, "fake:reply still serving", turnWait); got != "still serving" {
		t.Errorf("%s answered %q; want %q", chat, got, "still serving")
	}
}

// noOutbound fails if chat gets an outbound message after id within d. It
// returns early on the first one.
func noOutbound(t testing.TB, e *env, chat string, after int64, d time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for left := time.Until(deadline); left >= time.Second; left = time.Until(deadline) {
		for _, m := range e.messages(chat, after, left.Truncate(time.Second)) {
			after = max(after, m.ID)
			if m.Direction == "out" {
				t.Errorf("%s: %s received %q", why, chat, m.Text)
				return
			}
		}
	}
}

// lastID is the id of the latest message in chat, 0 if none.
func lastID(e *env, chat string) int64 {
	var id int64
	for _, m := range e.messages(chat, 0, 0) {
		id = max(id, m.ID)
	}
	return id
}

// daemonUser is a user the boundary tests run the daemon as.
type daemonUser struct {
	name     string
	uid, gid int // the daemon's
	// rootless: the daemon runs rootless Podman's agents (each group its
	// own uid, granted by ACL).
	rootless bool
	env      func(t *testing.T, daemonArgs ...string) *env
}

// daemonUsers are root (the CI case: containers run as a dedicated uid),
// a user that is not root: the test's own, or nonRootUID when the test
// runs as root, and (a root test process) the rootless Podman service's
// user on its engine (newPodmanEnv). When the test does not run as root, root's env is nil: its
// subtests skip.
func daemonUsers() []daemonUser {
	if os.Geteuid() != 0 {
		return []daemonUser{{name: "root"}, {name: "user", uid: os.Geteuid(), gid: os.Getegid(), env: newEnv}}
	}
	return []daemonUser{
		{name: "root", env: newEnv},
		{name: "user", uid: nonRootUID, gid: nonRootUID, env: func(t *testing.T, args ...string) *env {
			return newEnvAs(t, nonRootUID, nonRootUID, args...)
		}},
		{name: "podman", uid: -1, rootless: true, env: newPodmanEnv},
	}
}

func (u daemonUser) skipUnavailable(t *testing.T) {
	if u.env == nil {
		t.Skip("the test process is not root, so it cannot run the daemon as root (the CI case); run the tests as root to cover it")
	}
}

// TestE2EBoundary runs the IPC and workspace attacks against one daemon per
// daemon user, each attack from a group of its own so one cannot mask
// another.
func TestE2EBoundary(t *testing.T) {
	parallel(t, heavy)
	for _, u := range daemonUsers() {
		t.Run(u.name, func(t *testing.T) {
			u.skipUnavailable(t)
			testBoundary(t, u)
		})
	}
}

func testBoundary(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "2m", "--max-containers", "12")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	for _, g := range []string{"resp", "respdir", "takeover", "hnext", "reqstore"} {
		e.mustCLI("groups", "add", "--tools", "full", "--name", g, "--no-trigger", "local:"+g)
	}
	d := e.start()
	home := e.home

	// a. A symlink where the daemon writes a response (responses/<id>.json.tmp,
	// responses/<id>.json): the daemon must not write through it, neither
	// into a file outside the home nor into the main group's CLAUDE.md.
	t.Run("ResponseSymlinks", func(t *testing.T) {
		e := e.in(t)
		dir := e.daemonDir(t)
		outside := e.daemonFile(t, dir, "outside.txt", "owner's file, not the agent's\n")
		outside2 := e.daemonFile(t, dir, "outside2.txt", "another owner's file\n")
		mainMD := filepath.Join(home, "groups", "main", "CLAUDE.md")
		mainBefore, err := os.ReadFile(mainMD)
		if err != nil {
			t.Fatalf("main group's CLAUDE.md: %v", err)
		}
		cmd := strings.Join([]string{
			"cd /workspace/ipc",
			"ln -s " + outside + " responses/evil1.json.tmp",
			"ln -s ../../../../groups/main/CLAUDE.md responses/evil2.json.tmp",
			"ln -s " + outside2 + " responses/evil3.json",
			shRequest("requests", "evil1", "list_tasks", "{}"),
			shRequest("requests", "evil2", "list_tasks", "{}"),
			shRequest("requests", "evil3", "list_tasks", "{}"),
			shWaitGone("requests/evil1.json", "requests/evil2.json", "requests/evil3.json"),
			"echo planted",
		}, " && ")
		attack(t, e, "local:resp", cmd)
		checkUnchanged(t, "a file outside the home behind responses/evil1.json.tmp", outside, "owner's file, not the agent's\n")
		checkUnchanged(t, "a file outside the home behind responses/evil3.json", outside2, "another owner's file\n")
		checkUnchanged(t, "the main group's CLAUDE.md behind a non-main group's responses/evil2.json.tmp", mainMD, string(mainBefore))
		checkAnswers(t, e, "local:resp")
	})

	// b. responses/ replaced by a symlink to a directory outside the home:
	// no response file appears there.
	t.Run("ResponsesDirSymlink", func(t *testing.T) {
		e := e.in(t)
		outDir := e.daemonDir(t)
		cmd := strings.Join([]string{
			"cd /workspace/ipc",
			shSwapForLink("responses", outDir),
			shRequest("requests", "evil4", "list_tasks", "{}"),
			shWaitGone("requests/evil4.json"),
		}, "; ")
		attack(t, e, "local:respdir", cmd)
		checkEmptyDir(t, "a directory outside the home behind responses/", outDir)
	})

	// e. A non-main group replaces its input/ by a symlink to the main
	// group's: its chat's next message must be answered in its own chat,
	// never become a turn of the main agent.
	t.Run("InputTakeover", func(t *testing.T) {
		e := e.in(t)
		if got := e.ask("local:main", "fake:reply main is awake", turnWait); got != "main is awake" {
			t.Fatalf("main answered %q", got)
		}
		attack(t, e, "local:takeover", "cd /workspace/ipc; "+shSwapForLink("input", "../main/input"))
		mainAfter := lastID(e, "local:main")
		id := e.post("local:takeover", "fake:reply answered where asked")
		deadline := time.Now().Add(turnWait)
		for {
			if out := e.outSince("local:main", mainAfter); len(out) > 0 {
				t.Fatalf("the non-main chat's message became a turn of the main agent: local:main received %q", out[0].Text)
			}
			got := e.messages("local:takeover", id, 2*time.Second)
			var reply string
			for _, m := range got {
				if m.Direction == "out" {
					reply = m.Text
					break
				}
			}
			if reply != "" {
				if reply != "answered where asked" {
					t.Errorf("local:takeover got %q; want %q", reply, "answered where asked")
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("local:takeover got no answer within %s after replacing its input/ by a symlink to main's", turnWait)
			}
		}
		if out := e.outSince("local:main", mainAfter); len(out) > 0 {
			t.Errorf("local:main received %q after the non-main chat's message; want nothing", out[0].Text)
		}
	})

	// h. A dangling groups/global/CLAUDE.md symlink, planted by the main
	// agent: the next run of any group creates no file at its target.
	t.Run("GlobalClaudeMDDanglingSymlink", func(t *testing.T) {
		e := e.in(t)
		target := filepath.Join(e.daemonDir(t), "created-by-the-daemon")
		globalMD := filepath.Join(home, "groups", "global", "CLAUDE.md")
		orig, err := os.ReadFile(globalMD)
		if err != nil {
			t.Fatalf("global CLAUDE.md: %v", err)
		}
		t.Cleanup(func() { restoreFile(t, globalMD, orig) })
		attack(t, e, "local:main", "rm -f /workspace/global/CLAUDE.md && ln -s "+target+" /workspace/global/CLAUDE.md && echo planted")
		if got := e.ask("local:hnext", "fake:reply next run", turnWait); got != "next run" {
			t.Errorf("local:hnext answered %q; want %q", got, "next run")
		}
		if _, err := os.Lstat(target); err == nil {
			b, _ := os.ReadFile(target)
			t.Errorf("the next run created %s through the dangling groups/global/CLAUDE.md symlink (content %q)", target, short(string(b), 80))
		}
	})

	// k. register_group from the main agent's tool is held to the same
	// rules as `bridged groups add`.
	t.Run("RegisterGroupValidation", func(t *testing.T) {
		e := e.in(t)
		refused := []struct {
			name, args, why string
		}{
			{"path in chat id", `{"chat":"local:../../x","name":"dotdot","folder":"dotdot"}`, "chat"},
			{"newline in trigger", `{"chat":"local:nl","name":"newline","folder":"newline","trigger":"@nl\nx"}`, "trigger"},
		}
		for _, r := range refused {
			got := e.ask("local:main", "fake:tool register_group "+r.args, turnWait)
			if !strings.Contains(got, "tool error") || !strings.Contains(strings.ToLower(got), r.why) {
				t.Errorf("register_group with a %s answered %q; want a tool error saying what is wrong with the %s", r.name, got, r.why)
			}
		}
		got := e.ask("local:main", `fake:tool register_group {"chat":"local:noat","name":"noat","folder":"noat","trigger":"Bob"}`, turnWait)
		if strings.Contains(got, "tool error") {
			t.Errorf("register_group with trigger Bob answered %q; want it registered", got)
		}
		list := e.mustCLI("groups", "list")
		var shown []string
		for _, bad := range []string{"local:../../x", "local:nl"} {
			if strings.Contains(list, bad) {
				shown = append(shown, bad)
			}
		}
		if len(shown) > 0 {
			t.Errorf("groups list shows %q, which register_group should have refused:\n%s", shown, list)
		}
		var noat string
		for _, line := range strings.Split(list, "\n") {
			if strings.HasPrefix(line, "noat ") {
				noat = line
			}
		}
		if f := strings.Fields(noat); len(f) < 4 || f[3] != "@Bob" {
			t.Errorf("groups list shows the group registered with trigger Bob as %q; want its trigger normalised to @Bob like the CLI does:\n%s", noat, list)
		}
	})

	// Not an attack, but the other side of "refused and recreated": a
	// directory the daemon puts back must be the agent's to write in, or
	// the group's tools stay broken. The agent removes its requests/ (as a
	// careless rm -rf might) and then calls a tool.
	t.Run("RecreatedRequestsDirWritable", func(t *testing.T) {
		e := e.in(t)
		if got := e.bash("local:hnext", "rm -rf /workspace/ipc/requests && echo removed", turnWait); got != "removed" {
			t.Fatalf("rm -rf /workspace/ipc/requests: %q", got)
		}
		if got := e.ask("local:hnext", "fake:tool list_tasks {}", turnWait); strings.Contains(got, "tool error") {
			ls := e.bash("local:hnext", "ls -la /workspace/ipc", turnWait)
			t.Errorf("after the agent removed its requests/, its tool call failed: %q\n%s", got, ls)
		}
	})

	// c. requests/ replaced by a symlink to the home's store/: the
	// databases stay where they are, and a well-formed request found there
	// is not carried out. Last: today it takes the store away.
	t.Run("RequestsDirToStore", func(t *testing.T) {
		e := e.in(t)
		ensureWhatsAppDB(t, e)
		checkStore(t, home)
		if t.Failed() {
			t.Fatal("the store was not intact before the attack")
		}
		// A request placed in store/: through the symlink it would be the
		// group's own send_message.
		writeFile(t, filepath.Join(home, "store", "evil5.json"), `{"id":"evil5","type":"send_message","args":{"text":"PWNED from store/"}}`)
		attack(t, e, "local:reqstore", "cd /workspace/ipc; "+shSwapForLink("requests", "../../../store"))
		after := lastID(e, "local:reqstore")
		// Two safety-net sweeps (3 s each) of the requests directory.
		noOutbound(t, e, "local:reqstore", after, 8*time.Second, "a request file in store/ was carried out")
		checkStore(t, home)
		checkAnswers(t, e, "local:main")
	})

	d.stop(t)
}

// restoreFile puts data back at path (a file or a planted symlink there is
// replaced), owned like its directory.
func restoreFile(t testing.TB, path string, data []byte) {
	os.Remove(path)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Logf("restore %s: %v", path, err)
		return
	}
	if fi, err := os.Stat(filepath.Dir(path)); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			os.Lchown(path, int(st.Uid), int(st.Gid))
		}
	}
}

// TestE2EBoundaryIdleClose runs, per daemon user, the attacks that need a
// container to close (idle timeout) between turns, and checks the
// containers' uid.
func TestE2EBoundaryIdleClose(t *testing.T) {
	parallel(t, long)
	for _, u := range daemonUsers() {
		t.Run(u.name, func(t *testing.T) {
			u.skipUnavailable(t)
			testBoundaryIdleClose(t, u)
		})
	}
}

func testBoundaryIdleClose(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "2s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	for _, g := range []string{"runlogs", "closer"} {
		e.mustCLI("groups", "add", "--tools", "full", "--name", g, "--no-trigger", "local:"+g)
	}
	d := e.start()
	home := e.home
	// Each step waits on the daemon's own view of its agents (its status),
	// not on the engine's events, which Podman delivers late or not at all.

	// j. The containers' uid: for every daemon user (root, a `docker`
	// group member, rootless Podman's user) the group's own high uid, not
	// 1000 (often a login user), never 0 and never the daemon's.
	t.Run("ContainerUID", func(t *testing.T) {
		e := e.in(t)
		got := e.bash("local:main", `echo "$(id -u):$(id -g)"`, turnWait)
		uid := groupUID(t, home, "main")
		if want := fmt.Sprintf("%d:%d", uid, uid); got != want || uid <= 61000 || uid > 61000+4095 || (!u.rootless && uid == u.uid) {
			t.Errorf("main's container, under a daemon running as %d, runs as %q; want its own uid above 61000 (BRIDGED_CONTAINER_UID's default), %s", u.uid, got, want)
		}
	})

	// f. Run logs live in the daemon-owned data/logs/<folder>/: a group that
	// replaces its logs/ by a symlink gets nothing written through it.
	t.Run("RunLogsSymlink", func(t *testing.T) {
		e := e.in(t)
		outDir := e.daemonDir(t)
		attack(t, e, "local:runlogs", "cd /workspace/group; mkdir -p logs; "+shSwapForLink("logs", outDir))
		waitNoAgent(t, e, "runlogs", turnWait)
		if got := e.ask("local:runlogs", "fake:reply second run", turnWait); got != "second run" {
			t.Errorf("local:runlogs answered %q; want %q", got, "second run")
		}
		waitNoAgent(t, e, "runlogs", turnWait) // the run log is complete
		checkEmptyDir(t, "a directory outside the home behind groups/runlogs/logs", outDir)
		logs, _ := filepath.Glob(filepath.Join(home, "data", "logs", "runlogs", "run-*.log"))
		if len(logs) == 0 {
			t.Errorf("no run log in data/logs/runlogs/ (found: %v); want the daemon's run logs there", grepNames(home, "run-"))
		}
	})

	// d. A symlink at input/_close.tmp pointing at store/bridged.db: writing
	// the close sentinel at idle close truncates nothing, and the daemon
	// keeps answering. Last: today it breaks the store.
	t.Run("CloseSentinelSymlink", func(t *testing.T) {
		e := e.in(t)
		ensureWhatsAppDB(t, e)
		checkStore(t, home)
		if t.Failed() {
			t.Fatal("the store was not intact before the attack")
		}
		attack(t, e, "local:closer", "ln -s ../../../../store/bridged.db /workspace/ipc/input/_close.tmp && echo planted")
		waitNoAgent(t, e, "closer", turnWait) // idle close: the sentinel was written
		checkStore(t, home)
		checkAnswers(t, e, "local:main")
		checkAnswers(t, e, "local:closer")
	})

	d.stop(t)
}

// j. BRIDGED_CONTAINER_UID chooses where a root daemon's group uids start.
func TestE2EBoundaryContainerUIDConfig(t *testing.T) {
	parallel(t, light)
	if os.Geteuid() != 0 {
		t.Skip("the daemon runs as this test's user, not root: BRIDGED_CONTAINER_UID applies to a root daemon only")
	}
	e := newEnv(t, "--idle-timeout", "2s")
	e.extraEnv = []string{"BRIDGED_CONTAINER_UID=61234", "BRIDGED_CONTAINER_GID=61234"}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	if got := e.bash("local:main", `echo "$(id -u):$(id -g)"`, turnWait); got != "61235:61235" || groupUID(t, e.home, "main") != 61235 {
		t.Errorf("with BRIDGED_CONTAINER_UID=61234 BRIDGED_CONTAINER_GID=61234 the first group's container runs as %q; want 61235:61235 (the first uid above)", got)
	}
	d.stop(t)
}

// i. One group floods its requests/ with 40,000 files while another
// group's agent calls a tool: that call is answered within seconds, not
// after the tool's 30 s timeout.
func TestE2EBoundaryRequestFlood(t *testing.T) {
	parallel(t, timed)
	onEngines(t, testBoundaryRequestFlood)
}

func testBoundaryRequestFlood(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	for _, g := range []string{"flood", "calm"} {
		e.mustCLI("groups", "add", "--tools", "full", "--name", g, "--no-trigger", "local:"+g)
	}
	d := e.start()
	// Both containers are warm, so the calm group's turn costs no start.
	if got := e.ask("local:calm", "fake:reply warm", turnWait); got != "warm" {
		t.Fatalf("local:calm answered %q", got)
	}
	flood := `cd /workspace/ipc/requests && i=0 && while [ $i -lt 40000 ]; do echo '{}' > f$i.json; i=$((i+1)); done && echo "flooded $i"`
	if got := e.bash("local:flood", flood, 3*time.Minute); !strings.Contains(got, "flooded 40000") {
		t.Fatalf("the flood did not run: %q", got)
	}
	start := time.Now()
	id := e.post("local:calm", `fake:tool send_message {"text":"calm hello"}`)
	const within = 10 * time.Second
	if first := e.waitOut("local:calm", id, 1, 45*time.Second)[0].Text; strings.Contains(first, "tool error") {
		t.Fatalf("during another group's flood of 40,000 request files, send_message failed after %s: %q",
			time.Since(start).Round(time.Millisecond), first)
	}
	got := e.waitOut("local:calm", id, 2, 45*time.Second)
	took := time.Since(start)
	if took > within {
		t.Errorf("during another group's flood a send_message took %s to answer; want under %s", took.Round(time.Millisecond), within)
	}
	var texts []string
	for _, m := range got {
		texts = append(texts, m.Text)
	}
	if len(got) < 2 || got[0].Text != "calm hello" || strings.Contains(got[1].Text, "tool error") {
		t.Errorf("local:calm got %q; want the tool's message %q, then the tool's answer without an error", texts, "calm hello")
	}
	d.stop(t)
}

// g. A group's folder replaced by a symlink to the home's store/. That
// group's next container must not see the store, the store stays intact,
// and the incident shows in `bridged status`. The main agent can no longer
// plant it (groups/ is read-only in its container: TestE2EMountRace), so
// the link is planted on the host, as the daemon's user could have (or an
// agent before groups/ was read-only). The daemon runs as a non-root user
// here, on Docker (the one whose containers could write groups/) and on
// rootless Podman.
func TestE2EBoundaryGroupFolderSymlink(t *testing.T) {
	parallel(t, light)
	for _, u := range daemonUsers() {
		if u.name == "root" {
			continue // the daemon users that are not root: on Docker and on rootless Podman
		}
		t.Run(u.name, func(t *testing.T) {
			u.skipUnavailable(t)
			testBoundaryGroupFolderSymlink(t, u)
		})
	}
}

func testBoundaryGroupFolderSymlink(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "victim", "--no-trigger", "local:victim")
	e.mustCLI("groups", "set", "--sees", "all", "main") // groups/ read-only in main, the mount attacked
	d := e.start()
	home := e.home
	ensureWhatsAppDB(t, e)
	if got := e.bash("local:main", "cd /workspace/groups; mkdir -p victim 2>&1; "+shSwapForLink("victim", "../store"), turnWait); !strings.Contains(got, "refused") {
		t.Errorf("the main agent replaced groups/victim: %q; want it refused (groups/ is read-only for main)", got)
	}
	if err := os.Symlink("../store", filepath.Join(home, "groups", "victim")); err != nil {
		t.Fatal(err)
	}
	got := e.bash("local:victim", "ls -la /workspace/group", turnWait)
	if strings.Contains(got, "bridged.db") || strings.Contains(got, "whatsapp.db") {
		t.Errorf("the group's container sees the store through its replaced folder:\n%s", got)
	}
	checkStore(t, home)
	if fi, err := os.Lstat(filepath.Join(home, "groups", "victim")); err != nil {
		t.Errorf("groups/victim after the group's run: %v; want a real directory", err)
	} else if !fi.IsDir() {
		t.Errorf("groups/victim is still not a directory (%v) after the group's run; want the symlink moved aside and a real directory recreated", fi.Mode().Type())
	}
	status := e.mustCLI("status")
	hit := false
	for _, line := range strings.Split(status, "\n") {
		if strings.Contains(line, "victim") && strings.Contains(line, "symlink") {
			hit = true
		}
	}
	if !hit {
		t.Errorf("bridged status does not show the incident (a line naming groups/victim and \"symlink\"):\n%s", status)
	}
	d.stop(t)
}
