package whatsapp

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/home"
)

// mediaClient is a test client whose registered family group saves media
// into its folder in a temporary home; it returns the group folder.
func mediaClient(t *testing.T, maxBytes int64) (*testClient, string) {
	t.Helper()
	tc, hm := mediaClientHome(t, maxBytes)
	return tc, hm.Layout().GroupDir("family")
}

func mediaClientHome(t *testing.T, maxBytes int64) (*testClient, *home.Home) {
	t.Helper()
	hm, err := home.New(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	tc := newTestClient(t, func(o *Options) {
		o.MaxMediaBytes = maxBytes
		o.Home = hm
	})
	tc.rec.media = func(chat string) (string, bool) { return "family", chat == familyChat.String() }
	return tc, hm
}

func writeDownload(data []byte) func(whatsmeow.DownloadableMessage, whatsmeow.File) error {
	return func(_ whatsmeow.DownloadableMessage, f whatsmeow.File) error {
		_, err := f.Write(data)
		return err
	}
}

func imageMessage(caption string, size uint64) *waE2E.Message {
	return &waE2E.Message{ImageMessage: &waE2E.ImageMessage{
		Caption: proto.String(caption), Mimetype: proto.String("image/jpeg"), FileLength: proto.Uint64(size),
	}}
}

func storedText(t *testing.T, tc *testClient) string {
	t.Helper()
	got := tc.rec.stored()
	if len(got) != 1 {
		t.Fatalf("stored %d messages; want 1", len(got))
	}
	return got[0].Text
}

func TestImageWithCaptionLandsInInbox(t *testing.T) {
	tc, dir := mediaClient(t, 0)
	photo := []byte("\xff\xd8\xff jpeg bytes")
	tc.wa.download = writeDownload(photo)
	if !tc.handleEvent(msgEvent(groupInfo("3EB0PHOTO1", alicePN), imageMessage("@Andy what is this?", uint64(len(photo))))) {
		t.Fatal("handleEvent = false; want true")
	}
	rel := "inbox/2026-11-22-3EB0PHOTO1.jpg"
	if got, want := storedText(t, tc), "@Andy what is this?\n[image: "+rel+"]"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatalf("read saved image: %v", err)
	}
	if !bytes.Equal(data, photo) {
		t.Errorf("saved %q; want %q", data, photo)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "inbox", ".download-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	// A redelivery reuses the saved file instead of downloading again.
	tc.rec.messages = nil
	tc.handleEvent(msgEvent(groupInfo("3EB0PHOTO1", alicePN), imageMessage("@Andy what is this?", uint64(len(photo)))))
	if got := tc.wa.downloadCount(); got != 1 {
		t.Errorf("downloads = %d; want 1", got)
	}
	if got := storedText(t, tc); got != "@Andy what is this?\n[image: "+rel+"]" {
		t.Errorf("redelivered text = %q", got)
	}
}

func TestDocumentAndVoiceNoteDownloads(t *testing.T) {
	tests := []struct {
		name string
		msg  *waE2E.Message
		want string
	}{
		{name: "document keeps its extension",
			msg: &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{FileName: proto.String("Q3 report.XLSX"),
				Mimetype: proto.String("application/octet-stream"), FileLength: proto.Uint64(4)}},
			want: "[document \"Q3 report.XLSX\": inbox/2026-11-22-E1.xlsx]"},
		{name: "voice note",
			msg: &waE2E.Message{AudioMessage: &waE2E.AudioMessage{PTT: proto.Bool(true),
				Mimetype: proto.String("audio/ogg; codecs=opus"), FileLength: proto.Uint64(4)}},
			want: "[voice note: inbox/2026-11-22-E1.ogg]"},
		{name: "video is not downloaded",
			msg:  &waE2E.Message{VideoMessage: &waE2E.VideoMessage{Mimetype: proto.String("video/mp4"), FileLength: proto.Uint64(4)}},
			want: "[video]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, _ := mediaClient(t, 0)
			tc.wa.download = writeDownload([]byte("data"))
			tc.handleEvent(msgEvent(groupInfo("E1", alicePN), tt.msg))
			if got := storedText(t, tc); got != tt.want {
				t.Errorf("text = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestMediaOverCapIsNotDownloaded(t *testing.T) {
	tc, dir := mediaClient(t, 20<<20)
	tc.wa.download = writeDownload([]byte("never"))
	tc.handleEvent(msgEvent(groupInfo("F1", alicePN), imageMessage("big one", 25<<20)))
	if got, want := storedText(t, tc), "big one\n[image: not downloaded, 25.0 MB is over the 20.0 MB limit]"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if got := tc.wa.downloadCount(); got != 0 {
		t.Errorf("downloads = %d; want 0", got)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "inbox")); len(entries) != 0 {
		t.Errorf("inbox holds %d files; want none", len(entries))
	}
}

func TestMediaLyingAboutItsSizeIsCut(t *testing.T) {
	tc, dir := mediaClient(t, 1024)
	tc.wa.download = writeDownload(bytes.Repeat([]byte("x"), 1<<20)) // claims 10 bytes, sends 1 MB
	tc.handleEvent(msgEvent(groupInfo("F2", alicePN), imageMessage("", 10)))
	if got, want := storedText(t, tc), "[image: not downloaded, it is over the 1.0 KB limit]"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "inbox")); len(entries) != 0 {
		t.Errorf("inbox holds %d files; want none", len(entries))
	}
}

func TestFailedDownloadKeepsPlaceholder(t *testing.T) {
	tc, dir := mediaClient(t, 0)
	tc.wa.download = func(whatsmeow.DownloadableMessage, whatsmeow.File) error {
		return whatsmeow.ErrMediaDownloadFailedWith404
	}
	tc.handleEvent(msgEvent(groupInfo("F3", alicePN), imageMessage("old photo", 10)))
	if got, want := storedText(t, tc), "old photo\n[image: download failed: download failed with status code 404]"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "inbox")); len(entries) != 0 {
		t.Errorf("inbox holds %d files; want none", len(entries))
	}
}

func TestHostileMessageIDStaysInInbox(t *testing.T) {
	tc, dir := mediaClient(t, 0)
	tc.wa.download = writeDownload([]byte("data"))
	tc.handleEvent(msgEvent(groupInfo("../../../etc/passwd", alicePN), imageMessage("", 4)))
	want := "[image: inbox/2026-11-22-etcpasswd.jpg]"
	if got := storedText(t, tc); got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "inbox", "2026-11-22-etcpasswd.jpg")); err != nil {
		t.Errorf("saved file: %v", err)
	}
}

// The agent replaced its inbox/ by a symlink to a directory outside its
// folder: the download lands in a fresh inbox/, nothing is written outside,
// and the incident is recorded.
func TestSymlinkedInboxIsNotFollowed(t *testing.T) {
	tc, hm := mediaClientHome(t, 0)
	dir := hm.Layout().GroupDir("family")
	outside := filepath.Join(hm.Layout().Dir, "store")
	for _, d := range []string{dir, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dir, "inbox")); err != nil {
		t.Fatal(err)
	}
	photo := []byte("sender-chosen bytes")
	tc.wa.download = writeDownload(photo)
	tc.handleEvent(msgEvent(groupInfo("L1", alicePN), imageMessage("", uint64(len(photo)))))
	if got, want := storedText(t, tc), "[image: inbox/2026-11-22-L1.jpg]"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "inbox")); err != nil || !fi.IsDir() {
		t.Fatalf("inbox: %v, %v; want a real directory", fi, err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "inbox", "2026-11-22-L1.jpg")); err != nil || !bytes.Equal(data, photo) {
		t.Errorf("saved file: %q, %v; want the photo", data, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the directory behind the link holds %d files; want none", len(entries))
	}
	inc := hm.Incidents()
	if len(inc) != 1 || inc[0].Path != "groups/family/inbox" || inc[0].Found != "symlink" {
		t.Errorf("incidents %+v; want the symlinked inbox", inc)
	}
}

// A link the agent planted at the file's name is not written through.
func TestPlantedLinkAtMediaNameIsNotFollowed(t *testing.T) {
	tc, hm := mediaClientHome(t, 0)
	inbox := filepath.Join(hm.Layout().GroupDir("family"), "inbox")
	if err := os.MkdirAll(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(hm.Layout().Dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(inbox, "2026-11-22-L2.jpg")); err != nil {
		t.Fatal(err)
	}
	tc.wa.download = writeDownload([]byte("sender-chosen bytes"))
	tc.handleEvent(msgEvent(groupInfo("L2", alicePN), imageMessage("", 19)))
	if data, err := os.ReadFile(victim); err != nil || string(data) != "precious" {
		t.Errorf("file behind the planted link: %q, %v; want it untouched", data, err)
	}
}

func TestCappedFileRefusesToGrow(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "capped")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := &cappedFile{f: f, limit: 8}
	if _, err := c.Write([]byte("12345678")); err != nil {
		t.Fatalf("write within limit: %v", err)
	}
	if _, err := c.Write([]byte("9")); !errors.Is(err, errTooLarge) {
		t.Errorf("write past limit: err = %v; want errTooLarge", err)
	}
	if _, err := c.WriteAt([]byte("xx"), 7); !errors.Is(err, errTooLarge) {
		t.Errorf("WriteAt past limit: err = %v; want errTooLarge", err)
	}
	if err := c.Truncate(9); !errors.Is(err, errTooLarge) {
		t.Errorf("Truncate past limit: err = %v; want errTooLarge", err)
	}
}
