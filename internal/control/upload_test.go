package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/local"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/media"
	"github.com/bridged-app/bridged/internal/store"
)

// testMaxUpload is the harness's limit for an attached file.
const testMaxUpload = 64 << 10

// writeFiles writes files (name → content) into a fresh directory and
// returns their paths in the order given by names.
func writeFiles(t *testing.T, names []string, content map[string]string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte(content[n]), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// uploadsLeft lists what is in the uploads spool.
func uploadsLeft(t *testing.T, h *harness) []string {
	t.Helper()
	es, err := os.ReadDir(h.home.Layout().UploadsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// postedNone checks that nothing was posted nor stored in local:main.
func postedNone(t *testing.T, h *harness) {
	t.Helper()
	select {
	case m := <-h.posted:
		t.Errorf("a message was posted: %+v", m)
	default:
	}
	msgs, err := h.db.Messages.After(context.Background(), "local:main", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 0 {
		t.Errorf("%d messages stored; want none", len(msgs))
	}
	if left := uploadsLeft(t, h); len(left) != 0 {
		t.Errorf("uploads left behind: %v", left)
	}
}

func TestPostFiles(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	png := "\x89PNG\r\n\x1a\n" + strings.Repeat("p", 100)
	content := map[string]string{"chart.png": png, "note.ogg": "OggS voice", "Q3 report.pdf": "%PDF-1.4 report"}
	paths := writeFiles(t, []string{"chart.png", "note.ogg", "Q3 report.pdf"}, content)
	id, err := h.client.PostMessage(ctx, "local:main", "alice", "have a look", paths...)
	if err != nil {
		t.Fatalf("PostMessage: %v", err)
	}
	msgs, err := h.db.Messages.After(ctx, "local:main", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || int64(msgs[2].ID) != id {
		t.Fatalf("stored %d messages, PostMessage returned %d; want 3, the last one's id", len(msgs), id)
	}
	want := []struct {
		file, label, mime, head, text string
		voice                         bool
	}{
		{"chart.png", "image", "image/png", "have a look\n", "have a look\n[image: downloading]", false},
		{"note.ogg", "voice note", "audio/ogg", "", "[voice note: downloading]", true},
		{"Q3 report.pdf", `document "Q3 report.pdf"`, "application/pdf", "", `[document "Q3 report.pdf": downloading]`, false},
	}
	inboxName := regexp.MustCompile(`^\d{8}-[0-9a-f]{6}-[A-Za-z0-9._-]+$`)
	keys := map[string]bool{}
	for i, w := range want {
		m := <-h.posted
		md := m.Media
		if md == nil {
			t.Fatalf("message %d has no media", i)
		}
		if md.Source != media.SourceUpload || md.Label != w.label || md.MIME != w.mime || md.Voice != w.voice || md.Head != w.head || m.Text != w.text || m.Sender != "alice" {
			t.Errorf("message %d: got %+v with media %+v; want %s (%s, voice %v) captioned %q", i, m, md, w.label, w.mime, w.voice, w.head)
		}
		if md.Size != int64(len(content[w.file])) {
			t.Errorf("message %d: size %d; want %d", i, md.Size, len(content[w.file]))
		}
		if !inboxName.MatchString(md.Name) || !strings.HasSuffix(md.Name, strings.ReplaceAll(w.file, " ", "_")) {
			t.Errorf("message %d: inbox name %q; want <date>-<random>-%s made plain", i, md.Name, w.file)
		}
		var ref media.UploadRef
		if err := json.Unmarshal(md.Ref, &ref); err != nil || ref.Key == "" {
			t.Fatalf("message %d: ref %s: %v", i, md.Ref, err)
		}
		keys[ref.Key] = true
		f, ok, err := h.home.Uploads().Get(ref.Key)
		if err != nil || !ok {
			t.Fatalf("message %d: upload %s: ok %v, %v", i, ref.Key, ok, err)
		}
		if b, err := os.ReadFile(f.Path); err != nil || string(b) != content[w.file] {
			t.Errorf("message %d: upload holds %q (%v); want %q", i, b, err, content[w.file])
		}
	}
	if len(keys) != 3 || len(uploadsLeft(t, h)) != 3 {
		t.Errorf("upload keys %v, spool %v; want three distinct uploads", keys, uploadsLeft(t, h))
	}
}

// multipartBody builds a multipart post by hand: parts of (form name, file
// name, content type, body).
func multipartBody(t *testing.T, parts ...[4]string) (*bytes.Buffer, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		hdr := make(textproto.MIMEHeader)
		cd := `form-data; name="` + p[0] + `"`
		if p[1] != "" {
			cd += `; filename="` + p[1] + `"`
		}
		hdr.Set("Content-Disposition", cd)
		if p[2] != "" {
			hdr.Set("Content-Type", p[2])
		}
		w, err := mw.CreatePart(hdr)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(p[3]))
	}
	mw.Close()
	return &b, mw.FormDataContentType()
}

func TestPostFilesRefused(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	code := func(err error) int {
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			return apiErr.Code
		}
		return 0
	}

	t.Run("oversize", func(t *testing.T) {
		paths := writeFiles(t, []string{"small.png", "big.bin"}, map[string]string{"small.png": "png", "big.bin": strings.Repeat("x", testMaxUpload+1)})
		_, err := h.client.PostMessage(ctx, "local:main", "alice", "two files", paths...)
		if code(err) != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "big.bin") || !strings.Contains(err.Error(), "limit") {
			t.Errorf("got %v; want a 413 naming big.bin and the limit", err)
		}
		postedNone(t, h)
	})
	t.Run("unregistered chat", func(t *testing.T) {
		paths := writeFiles(t, []string{"ok.bin"}, map[string]string{"ok.bin": strings.Repeat("x", testMaxUpload)})
		if _, err := h.client.PostMessage(ctx, "local:other", "alice", "", paths...); code(err) != http.StatusNotFound {
			t.Errorf("unregistered chat: got %v; want a 404", err)
		}
		postedNone(t, h)
	})
	t.Run("too many files", func(t *testing.T) {
		var names []string
		content := map[string]string{}
		for i := range MaxFiles + 1 {
			n := string(rune('a'+i)) + ".txt"
			names = append(names, n)
			content[n] = "text"
		}
		_, err := h.client.PostMessage(ctx, "local:main", "alice", "", writeFiles(t, names, content)...)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "more than 10 files") {
			t.Errorf("got %v; want a 400 about more than 10 files", err)
		}
		postedNone(t, h)
	})
	t.Run("wrong content type", func(t *testing.T) {
		body, ct := multipartBody(t, [4]string{"message", "", "application/json", `{"text":"hi"}`})
		ct = strings.Replace(ct, "form-data", "mixed", 1)
		err := h.client.send(ctx, "POST", "/v1/chats/local:main/messages", body, ct, nil)
		if code(err) != http.StatusUnsupportedMediaType {
			t.Errorf("multipart/mixed: got %v; want a 415", err)
		}
		postedNone(t, h)
	})
	for _, tt := range []struct {
		name  string
		parts [][4]string
		want  string
	}{
		{"unknown part", [][4]string{{"message", "", "", `{"text":"hi"}`}, {"photo", "a.png", "image/png", "png"}}, `unknown part "photo"`},
		{"no text and no file", [][4]string{{"message", "", "", `{"sender":"alice"}`}}, "text is empty"},
		{"file without a name", [][4]string{{"file", "", "image/png", "png"}}, "without a file name"},
		{"bad message json", [][4]string{{"message", "", "", `{"txt":"hi"}`}, {"file", "a.png", "image/png", "png"}}, "unknown field"},
		{"two messages", [][4]string{{"message", "", "", `{"text":"a"}`}, {"message", "", "", `{"text":"b"}`}}, "more than one"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body, ct := multipartBody(t, tt.parts...)
			err := h.client.send(ctx, "POST", "/v1/chats/local:main/messages", body, ct, nil)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want a 400 saying %q", err, tt.want)
			}
			postedNone(t, h)
		})
	}
	t.Run("posting fails", func(t *testing.T) {
		h.inbound.Store(local.Inbound(func(context.Context, ingest.Changed, channel.Message) (store.MessageID, error) {
			return 0, errors.New("disk full")
		}))
		defer h.inbound.Store(storeInbound(h.db))
		paths := writeFiles(t, []string{"a.png"}, map[string]string{"a.png": "png"})
		if _, err := h.client.PostMessage(ctx, "local:main", "alice", "x", paths...); code(err) != http.StatusInternalServerError {
			t.Errorf("got %v; want a 500", err)
		}
		postedNone(t, h)
	})
}

// A file of exactly the limit is taken.
func TestPostFileAtTheLimit(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	paths := writeFiles(t, []string{"ok.bin"}, map[string]string{"ok.bin": strings.Repeat("x", testMaxUpload)})
	if _, err := h.client.PostMessage(context.Background(), "local:main", "alice", "", paths...); err != nil {
		t.Fatalf("a file of exactly the limit: %v", err)
	}
	if m := <-h.posted; m.Media == nil || m.Media.Size != testMaxUpload {
		t.Errorf("posted %+v; want the file's media of %d bytes", m, testMaxUpload)
	}
}

// A multipart post without files is an ordinary message.
func TestPostMultipartTextOnly(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	body, ct := multipartBody(t, [4]string{"message", "", "application/json", `{"sender":"alice","text":"just words"}`})
	var p Posted
	if err := h.client.send(context.Background(), "POST", "/v1/chats/local:main/messages", body, ct, &p); err != nil {
		t.Fatalf("post: %v", err)
	}
	m := <-h.posted
	if m.Media != nil || m.Text != "just words" || m.Sender != "alice" {
		t.Errorf("posted %+v; want alice's words, no media", m)
	}
	if p.ID == 0 || len(p.IDs) != 1 || p.IDs[0] != p.ID {
		t.Errorf("answer %+v; want one id, also as id", p)
	}
}

func TestMediaFor(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name, ct, label, mime string
		voice                 bool
	}{
		{"a.png", "image/png", "image", "image/png", false},
		{"photo", "image/jpeg", "image", "image/jpeg", false},
		{"a.jpg", "", "image", "image/jpeg", false},
		{"a.jpg", "application/octet-stream", "image", "image/jpeg", false},
		{"memo.mp3", "", "voice note", "audio/mpeg", true},
		{"memo", "audio/ogg; codecs=opus", "voice note", "audio/ogg", true},
		{"a.pdf", "", `document "a.pdf"`, "application/pdf", false},
		{"notes", "", `document "notes"`, "application/octet-stream", false},
	} {
		m := mediaFor(tt.name, tt.ct, now)
		if m.Label != tt.label || m.MIME != tt.mime || m.Voice != tt.voice || m.Source != media.SourceUpload {
			t.Errorf("mediaFor(%q, %q) = %+v; want %s, %s, voice %v", tt.name, tt.ct, m, tt.label, tt.mime, tt.voice)
		}
		if !strings.HasPrefix(m.Name, "20261125-") || !strings.HasSuffix(m.Name, "-"+tt.name) {
			t.Errorf("mediaFor(%q).Name = %q; want 20261125-<random>-%s", tt.name, m.Name, tt.name)
		}
	}
	if a, b := mediaFor("a.png", "", now), mediaFor("a.png", "", now); a.Name == b.Name {
		t.Errorf("two files of one name both saved as %s", a.Name)
	}
	if long := mediaFor(strings.Repeat("x", 300)+".pdf", "", now); len(long.Name) > 120 || !strings.HasPrefix(long.Name, "20261125-") || !strings.HasSuffix(long.Name, ".pdf") {
		t.Errorf("a long name is saved as %q; want at most 120 bytes, the date first and the extension kept", long.Name)
	}
}
