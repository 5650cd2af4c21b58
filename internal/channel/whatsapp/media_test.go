package whatsapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ingest"
	mediapool "github.com/bridged-app/bridged/internal/media"
	bridgedstore "github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// mediaEnv is a test client whose sink stores messages and their media in
// a real store, as the router does, and hands the media to a real media
// pool fetching through the client; the family group's folder is "family".
type mediaEnv struct {
	*testClient
	db      *bridgedstore.DB
	home    *home.Home
	pool    *mediapool.Pool
	settled chan bridgedstore.ChatID
}

// storeSink is the recorder with Inbound doing what the ingest's does with
// media: the message and its media row in one transaction, then the pool's
// queue.
type storeSink struct {
	*recorder
	db    *bridgedstore.DB
	queue *mediapool.Queue
}

func (s *storeSink) Inbound(ctx context.Context, seen ingest.Changed, m channel.Message) (bridgedstore.MessageID, error) {
	if _, err := s.recorder.Inbound(ctx, seen, m); err != nil {
		return 0, err
	}
	var row *bridgedstore.Media
	var id bridgedstore.MessageID
	err := s.db.Tx(ctx, func(tx *bridgedstore.Tx) error {
		var inserted bool
		var err error
		id, inserted, err = tx.Messages.Insert(ctx, bridgedstore.Message{Chat: bridgedstore.ChatID(m.Chat), ExternalID: m.ExternalID,
			Sender: m.Sender, Text: m.Text, SentAt: m.SentAt, Mentioned: m.Mentioned})
		if err != nil || !inserted || m.Media == nil {
			return err
		}
		row = &bridgedstore.Media{MessageID: id, Chat: bridgedstore.ChatID(m.Chat), Source: m.Media.Source, Ref: m.Media.Ref,
			Label: m.Media.Label, Name: m.Media.Name, MIME: m.Media.MIME, Size: m.Media.Size, Voice: m.Media.Voice,
			Seconds: m.Media.Seconds, Head: m.Media.Head, Tail: m.Media.Tail}
		return tx.Media.Insert(ctx, *row)
	})
	if err == nil && row != nil {
		s.queue.Add(*row)
	}
	return id, err
}

func newMediaEnv(t *testing.T, maxBytes int64) *mediaEnv {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	db := storetest.OpenHome(t, dir)
	for _, g := range []bridgedstore.Group{
		{Chat: bridgedstore.ChatID(familyChat.String()), Name: "Family", Folder: "family", Trigger: "@Andy"},
		{Chat: bridgedstore.ChatID(otherChat.String()), Name: "Other", Folder: "other", Trigger: "@Andy"},
	} {
		if _, err := db.Groups.Add(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"family", "other"} {
		if err := os.MkdirAll(hm.Layout().GroupDir(f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tc := newTestClient(t, nil)
	tc.rec.registered[otherChat.String()] = true
	tc.conn.setState(channel.StateConnected, "")
	e := &mediaEnv{testClient: tc, db: db, home: hm, settled: make(chan bridgedstore.ChatID, 16)}
	queue := mediapool.NewQueue()
	e.pool, err = mediapool.New(mediapool.Config{MaxBytes: maxBytes, RetryDelays: []time.Duration{time.Millisecond}}, mediapool.Deps{
		Store: db, Home: hm, Queue: queue, Fetchers: map[string]mediapool.Fetcher{ChannelName: tc.Client},
		Settled: func(c bridgedstore.ChatID) { e.settled <- c }, Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	tc.sink = &storeSink{recorder: tc.rec, db: db, queue: queue}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = e.pool.Run(pctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// settle waits for the next settled media and returns its message's text.
func (e *mediaEnv) settle(t *testing.T, chat types.JID, ext string) string {
	t.Helper()
	select {
	case <-e.settled:
	case <-time.After(10 * time.Second):
		t.Fatalf("no media settled within 10s")
	}
	return e.text(t, chat, ext)
}

func (e *mediaEnv) text(t *testing.T, chat types.JID, ext string) string {
	t.Helper()
	msgs, err := e.db.Messages.After(context.Background(), bridgedstore.ChatID(chat.String()), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.ExternalID == ext {
			return m.Text
		}
	}
	t.Fatalf("message %s not stored", ext)
	return ""
}

func (e *mediaEnv) inbox(folder string) string {
	return filepath.Join(e.home.Layout().GroupDir(folder), "inbox")
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
		DirectPath: proto.String("/v/t62.7118-24/photo"), MediaKey: []byte("media key"),
	}}
}

// The message is stored and acknowledged with a reference to its media
// before anything is downloaded; the media worker then saves it into the
// group's inbox and the placeholder names it.
func TestImageWithCaptionLandsInInbox(t *testing.T) {
	e := newMediaEnv(t, 0)
	photo := []byte("\xff\xd8\xff jpeg bytes")
	gate := make(chan struct{})
	var got whatsmeow.DownloadableMessage
	e.wa.download = func(m whatsmeow.DownloadableMessage, f whatsmeow.File) error {
		<-gate
		got = m
		_, err := f.Write(photo)
		return err
	}
	if !e.handleEvent(msgEvent(groupInfo("3EB0PHOTO1", alicePN), imageMessage("@Andy what is this?", uint64(len(photo))))) {
		t.Fatal("handleEvent = false; want true")
	}
	if got := e.text(t, familyChat, "3EB0PHOTO1"); got != "@Andy what is this?\n[image: downloading]" {
		t.Fatalf("stored text before the download = %q", got)
	}
	if m := e.rec.stored(); len(m) != 1 || m[0].Media == nil {
		t.Fatalf("stored %+v; want one message with its media", m)
	}
	close(gate)
	rel := "inbox/2026-11-22-3EB0PHOTO1.jpg"
	if got, want := e.settle(t, familyChat, "3EB0PHOTO1"), "@Andy what is this?\n[image: "+rel+"]"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	data, err := os.ReadFile(filepath.Join(e.home.Layout().GroupDir("family"), rel))
	if err != nil || !bytes.Equal(data, photo) {
		t.Fatalf("saved image: %q, %v; want %q", data, err, photo)
	}
	if im, ok := got.(*waE2E.ImageMessage); !ok || im.GetDirectPath() != "/v/t62.7118-24/photo" || string(im.GetMediaKey()) != "media key" {
		t.Errorf("downloaded %T %v; want the message's own path and key", got, got)
	}
	leftovers, _ := filepath.Glob(filepath.Join(e.inbox("family"), ".download-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	// A redelivery is not stored, nor downloaded, again.
	e.handleEvent(msgEvent(groupInfo("3EB0PHOTO1", alicePN), imageMessage("@Andy what is this?", uint64(len(photo)))))
	if got := e.wa.downloadCount(); got != 1 {
		t.Errorf("downloads = %d; want 1", got)
	}
}

// A slow download holds nothing but its own chat: other chats' messages,
// and later messages of the same chat, are stored and acknowledged while it
// runs; the later message of its chat waits for it.
func TestSlowDownloadDoesNotHoldInbound(t *testing.T) {
	e := newMediaEnv(t, 0)
	started, release := make(chan struct{}), make(chan struct{})
	e.wa.download = func(_ whatsmeow.DownloadableMessage, f whatsmeow.File) error {
		close(started)
		<-release
		_, err := f.Write([]byte("data"))
		return err
	}
	if !e.handleEvent(msgEvent(groupInfo("SLOW1", alicePN), imageMessage("", 4))) {
		t.Fatal("handleEvent(image) = false")
	}
	<-started
	other := groupInfo("OTHER1", bobPN)
	other.Chat = otherChat
	if !e.handleEvent(msgEvent(other, &waE2E.Message{Conversation: proto.String("@Andy hello")})) {
		t.Fatal("handleEvent(other chat) = false while a download runs")
	}
	if !e.handleEvent(msgEvent(groupInfo("LATER1", alicePN), &waE2E.Message{Conversation: proto.String("and this")})) {
		t.Fatal("handleEvent(same chat) = false while a download runs")
	}
	if got := e.text(t, otherChat, "OTHER1"); got != "@Andy hello" {
		t.Fatalf("other chat's message = %q", got)
	}
	ctx := context.Background()
	fam := bridgedstore.ChatID(familyChat.String())
	if msgs, _, _ := e.db.Messages.Pending(ctx, fam, 0, 0); len(msgs) != 0 {
		t.Fatalf("pending in the downloading chat = %+v; want none until the image is saved", msgs)
	}
	if msgs, _, _ := e.db.Messages.Pending(ctx, bridgedstore.ChatID(otherChat.String()), 0, 0); len(msgs) != 1 {
		t.Fatalf("pending in the other chat = %+v; want its message", msgs)
	}
	close(release)
	if got := e.settle(t, familyChat, "SLOW1"); got != "[image: inbox/2026-11-22-SLOW1.jpg]" {
		t.Fatalf("text = %q", got)
	}
	if msgs, _, _ := e.db.Messages.Pending(ctx, fam, 0, 0); len(msgs) != 2 {
		t.Fatalf("pending after the download = %+v; want the image and the later message", msgs)
	}
}

func TestDocumentAndVoiceNoteDownloads(t *testing.T) {
	tests := []struct {
		name, ext string
		msg       *waE2E.Message
		want      string
		media     bool
	}{
		{name: "document keeps its extension", ext: "E1",
			msg: &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{FileName: proto.String("Q3 report.XLSX"),
				Mimetype: proto.String("application/octet-stream"), FileLength: proto.Uint64(4)}},
			want: "[document \"Q3 report.XLSX\": inbox/2026-11-22-E1.xlsx]", media: true},
		{name: "voice note", ext: "E2",
			msg: &waE2E.Message{AudioMessage: &waE2E.AudioMessage{PTT: proto.Bool(true), Seconds: proto.Uint32(42),
				Mimetype: proto.String("audio/ogg; codecs=opus"), FileLength: proto.Uint64(4)}},
			want: "[voice note: inbox/2026-11-22-E2.ogg]", media: true},
		{name: "video is not downloaded", ext: "E3",
			msg:  &waE2E.Message{VideoMessage: &waE2E.VideoMessage{Mimetype: proto.String("video/mp4"), FileLength: proto.Uint64(4)}},
			want: "[video]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newMediaEnv(t, 0)
			e.wa.download = writeDownload([]byte("data"))
			e.handleEvent(msgEvent(groupInfo(tt.ext, alicePN), tt.msg))
			got := e.text(t, familyChat, tt.ext)
			if tt.media {
				got = e.settle(t, familyChat, tt.ext)
			}
			if got != tt.want {
				t.Errorf("text = %q; want %q", got, tt.want)
			}
		})
	}
	e := newMediaEnv(t, 0)
	e.handleEvent(msgEvent(groupInfo("E4", alicePN), tests[1].msg))
	if m := e.rec.stored(); len(m) != 1 || m[0].Media == nil || !m[0].Media.Voice || m[0].Media.Seconds != 42 || m[0].Media.Label != "voice note" {
		t.Fatalf("voice note media = %+v; want a 42 s voice note to transcribe", m[0].Media)
	}
}

func TestMediaOverCapIsNotDownloaded(t *testing.T) {
	e := newMediaEnv(t, 20<<20)
	e.wa.download = writeDownload([]byte("never"))
	e.handleEvent(msgEvent(groupInfo("F1", alicePN), imageMessage("big one", 25<<20)))
	if got, want := e.settle(t, familyChat, "F1"), "big one\n[image: not downloaded, 25.0 MB is over the 20.0 MB limit]"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if got := e.wa.downloadCount(); got != 0 {
		t.Errorf("downloads = %d; want 0", got)
	}
	if entries, _ := os.ReadDir(e.inbox("family")); len(entries) != 0 {
		t.Errorf("inbox holds %d files; want none", len(entries))
	}
}

func TestMediaLyingAboutItsSizeIsCut(t *testing.T) {
	e := newMediaEnv(t, 1024)
	e.wa.download = writeDownload(bytes.Repeat([]byte("x"), 1<<20)) // claims 10 bytes, sends 1 MB
	e.handleEvent(msgEvent(groupInfo("F2", alicePN), imageMessage("", 10)))
	if got, want := e.settle(t, familyChat, "F2"), "[image: not downloaded, it is over the 1.0 KB limit]"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if entries, _ := os.ReadDir(e.inbox("family")); len(entries) != 0 {
		t.Errorf("inbox holds %d files; want none", len(entries))
	}
}

func TestFailedDownloadKeepsPlaceholder(t *testing.T) {
	e := newMediaEnv(t, 0)
	e.wa.download = func(whatsmeow.DownloadableMessage, whatsmeow.File) error {
		return whatsmeow.ErrMediaDownloadFailedWith404
	}
	e.handleEvent(msgEvent(groupInfo("F3", alicePN), imageMessage("old photo", 10)))
	if got, want := e.settle(t, familyChat, "F3"), "old photo\n[image: download failed: download failed with status code 404]"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if entries, _ := os.ReadDir(e.inbox("family")); len(entries) != 0 {
		t.Errorf("inbox holds %d files; want none", len(entries))
	}
}

func TestHostileMessageIDStaysInInbox(t *testing.T) {
	e := newMediaEnv(t, 0)
	e.wa.download = writeDownload([]byte("data"))
	e.handleEvent(msgEvent(groupInfo("../../../etc/passwd", alicePN), imageMessage("", 4)))
	want := "[image: inbox/2026-11-22-etcpasswd.jpg]"
	if got := e.settle(t, familyChat, "../../../etc/passwd"); got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(e.inbox("family"), "2026-11-22-etcpasswd.jpg")); err != nil {
		t.Errorf("saved file: %v", err)
	}
}

// The agent replaced its inbox/ by a symlink to a directory outside its
// folder: the download lands in a fresh inbox/, nothing is written outside,
// and the incident is recorded.
func TestSymlinkedInboxIsNotFollowed(t *testing.T) {
	e := newMediaEnv(t, 0)
	dir := e.home.Layout().GroupDir("family")
	outside := filepath.Join(e.home.Layout().Dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "inbox")); err != nil {
		t.Fatal(err)
	}
	photo := []byte("sender-chosen bytes")
	e.wa.download = writeDownload(photo)
	e.handleEvent(msgEvent(groupInfo("L1", alicePN), imageMessage("", uint64(len(photo)))))
	if got, want := e.settle(t, familyChat, "L1"), "[image: inbox/2026-11-22-L1.jpg]"; got != want {
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
	inc := e.home.Incidents()
	if len(inc) != 1 || inc[0].Path != "groups/family/inbox" || inc[0].Found != "symlink" {
		t.Errorf("incidents %+v; want the symlinked inbox", inc)
	}
}

// A link the agent planted at the file's name is not written through.
func TestPlantedLinkAtMediaNameIsNotFollowed(t *testing.T) {
	e := newMediaEnv(t, 0)
	inbox := e.inbox("family")
	if err := os.MkdirAll(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(e.home.Layout().Dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(inbox, "2026-11-22-L2.jpg")); err != nil {
		t.Fatal(err)
	}
	e.wa.download = writeDownload([]byte("sender-chosen bytes"))
	e.handleEvent(msgEvent(groupInfo("L2", alicePN), imageMessage("", 19)))
	e.settle(t, familyChat, "L2")
	if data, err := os.ReadFile(victim); err != nil || string(data) != "precious" {
		t.Errorf("file behind the planted link: %q, %v; want it untouched", data, err)
	}
}

// A fetch waits for the connection instead of failing while WhatsApp
// reconnects.
func TestFetchWaitsForTheConnection(t *testing.T) {
	tc := newTestClient(t, nil)
	tc.conn.setState(channel.StateReconnecting, "")
	tc.wa.download = writeDownload([]byte("data"))
	f, err := os.CreateTemp(t.TempDir(), "dl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ref, _ := json.Marshal(mediaRef{Type: "image", Proto: mustMarshal(t, imageMessage("", 4).GetImageMessage())})
	m := bridgedstore.Media{Source: ChannelName, Ref: ref}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := tc.Fetch(ctx, m, f, 1024); !errors.Is(err, errNotConnected) {
		t.Fatalf("Fetch while reconnecting = %v; want errNotConnected once ctx ends", err)
	}
	done := make(chan error, 1)
	go func() { done <- tc.Fetch(context.Background(), m, f, 1024) }()
	tc.conn.setState(channel.StateConnected, "")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Fetch after connecting = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Fetch did not go on once connected")
	}
	if tc.wa.downloadCount() != 1 {
		t.Fatalf("downloads = %d; want 1", tc.wa.downloadCount())
	}
	if err := tc.Fetch(context.Background(), bridgedstore.Media{Ref: []byte(`{"type":"sticker"}`)}, f, 1024); err == nil {
		t.Fatal("Fetch of a bad reference = nil; want an error")
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
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
