package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files a local chat keeps delivered (data/local/) are capped like the
// outbox's staged files: with BRIDGED_LOCAL_FILES=2, an agent that sends
// three files gets the first two delivered; the third message arrives
// saying its file was not delivered and why, and data/local holds two
// files for the chat, nothing more, nothing lost without a word.
func TestE2ELocalFilesCapped(t *testing.T) {
	parallel(t, light)
	onEngines(t, testE2ELocalFilesCapped)
}

func testE2ELocalFilesCapped(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "2m")
	e.extraEnv = append(e.extraEnv, "BRIDGED_LOCAL_FILES=2")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()

	if made := e.bash("local:main", `printf 'report' > /workspace/group/r.txt && echo made`, turnWait); !strings.Contains(made, "made") {
		t.Fatalf("the agent could not make its file: %q", made)
	}
	var shown []string
	for _, n := range []string{"one", "two", "three"} {
		id := e.post("local:main", `fake:tool send_message {"text":"file `+n+`","file":"r.txt"}`)
		for _, m := range e.waitOut("local:main", id, 2, turnWait) {
			if strings.HasPrefix(m.Text, "file ") {
				shown = append(shown, m.Text)
			}
		}
	}
	if len(shown) != 3 {
		t.Fatalf("the chat shows %q; want the three messages", shown)
	}
	for i, m := range shown[:2] {
		if !fileLineRE.MatchString(m) {
			t.Errorf("message %d: %q; want its file delivered", i+1, m)
		}
	}
	if m := shown[2]; fileLineRE.MatchString(m) || !strings.Contains(m, "file three\n[file not delivered: r.txt") ||
		!strings.Contains(m, "keeps 2 files") || !strings.Contains(m, "BRIDGED_LOCAL_FILES=2") {
		t.Errorf("the third message: %q; want it to say its file was not delivered, and why", m)
	}
	kept, err := filepath.Glob(filepath.Join(e.home, "data", "local", "main~*", "*"))
	if err != nil || len(kept) != 2 {
		t.Errorf("data/local holds %v (%v) for the chat; want two files", kept, err)
	}
	for _, k := range kept {
		if b, err := os.ReadFile(k); err != nil || string(b) != "report" {
			t.Errorf("%s holds %q (%v); want the agent's file", k, b, err)
		}
	}
	d.stop(t)
}
