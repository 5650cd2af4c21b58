package e2e

// The main group sees other groups' folders only as the owner allows
// (issue 34): each folder it sees is a read-only mount of its own at
// /workspace/groups/<folder>, so one it does not see is not in its
// container at all, and a change of the setting reaches a running main
// agent.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2EMainSeesOnlyAllowedFolders runs on Docker (root daemon) and
// rootless Podman, each agent with a uid of its own: a new main sees no
// other group's folder; `groups set main --sees other` stops the idle main
// agent, and the next one reads other's file but writes nothing there and
// does not see third; `--sees none` takes it away again; `--sees all` reads
// every folder by name.
func TestE2EMainSeesOnlyAllowedFolders(t *testing.T) {
	parallel(t, light)
	onEngines(t, func(t *testing.T, u daemonUser) {
		e := u.env(t, "--idle-timeout", "2m")
		e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
		e.mustCLI("groups", "add", "--tools", "full", "--name", "other", "--no-trigger", "local:other")
		e.mustCLI("groups", "add", "--tools", "full", "--name", "third", "--no-trigger", "local:third")
		d := e.start()
		for _, g := range []string{"other", "third"} {
			if got := e.bash("local:"+g, "echo secret-of-"+g+" > /workspace/group/secret.txt && echo wrote", turnWait); got != "wrote" {
				t.Fatalf("%s's agent answered %q; want its file written", g, got)
			}
		}
		if list := e.mustCLI("groups", "list"); !strings.Contains(list, "SEES") || !strings.Contains(list, "none") {
			t.Errorf("groups list:\n%s\nwant a SEES column saying none for the new main group", list)
		}
		// What the main agent sees: the listing of /workspace/groups, each
		// group's file read by name, and a write into other's folder.
		look := `echo "LS=$(ls /workspace/groups 2>&1 | tr '\n' ' ')"; ` +
			`for g in other third; do echo "$g=$(cat /workspace/groups/$g/secret.txt 2>&1)"; done; ` +
			`echo "WRITE=$({ echo x > /workspace/groups/other/w.txt; } 2>&1 && echo done)"; ` +
			`echo "RENAME=$({ mv /workspace/groups/other /workspace/groups/stolen; } 2>&1 && echo done)"`
		sees := func(when string) map[string]string {
			t.Helper()
			got := e.bash("local:main", look, turnWait)
			t.Logf("the main agent, %s:\n%s", when, got)
			said := map[string]string{}
			for _, l := range strings.Split(got, "\n") {
				if k, v, ok := strings.Cut(l, "="); ok {
					said[k] = v
				}
			}
			return said
		}
		unseen := func(when string, said map[string]string, g string) {
			t.Helper()
			if strings.Contains(said["LS"], g) || !strings.Contains(said[g], "No such file or directory") {
				t.Errorf("the main agent, %s, lists %q and reads %q from %s's folder; want no %s in /workspace/groups at all", when, said["LS"], said[g], g, g)
			}
		}

		said := sees("as a new main")
		if strings.TrimSpace(said["LS"]) != "main" {
			t.Errorf("a new main agent lists /workspace/groups as %q; want its own folder only", said["LS"])
		}
		unseen("as a new main", said, "other")
		unseen("as a new main", said, "third")

		// The main agent is idle and running: the change stops it.
		out := e.mustCLI("groups", "set", "--sees", "other", "main")
		if !strings.Contains(out, "other groups' folders it sees: other") || !strings.Contains(out, "Applied: the running agent was stopped") {
			t.Errorf("groups set --sees other:\n%s\nwant the setting and the running main agent stopped", out)
		}
		said = sees("seeing other")
		if f := strings.Fields(said["LS"]); len(f) != 2 || f[0] != "main" || f[1] != "other" {
			t.Errorf("the main agent seeing other lists /workspace/groups as %q; want main and other", said["LS"])
		}
		if said["other"] != "secret-of-other" {
			t.Errorf("the main agent seeing other reads %q from other's folder; want %q", said["other"], "secret-of-other")
		}
		if !strings.Contains(said["WRITE"], "Read-only file system") {
			t.Errorf("the main agent's write into other's folder answered %q; want \"Read-only file system\"", said["WRITE"])
		}
		unseen("seeing other", said, "third")
		// Renaming the mount in its own container changes nothing on the
		// host: groups/ is no mount of main's.
		if b, err := os.ReadFile(filepath.Join(e.home, "groups", "other", "secret.txt")); err != nil || string(b) != "secret-of-other\n" {
			t.Errorf("groups/other/secret.txt after the main agent's rename (%q): %q, %v; want it intact", said["RENAME"], b, err)
		}

		out = e.mustCLI("groups", "set", "--sees", "none", "main")
		if !strings.Contains(out, "Applied: the running agent was stopped") {
			t.Errorf("groups set --sees none:\n%s\nwant the running main agent stopped", out)
		}
		said = sees("seeing none again")
		unseen("seeing none again", said, "other")

		// All: the whole groups/ directory, read-only, as before the
		// setting; groups/ is 0711, so each folder is read by name.
		e.mustCLI("groups", "set", "--sees", "all", "main")
		said = sees("seeing all")
		for _, g := range []string{"other", "third"} {
			if said[g] != "secret-of-"+g {
				t.Errorf("the main agent seeing all reads %q from %s's folder; want %q", said[g], g, "secret-of-"+g)
			}
		}
		d.stop(t)
	})
}
