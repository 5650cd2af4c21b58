package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fileLineRE matches the line a local chat shows for a file the assistant
// sent: "[file: name (size, kind) path]".
var fileLineRE = regexp.MustCompile(`\[file: (\S+) \(([^,]+), (\w+)\) (/\S+)\]`)

// An agent makes a file in its workspace and sends it with send_message:
// the local channel delivers it (the chat shows the file and where the
// local chat's copy is, and the copy holds what the agent wrote). A symlink to
// /etc/passwd planted in the workspace, or the path itself, is refused with
// a clear error and nothing of it leaves the host's file system.
func TestE2ESendMessageFile(t *testing.T) {
	parallel(t, light)
	onEngines(t, testSendMessageFile)
}

func testSendMessageFile(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()

	made := e.bash("local:main", `mkdir -p /workspace/group/out && printf '\211PNG\r\n\032\nchart-from-the-agent' > /workspace/group/out/chart.png && `+
		`ln -s /etc/passwd /workspace/group/passwd.txt && ln -s /etc /workspace/group/etc && echo made`, turnWait)
	if !strings.Contains(made, "made") {
		t.Fatalf("the agent could not make its files: %q", made)
	}

	id := e.post("local:main", `fake:tool send_message {"text":"Here is the chart.","file":"out/chart.png"}`)
	out := e.waitOut("local:main", id, 2, turnWait)
	msg, answer := out[0].Text, out[1].Text
	if !strings.HasPrefix(msg, "Here is the chart.\n") {
		t.Fatalf("first message %q; want the caption, then the file", msg)
	}
	m := fileLineRE.FindStringSubmatch(msg)
	if m == nil || m[1] != "chart.png" || m[3] != "image" {
		t.Fatalf("message %q; want a line [file: chart.png (…, image) path]", msg)
	}
	spool := filepath.Join(e.home, "data", "outbox")
	delivered := filepath.Join(e.home, "data", "local")
	if !strings.HasPrefix(m[4], delivered+string(filepath.Separator)) {
		t.Errorf("the file is shown at %s; want the local chat's copy under %s", m[4], delivered)
	}
	if data, err := os.ReadFile(m[4]); err != nil || string(data) != "\x89PNG\r\n\x1a\nchart-from-the-agent" {
		t.Errorf("the copy at %s holds %q (%v); want what the agent wrote", m[4], data, err)
	}
	if !strings.Contains(answer, "image chart.png") || strings.Contains(answer, "tool error") {
		t.Errorf("the tool answered %q; want the file queued", answer)
	}

	// bridged chat shows the file as the chat does.
	shown, err := e.cli("chat", "-m", `fake:tool send_message {"text":"Again.","file":"/workspace/group/out/chart.png"}`, "main")
	if err != nil || !strings.Contains(shown, "Again.\n[file: chart.png (") || !strings.Contains(shown, delivered) {
		t.Errorf("bridged chat printed %q (%v); want the caption and the file line with its copy's path", shown, err)
	}

	for _, file := range []string{"passwd.txt", "etc/passwd", "/etc/passwd", "/workspace/group/../../etc/passwd"} {
		id := e.post("local:main", `fake:tool send_message {"text":"see this","file":"`+file+`"}`)
		out := e.waitOut("local:main", id, 1, turnWait)
		for _, o := range out {
			if strings.Contains(o.Text, "root:") || fileLineRE.MatchString(o.Text) {
				t.Errorf("file %s: the chat got %q; want no file", file, o.Text)
			}
		}
		if got := out[len(out)-1].Text; !strings.Contains(got, "tool error") ||
			!(strings.Contains(got, "only regular files") || strings.Contains(got, "outside your workspace")) {
			t.Errorf("file %s: the tool answered %q; want an error saying the file is refused", file, got)
		}
	}
	if hits := grepFiles(t, spool, "root:"); len(hits) > 0 {
		t.Errorf("the spool holds the host's passwd: %v", hits)
	}
	d.stop(t)
}
