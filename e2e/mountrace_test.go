package e2e

// Bind sources cannot be swapped between check and start (issue 20, finding
// 7). Whatever directory a container can write, the daemon can write too
// (its own uid, or granted by ACL). The engine resolves a bind source when
// it starts the container, after the daemon checked it: if the main agent
// could rename another group's folder and put a symlink to ../store in its
// place in that window, the other group's next container would get the
// home's store/ as its /workspace/group. The main agent sees the other
// groups' folders read-only (its own read-write), so the swap cannot be
// made at all (TestE2EMountRace); and the daemon confirms after each start
// that every bind mount is the directory it checked, which catches the swap
// still possible with extra mounts (TestE2EMountRaceExtraMount by chance,
// TestE2EMountSwapAtStart on every try; internal/container tests that check
// on its own).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// raceRestarts is how many times the other group's container starts while
// the main agent tries to swap its folder: before groups/ was read-only for
// main, the store showed within the first few.
const raceRestarts = 10

// extraRaceRestarts is the same for the extra-mount race, whose swap the
// post-start check catches (each caught start is retried, so each costs
// more): without the check the secret showed at the first start.
const extraRaceRestarts = 8

// TestE2EMountRace runs the main agent's swap of another group's folder per
// daemon user: as one that is not root (the shipped unit's), whose
// containers could write groups/ before it was read-only for them, and as
// root.
func TestE2EMountRace(t *testing.T) {
	// Restarts and a swap loop, nothing timed tightly, but ten restarts
	// per daemon user: heavy.
	parallel(t, heavy)
	for _, u := range daemonUsers() {
		t.Run(u.name, func(t *testing.T) {
			u.skipUnavailable(t)
			testMountRace(t, u)
		})
	}
}

func testMountRace(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "1s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "other", "--no-trigger", "local:other")
	// Main sees every group's folder: groups/ itself, read-only, the
	// mount attacked here (a main that sees a list gets a mount per
	// folder and no groups/ at all: TestE2EMainSeesOnlyAllowedFolders).
	e.mustCLI("groups", "set", "--sees", "all", "main")
	d := e.start()
	home := e.home
	ensureWhatsAppDB(t, e)

	// The other group's folder exists once it has run. Each step waits on
	// the daemon's own view of its agents (its status), not on the
	// engine's events, which Podman delivers late.
	if got := e.bash("local:other", "echo mine > /workspace/group/mine.txt && ls -A /workspace/group", turnWait); !strings.Contains(got, "mine.txt") {
		t.Fatalf("the other group's first run answered %q; want its folder's listing", got)
	}
	waitNoAgent(t, e, "other", turnWait)

	// The race: the main agent swaps the other group's folder for a symlink
	// to ../store and back in a loop (its turn lasts until the test puts
	// the stop file in its folder), while the other group's container is
	// started again and again and lists its /workspace/group.
	stop := filepath.Join(home, "groups", "main", "stop-swapping")
	loop := `cd /workspace/groups; touch /workspace/group/swapping; s=0; f=0; while [ ! -e /workspace/group/stop-swapping ]; do ` +
		`if mv other .held 2>/dev/null; then ln -s ../store other; s=$((s+1)); sleep 0.05; rm -f other; mv .held other 2>/dev/null; else f=$((f+1)); fi; sleep 0.02; done; ` +
		`echo "swaps=$s refused=$f"`
	mainID := e.post("local:main", "fake:bash "+loop)
	waitFile(t, filepath.Join(home, "groups", "main", "swapping"), 2*turnWait)
	leaked := false
	for i := 0; i < raceRestarts && !leaked; i++ {
		id := e.post("local:other", "fake:bash ls -A /workspace/group; echo listed")
		got := e.waitOut("local:other", id, 1, 2*turnWait)[0].Text
		if strings.Contains(got, "bridged.db") || strings.Contains(got, "whatsapp.db") {
			t.Errorf("start %d of the other group's container: its /workspace/group is the home's store/:\n%s", i+1, got)
			leaked = true
		} else if !strings.Contains(got, "listed") {
			t.Logf("start %d of the other group's container answered %q", i+1, got)
		}
		waitNoAgent(t, e, "other", turnWait) // idle close: the next message starts a new container
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := e.waitOut("local:main", mainID, 1, 2*turnWait)[0].Text
	noneShows(t, e, "local:other", "bridged.db", "whatsapp.db")
	t.Logf("the main agent's swap loop: %q", got)
	if !strings.Contains(got, "swaps=0 ") || strings.Contains(got, "refused=0") {
		t.Errorf("the main agent's swap loop answered %q; want every rename of groups/other refused (swaps=0)", got)
	}
	// Asked once, without a race: the main agent can write its own folder,
	// also through /workspace/groups, but cannot rename, replace or write
	// any other entry of groups/, nor the other group's folder.
	t.Run("MainCannotRename", func(t *testing.T) {
		e := e.in(t)
		cmd := `cd /workspace/groups && echo own > main/own.txt && echo "OWN=$(cat main/own.txt)"; ` +
			`mv other x 2>&1; ln -s ../store y 2>&1; mkdir z 2>&1; echo w > other/w.txt 2>&1; mv main main2 2>&1; true`
		got := e.bash("local:main", cmd, turnWait)
		t.Logf("the main agent's attempts: %q", got)
		if !strings.Contains(got, "OWN=own") {
			t.Errorf("the main agent could not write its own folder through /workspace/groups/main: %q", got)
		}
		if n := strings.Count(got, "Read-only file system"); n < 4 {
			t.Errorf("the main agent's rename, link, mkdir and write in groups/ answered %q; want each refused with \"Read-only file system\"", got)
		}
		for _, name := range []string{"x", "y", "z", "main2", "other/w.txt"} {
			if _, err := os.Lstat(filepath.Join(home, "groups", name)); err == nil {
				t.Errorf("the main agent made groups/%s on the host", name)
			}
		}
		if fi, err := os.Lstat(filepath.Join(home, "groups", "other")); err != nil || !fi.IsDir() {
			t.Errorf("groups/other after the main agent's attempts: %v, %v; want the real directory", fi, err)
		}
	})

	checkStore(t, home)
	if fi, err := os.Lstat(filepath.Join(home, "groups", "other")); err != nil || !fi.IsDir() {
		t.Errorf("groups/other after the race: %v, %v; want the real directory", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(home, "groups", "other", "mine.txt")); err != nil || string(b) != "mine\n" {
		t.Errorf("groups/other/mine.txt after the race: %q, %v; want the group's own file kept", b, err)
	}
	d.stop(t)
}

// The one swap the read-only groups/ leaves possible: extra mounts. The main
// group mounts a project read-write and the other group a directory inside
// it read-only, so the main agent can rename that directory and put a link
// to a secret directory outside the allowed roots in its place, in a loop,
// while the other group's container is started again and again. The
// allowlist resolves the link when it sees one, the mount check refuses a
// link on the way, and what slips between the check and the engine's mount
// is caught after the start: the other agent never lists the secret. The
// agent also moves the directory away and back: a start whose source is
// away when the engine looks is refused on every engine, and nothing is
// made in its place, so the other group lists its own app/ after the race.
// It runs per daemon user: the check after start must hold for both.
func TestE2EMountRaceExtraMount(t *testing.T) {
	parallel(t, timed)
	needDocker(t)
	// Timed, not light: each swap it catches costs the other group a stopped container
	// and a retry. The retries come quickly (--retry-base 100ms) and a
	// retry sequence that runs out ends in the chat's failure notice, which
	// the test takes as that start's answer: how many starts the swap hits
	// is chance, and none of them may leave a message without an answer.
	for _, u := range daemonUsers() {
		t.Run(u.name, func(t *testing.T) {
			u.skipUnavailable(t)
			testMountRaceExtraMount(t, u)
		})
	}
}

func testMountRaceExtraMount(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "1s", "--retry-base", "100ms")
	base := t.TempDir()
	allowed := filepath.Join(base, "allowed")
	project := filepath.Join(allowed, "project")
	app := filepath.Join(project, "app")
	secret := filepath.Join(base, "secret")
	for _, d := range []string{app, secret} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(app, "app.txt"), "the app\n")
	writeFile(t, filepath.Join(secret, "secret.txt"), "not for any agent\n")
	// The main agent may write the project whatever uid its container runs
	// as; the daemon's user reads the rest.
	for d, mode := range map[string]os.FileMode{filepath.Dir(base): 0o755, base: 0o755, allowed: 0o755, project: 0o777, app: 0o755, secret: 0o755} {
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
	}
	allowlist := filepath.Join(base, "mount-allowlist.json")
	writeFile(t, allowlist, `{"allowedRoots": [{"path": "`+allowed+`", "allowReadWrite": true}]}`)
	e.extraEnv = append(e.extraEnv, "BRIDGED_MOUNT_ALLOWLIST="+allowlist)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "other", "--no-trigger", "local:other")
	e.mustCLI("groups", "set", "--mount", project+":proj:rw", "main")
	e.mustCLI("groups", "set", "--mount", app+":app", "other")
	d := e.start()

	// Each step waits on the daemon's own view of its agents (its status),
	// not on the engine's events, which Podman delivers late.
	if got := e.bash("local:other", "ls -A /workspace/extra/app", turnWait); !strings.Contains(got, "app.txt") {
		t.Fatalf("the other group's first run lists %q in /workspace/extra/app; want app.txt", got)
	}
	waitNoAgent(t, e, "other", turnWait)

	stop := filepath.Join(e.home, "groups", "main", "stop-swapping")
	// Each round swaps app/ for the link, then moves it away and back 300
	// times as fast as mv runs: a start checked while app/ was there and
	// created while it was away is one the engine could make app/ for
	// (rootless Podman's Docker API did, an empty directory of its own,
	// into which the next `mv .held app` moved the real one).
	loop := `cd /workspace/extra/proj; touch /workspace/group/swapping; s=0; v=0; while [ ! -e /workspace/group/stop-swapping ]; do ` +
		`if mv app .held 2>/dev/null; then ln -s ` + secret + ` app; s=$((s+1)); sleep 0.2; rm -f app; mv .held app 2>/dev/null; fi; ` +
		`i=0; while [ $i -lt 300 ]; do mv app .held 2>/dev/null && mv .held app 2>/dev/null && v=$((v+1)); i=$((i+1)); done; done; ` +
		`echo "swaps=$s vanished=$v"`
	mainID := e.post("local:main", "fake:bash "+loop)
	waitFile(t, filepath.Join(e.home, "groups", "main", "swapping"), 2*turnWait)
	for i := 0; i < extraRaceRestarts; i++ {
		// The answer is the agent's listing, or the failure notice when
		// every start of the retry sequence was caught with a swapped mount.
		id := e.post("local:other", "fake:bash ls -A /workspace/extra/app 2>&1; echo listed")
		got := e.waitOut("local:other", id, 1, 2*turnWait)[0].Text
		if strings.Contains(got, "secret.txt") {
			t.Errorf("start %d of the other group's container: its /workspace/extra/app is the secret directory:\n%s", i+1, got)
			break
		}
		t.Logf("start %d of the other group's container answered %q", i+1, got)
		// The next message starts a container of its own.
		waitNoAgent(t, e, "other", turnWait)
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The main chat may also hold the owner's alerts of the other group's
	// failures: its agent's answer is the one that counts the swaps.
	got := waitOutHolding(e, "local:main", mainID, "swaps=", 2*turnWait)
	t.Logf("the main agent's loop: %q", got)
	// Without the race the other group's mount is its app/ again.
	id := e.post("local:other", "fake:bash ls -A /workspace/extra/app 2>&1; echo listed")
	after := waitOutHolding(e, "local:other", id, "listed", 2*turnWait)
	noneShows(t, e, "local:other", "secret.txt")
	if !strings.Contains(after, "app.txt") {
		t.Errorf("the other group's start after the race answered %q; want its app/ listed", after)
	}
	if !strings.Contains(got, "swaps=") || strings.Contains(got, "swaps=0") {
		t.Errorf("the main agent's swap loop answered %q; want it to have swapped its own project's app/ (it may)", got)
	}
	logs := d.logs()
	t.Logf("the daemon refused the link %d times at the allowlist, %d times at the mount check, %d starts whose source the engine found away, and stopped %d containers whose mount was swapped after the check",
		strings.Count(logs, "extra mounts refused"), strings.Count(logs, "bind-mount source failed its check"),
		strings.Count(logs, "a bind-mount source is not the directory that was checked; the container was not started"),
		strings.Count(logs, `"message":"a bind mount of the started container is not the directory that was checked`))
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "not the directory that was checked") {
			t.Logf("the first: %s", line)
			break
		}
	}
	if b, err := os.ReadFile(filepath.Join(secret, "secret.txt")); err != nil || string(b) != "not for any agent\n" {
		t.Errorf("the secret after the race: %q, %v; want it unchanged", b, err)
	}
	d.stop(t)
}

// waitOutHolding waits until an outbound message after id in chat holds s,
// and returns it.
func waitOutHolding(e *env, chat string, after int64, s string, within time.Duration) string {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for n := 1; ; n++ {
		out := e.waitOut(chat, after, n, time.Until(deadline))
		if m := out[len(out)-1]; strings.Contains(m.Text, s) {
			return m.Text
		}
	}
}

// noneShows fails if any message chat received so far holds one of names:
// an answer the test did not wait for (a retried run's) is looked at too.
func noneShows(t *testing.T, e *env, chat string, names ...string) {
	t.Helper()
	for _, m := range e.messages(chat, 0, 0) {
		for _, n := range names {
			if m.Direction == "out" && strings.Contains(m.Text, n) {
				t.Errorf("%s received %q, which shows %s", chat, m.Text, n)
				break
			}
		}
	}
}
