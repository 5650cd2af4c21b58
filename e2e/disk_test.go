package e2e

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// diskUsage is the bytes allocated under dir (what the files take on disk,
// holes excluded), and how many regular files it holds.
func diskUsage(t *testing.T, dir string) (bytes int64, files int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			bytes += st.Blocks * 512
		}
		if info.Mode().IsRegular() {
			files++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bytes, files
}

// The outbox flood of the attack: the agent, through its shell, makes a
// 60 MB sparse file (4 KiB on disk) and sends it ten times. Each send is
// refused as sparse, so data/outbox does not grow by the 600 MB of full
// copies; then it sends a real 1 MiB file ten times in a minute, and past
// the group's cap (BRIDGED_OUTBOX_FILES_PER_MINUTE=3) each send is refused.
// The agent is told why every time, and data/outbox grows by less than the
// per-group cap.
func TestE2EOutboxFlood(t *testing.T) {
	parallel(t, timed)
	onEngines(t, testOutboxFlood)
}

func testOutboxFlood(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "2m")
	e.extraEnv = append(e.extraEnv, "BRIDGED_OUTBOX_FILES_PER_MINUTE=3", "BRIDGED_OUTBOX_BYTES_PER_DAY=64m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	spool := filepath.Join(e.home, "data", "outbox")

	made := e.bash("local:main", `truncate -s 60M /workspace/group/f && dd if=/dev/urandom of=/workspace/group/real.bin bs=1024 count=1024 2>/dev/null && ls -ls /workspace/group/f && echo made`, turnWait)
	if !strings.Contains(made, "made") {
		t.Fatalf("the agent could not make its files: %q", made)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(e.home, "groups", "main", "f"), &st); err != nil || st.Size != 60<<20 || st.Blocks*512 > 1<<20 {
		t.Fatalf("the agent's file: %d bytes, %d blocks (%v); want a 60 MiB sparse file", st.Size, st.Blocks, err)
	}

	flood := func(file string) string {
		var b strings.Builder
		for range 10 {
			b.WriteString(`fake:tool send_message {"text":"take it","file":"` + file + `"}` + "\n")
		}
		return b.String()
	}

	before, _ := diskUsage(t, spool)
	start := time.Now()
	id := e.post("local:main", flood("f"))
	out := e.waitOut("local:main", id, 1, turnWait)
	took := time.Since(start)
	answer := out[len(out)-1].Text
	if n := strings.Count(answer, "sparse"); n != 10 {
		t.Errorf("the tool answered the 10 sends of a sparse file with %d refusals naming it sparse; want 10:\n%s", n, answer)
	}
	for _, o := range out {
		if fileLineRE.MatchString(o.Text) {
			t.Errorf("the chat got a sparse file: %q", o.Text)
		}
	}
	after, _ := diskUsage(t, spool)
	if grew := after - before; grew >= 60<<20 {
		t.Errorf("data/outbox grew by %d MiB in %s for a 4 KiB sparse file sent 10 times; want less than one copy", grew>>20, took.Round(time.Millisecond))
	}

	before, _ = diskUsage(t, spool)
	id = e.post("local:main", flood("real.bin"))
	out = e.waitOut("local:main", id, 4, turnWait) // 3 files, then the answer
	answer = out[len(out)-1].Text
	if n := strings.Count(answer, "BRIDGED_OUTBOX_FILES_PER_MINUTE"); n != 7 {
		t.Errorf("past 3 files a minute, %d of 10 sends were refused naming the cap; want 7:\n%s", n, answer)
	}
	sent := 0
	for _, o := range out {
		if fileLineRE.MatchString(o.Text) {
			sent++
		}
	}
	if sent != 3 {
		t.Errorf("the chat got %d files; want 3 (the cap)", sent)
	}
	after, _ = diskUsage(t, spool)
	if grew := after - before; grew >= 64<<20 {
		t.Errorf("data/outbox grew by %d MiB; want less than the group's daily cap (64 MiB)", grew>>20)
	}
	d.stop(t)
}

// A file the agent sends goes out, and then its copy in data/outbox is
// removed: the outbox row keeps the file's name and size, and the local
// chat still shows a file that holds what the agent wrote.
func TestE2ESentFileCopyRemoved(t *testing.T) {
	parallel(t, light)
	onEngines(t, testE2ESentFileCopyRemoved)
}

func testE2ESentFileCopyRemoved(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	spool := filepath.Join(e.home, "data", "outbox")

	made := e.bash("local:main", `printf 'quarterly numbers' > /workspace/group/report.txt && echo made`, turnWait)
	if !strings.Contains(made, "made") {
		t.Fatalf("the agent could not make its file: %q", made)
	}
	id := e.post("local:main", `fake:tool send_message {"text":"The report.","file":"report.txt"}`)
	out := e.waitOut("local:main", id, 2, turnWait)
	m := fileLineRE.FindStringSubmatch(out[0].Text)
	if m == nil || m[1] != "report.txt" {
		t.Fatalf("first message %q; want the file line of report.txt", out[0].Text)
	}
	if data, err := os.ReadFile(m[4]); err != nil || string(data) != "quarterly numbers" {
		t.Errorf("the chat's file at %s holds %q (%v); want what the agent wrote", m[4], data, err)
	}

	// The copy goes right after the row is marked sent.
	removed := d.waitLog("sent file's copy removed", 30*time.Second)
	if _, files := diskUsage(t, spool); files != 0 || !removed {
		t.Errorf("data/outbox holds %d files after the file was delivered (removal logged: %v); want its copy removed", files, removed)
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.home, "store", "bridged.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var state, name string
	var size int64
	err = db.QueryRowContext(context.Background(), `SELECT state, file_name, file_size FROM outbox WHERE file_name != '' ORDER BY id DESC LIMIT 1`).
		Scan(&state, &name, &size)
	if err != nil || state != "sent" || name != "report.txt" || size != int64(len("quarterly numbers")) {
		t.Errorf("outbox row of the file: %s %q %d bytes (%v); want sent, report.txt, %d bytes", state, name, size, err, len("quarterly numbers"))
	}
	d.stop(t)
}

// Below the free-space floor (BRIDGED_MIN_FREE, here far above what the
// test's disk has free) the daemon stages no outgoing file and downloads no
// media, and says so: the agent's send_message is refused with the reason,
// an attached file reaches the agent as a placeholder saying it was not
// downloaded and why, and the owner's low-disk alert is in the main chat.
func TestE2ELowDiskFloor(t *testing.T) {
	parallel(t, light)
	onEngines(t, testE2ELowDiskFloor)
}

func testE2ELowDiskFloor(t *testing.T, u daemonUser) {
	e := u.env(t, "--idle-timeout", "2m")
	e.extraEnv = append(e.extraEnv, "BRIDGED_MIN_FREE=900000g")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()

	// The alert is posted by the daemon's first disk check, at its start;
	// waiting for it first keeps it from being read as the agent's answer
	// below.
	alerted, cursor := false, int64(0)
	for deadline := time.Now().Add(60 * time.Second); !alerted && time.Now().Before(deadline); {
		for _, m := range e.messages("local:main", cursor, 5*time.Second) {
			cursor = max(cursor, m.ID)
			alerted = alerted || m.Direction == "out" && strings.Contains(m.Text, "free on the disk")
		}
	}
	if !alerted {
		t.Fatal("the main chat has no low-disk alert; want the owner told")
	}

	made := e.bash("local:main", `printf 'notes' > /workspace/group/notes.txt && echo made`, turnWait)
	if !strings.Contains(made, "made") {
		t.Fatalf("the agent could not make its file: %q", made)
	}
	id := e.post("local:main", `fake:tool send_message {"text":"Here.","file":"notes.txt"}`)
	out := e.waitOut("local:main", id, 1, turnWait)
	var refusal string
	for _, o := range out {
		if fileLineRE.MatchString(o.Text) {
			t.Errorf("the chat got a file below the floor: %q", o.Text)
		}
		if strings.Contains(o.Text, "tool error") {
			refusal = o.Text
		}
	}
	if !strings.Contains(refusal, "almost full") {
		t.Errorf("the tool answered %q; want a refusal saying the disk is almost full", out[len(out)-1].Text)
	}
	if _, files := diskUsage(t, filepath.Join(e.home, "data", "outbox")); files != 0 {
		t.Errorf("data/outbox holds %d files below the floor; want none", files)
	}

	// The CLI runs as the daemon's user (Podman's is not root): the file
	// and its directories are readable to every user.
	scan := attachFile(t, "scan.pdf", []byte("%PDF-1.4 scan"))
	for _, p := range []string{scan, filepath.Dir(scan), filepath.Dir(filepath.Dir(scan))} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shown := e.mustCLI("chat", "-m", "what is this?", "--attach", scan, "main")
	if !strings.Contains(shown, "not downloaded") || !strings.Contains(shown, "almost full") {
		t.Errorf("with an attached file below the floor the agent answered %q; want the placeholder saying it was not downloaded, the disk being almost full", shown)
	}
	if _, files := diskUsage(t, filepath.Join(e.home, "groups", "main", "inbox")); files != 0 {
		t.Errorf("inbox/ holds %d files below the floor; want none", files)
	}

	d.stop(t)
}
