package ipchost

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// pngHead is the start of a PNG file, enough for content sniffing.
var pngHead = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

// workspaceFile writes a file into folder's workspace and returns its path.
func (e *env) workspaceFile(t *testing.T, folder, rel string, data []byte) string {
	t.Helper()
	p := filepath.Join(e.home, "groups", folder, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// spooled lists the spool's entries (kept and staged).
func (e *env) spooled(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.home, "data", "outbox"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, d := range entries {
		names = append(names, d.Name())
	}
	return names
}

func sendFile(file string) ipc.Request {
	return ipc.NewRequest(ipc.SendMessageArgs{Text: "here it is", File: file})
}

func TestSendMessageWithFile(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	chart := append(append([]byte{}, pngHead...), bytes.Repeat([]byte("x"), 3000)...)
	p := e.workspaceFile(t, "family", "out/chart.png", chart)
	e.workspaceFile(t, "family", "notes.txt", []byte("shopping: milk\n"))
	e.workspaceFile(t, "family", "hello.ogg", []byte("OggS fake voice"))

	for _, tc := range []struct {
		file, name, kind, mime string
		data                   []byte
	}{
		{"out/chart.png", "chart.png", "image", "image/png", chart},
		{"/workspace/group/notes.txt", "notes.txt", "document", "text/plain; charset=utf-8", []byte("shopping: milk\n")},
		{"./hello.ogg", "hello.ogg", "audio", "audio/ogg", []byte("OggS fake voice")},
	} {
		resp := e.h.Handle(ctx, "family", sendFile(tc.file))
		if !resp.OK {
			t.Fatalf("send %s: %s", tc.file, resp.Error)
		}
		res := decodeData[ipc.SendResult](t, resp)
		if res.File == nil || res.File.Name != tc.name || res.File.Kind != tc.kind || res.File.Size != int64(len(tc.data)) {
			t.Errorf("send %s: file in answer %+v; want %s, %s, %d bytes", tc.file, res.File, tc.name, tc.kind, len(tc.data))
		}
		it, err := e.db.Outbox.Get(ctx, store.OutboxID(res.OutboxID))
		if err != nil {
			t.Fatal(err)
		}
		f, ok, err := e.h.home.Spool().Get(home.SpoolKey(int64(it.ID), it.ExternalID))
		if err != nil || !ok {
			t.Fatalf("send %s: spooled file: %v, %v; want it kept under the row's key", tc.file, ok, err)
		}
		got, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, tc.data) || f.Kind != tc.kind || f.MIME != tc.mime || f.Name != tc.name {
			t.Errorf("send %s: spooled %s %s %s (%d bytes); want %s %s %s (%d bytes)", tc.file, f.Name, f.Kind, f.MIME, len(got), tc.name, tc.kind, tc.mime, len(tc.data))
		}
	}

	// The agent changes its file after the send: what goes out is the
	// copy taken when the message was queued.
	if err := os.WriteFile(p, []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	it := e.outbox(t)[0]
	f, _, _ := e.h.home.Spool().Get(home.SpoolKey(int64(it.ID), it.ExternalID))
	if got, _ := os.ReadFile(f.Path); !bytes.Equal(got, chart) {
		t.Errorf("spooled copy changed with the workspace file: %q", got[:min(len(got), 20)])
	}
}

// The agent is an attacker: whatever it plants in its workspace, the
// daemon reads nothing outside it and sends nothing that is not a regular
// file within the caps.
func TestSendMessageFileRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ws := filepath.Join(e.home, "groups", "family")
	e.workspaceFile(t, "family", "ok.txt", []byte("fine"))
	e.workspaceFile(t, "main", "secret.txt", []byte("main's secret"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("/etc/passwd", filepath.Join(ws, "passwd.txt")))
	must(os.Symlink("/etc", filepath.Join(ws, "etc")))
	must(os.Symlink("ok.txt", filepath.Join(ws, "inside-link.txt")))
	must(syscall.Mkfifo(filepath.Join(ws, "pipe.txt"), 0o644))
	must(os.Mkdir(filepath.Join(ws, "dir"), 0o755))
	big := func(name string, head []byte, size int64) {
		p := e.workspaceFile(t, "family", name, head)
		must(os.Truncate(p, size))
	}
	big("huge.png", pngHead, MaxImageBytes+1)
	big("huge.pdf", []byte("%PDF-1.4"), MaxDocumentBytes+1)

	for _, tc := range []struct{ file, want string }{
		{"passwd.txt", "only regular files"},
		{"/workspace/group/passwd.txt", "only regular files"},
		{"etc/passwd", "only regular files"},
		{"inside-link.txt", "only regular files"},
		{"pipe.txt", "only regular files"},
		{"dir", "only regular files"},
		{"/etc/passwd", "outside your workspace"},
		{"../main/secret.txt", "outside your workspace"},
		{"/workspace/group/../../etc/passwd", "outside your workspace"},
		{"missing.txt", "no such file"},
		{"huge.png", "over the 16 MiB limit for image files"},
		{"huge.pdf", "over the 64 MiB limit"},
	} {
		before := e.snapshot(t)
		resp := e.h.Handle(ctx, "family", sendFile(tc.file))
		if resp.OK || !strings.Contains(resp.Error, tc.want) {
			t.Errorf("send %s: ok=%v error %q; want an error saying %q", tc.file, resp.OK, resp.Error, tc.want)
		}
		if strings.Contains(resp.Error, "root:") {
			t.Errorf("send %s: the error shows the file's content: %q", tc.file, resp.Error)
		}
		if after := e.snapshot(t); after != before {
			t.Errorf("send %s: a refused file changed the state", tc.file)
		}
	}
	if got := e.spooled(t); len(got) != 0 {
		t.Errorf("spool after refusals: %v; want empty", got)
	}
}

// A message that is not committed leaves no copy behind.
func TestSendMessageFileNotCommitted(t *testing.T) {
	e := newEnv(t)
	e.workspaceFile(t, "family", "ok.txt", []byte("fine"))
	e.msg.err = store.ErrInvalid
	resp := e.h.Handle(context.Background(), "family", sendFile("ok.txt"))
	if resp.OK {
		t.Fatal("send succeeded; want the messenger's error")
	}
	if got := e.spooled(t); len(got) != 0 {
		t.Errorf("spool after a failed send: %v; want empty", got)
	}
}

// A sparse file (a few KiB written, megabytes long) is refused, as its copy
// would take its full size; a file as long but written out in full goes.
func TestSendMessageFileSparse(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sparse := e.workspaceFile(t, "family", "sparse.pdf", []byte("%PDF-1.4"))
	if err := os.Truncate(sparse, 60<<20); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(sparse, &st); err != nil || st.Blocks*512 >= 1<<20 {
		t.Skipf("the test file system does not keep holes (%d blocks, %v)", st.Blocks, err)
	}
	e.workspaceFile(t, "family", "full.pdf", append([]byte("%PDF-1.4"), bytes.Repeat([]byte{'x'}, 2<<20)...))

	resp := e.h.Handle(ctx, "family", sendFile("sparse.pdf"))
	if resp.OK || !strings.Contains(resp.Error, "sparse") {
		t.Errorf("send sparse.pdf: ok=%v error %q; want it refused as sparse", resp.OK, resp.Error)
	}
	if got := e.spooled(t); len(got) != 0 {
		t.Errorf("spool after a sparse file: %v; want empty", got)
	}
	if resp := e.h.Handle(ctx, "family", sendFile("full.pdf")); !resp.OK {
		t.Errorf("send full.pdf: %s; want it sent", resp.Error)
	}
}

// Past a group's caps (files per minute, bytes per day) the tool is refused
// with a clear error and nothing is staged; another group is not held back,
// and the caps free up as the windows move on.
func TestSendMessageFileCaps(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	clock := time.Now()
	e.h.now = func() time.Time { return clock }
	e.h.cfg.Files = FileLimits{PerMinute: 3, BytesPerDay: 10 << 10}
	e.workspaceFile(t, "family", "a.txt", []byte("small"))
	e.workspaceFile(t, "family", "big.txt", bytes.Repeat([]byte("b"), 6<<10))
	e.workspaceFile(t, "work", "a.txt", []byte("small"))

	for i := range 3 {
		if resp := e.h.Handle(ctx, "family", sendFile("a.txt")); !resp.OK {
			t.Fatalf("send %d: %s", i+1, resp.Error)
		}
	}
	spooled := len(e.spooled(t))
	resp := e.h.Handle(ctx, "family", sendFile("a.txt"))
	if resp.OK || !strings.Contains(resp.Error, "3 files in the last minute") || !strings.Contains(resp.Error, "BRIDGED_OUTBOX_FILES_PER_MINUTE") {
		t.Errorf("4th file in a minute: ok=%v error %q; want refused past the per-minute cap", resp.OK, resp.Error)
	}
	if got := len(e.spooled(t)); got != spooled {
		t.Errorf("spool holds %d entries after a refusal; want %d", got, spooled)
	}
	if resp := e.h.Handle(ctx, "work", sendFile("a.txt")); !resp.OK {
		t.Errorf("another group's file: %s; want it sent", resp.Error)
	}

	clock = clock.Add(2 * time.Minute)
	if resp := e.h.Handle(ctx, "family", sendFile("big.txt")); !resp.OK {
		t.Fatalf("a minute later: %s; want it sent", resp.Error)
	}
	resp = e.h.Handle(ctx, "family", sendFile("big.txt"))
	if resp.OK || !strings.Contains(resp.Error, "BRIDGED_OUTBOX_BYTES_PER_DAY") {
		t.Errorf("12 KiB in a day with a 10 KiB cap: ok=%v error %q; want refused past the daily cap", resp.OK, resp.Error)
	}
	rows := e.outbox(t)
	var files int
	for _, it := range rows {
		if it.FileName != "" {
			files++
		}
	}
	if files != 5 {
		t.Errorf("%d outbox rows carry a file; want 5 (4 for family, 1 for work)", files)
	}
}

// Below the free-space floor no file is staged, and the agent is told why.
func TestSendMessageFileLowDisk(t *testing.T) {
	e := newEnv(t)
	e.workspaceFile(t, "family", "a.txt", []byte("small"))
	e.h.cfg.Floor = home.Floor{Dir: e.home, Min: 1 << 30, Free: func(string) (uint64, error) { return 100 << 20, nil }}
	resp := e.h.Handle(context.Background(), "family", sendFile("a.txt"))
	if resp.OK || !strings.Contains(resp.Error, "almost full") || !strings.Contains(resp.Error, "100.0 MiB free") {
		t.Errorf("send below the floor: ok=%v error %q; want refused, saying the disk is almost full", resp.OK, resp.Error)
	}
	if got := e.spooled(t); len(got) != 0 {
		t.Errorf("spool below the floor: %v; want empty", got)
	}
	if resp := e.h.Handle(context.Background(), "family", ipc.NewRequest(ipc.SendMessageArgs{Text: "no file"})); !resp.OK {
		t.Errorf("a message without a file below the floor: %s; want it sent", resp.Error)
	}
}
