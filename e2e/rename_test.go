package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A rename of the assistant reaches its memory: the main chat's unedited
// CLAUDE.md names the new assistant when the agent next reads it, while
// the global one the owner edited is left as it is and `bridged doctor`
// says it still names the old assistant.
func TestE2ERenameReachesTheTemplates(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = []string{"BRIDGED_ASSISTANT_NAME=Andy"}
	e.mustCLI("groups", "add", "--name", "main", "--main", "--tools", "full", "local:main")
	d := e.start()
	const wait = 90 * time.Second
	if got := e.bash("local:main", "head -n 1 CLAUDE.md", wait); got != "# Andy — main channel" {
		t.Fatalf("the main agent's memory begins %q; want the template for Andy", got)
	}
	d.stop(t)

	global := filepath.Join(e.home, "groups", "global", "CLAUDE.md")
	b, err := os.ReadFile(global)
	if err != nil {
		t.Fatal(err)
	}
	edited := string(b) + "\nAndy signs every answer.\n"
	if err := os.WriteFile(global, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}

	e.extraEnv = []string{"BRIDGED_ASSISTANT_NAME=Bob"}
	d = e.start()
	if got := e.bash("local:main", "head -n 1 CLAUDE.md; grep -c Andy CLAUDE.md || true", wait); got != "# Bob — main channel\n0" {
		t.Errorf("after the rename to Bob the main agent's memory reads %q; want the template for Bob, no Andy", got)
	}
	if b, _ := os.ReadFile(global); string(b) != edited {
		t.Errorf("the edited global CLAUDE.md was changed by the rename:\n%s", b)
	}
	out, _ := e.cli("doctor")
	if !strings.Contains(out, "groups/global/CLAUDE.md still names the old assistant Andy (the assistant is now Bob)") ||
		strings.Contains(out, "groups/main/CLAUDE.md") {
		t.Errorf("doctor after the rename:\n%s\nwant the edited global CLAUDE.md named as still naming Andy, and only it", out)
	}
	d.stop(t)
}
