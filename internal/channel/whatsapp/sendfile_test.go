package whatsapp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"

	"github.com/bridged-app/bridged/internal/channel"
)

// spooled writes a file as the daemon's spool holds it and describes it.
func spooled(t *testing.T, name, mime string, kind channel.AttachmentKind, data []byte) *channel.Attachment {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return &channel.Attachment{Path: p, Name: name, MIME: mime, Kind: kind, Size: int64(len(data))}
}

// media is what every media message carries about its upload.
type uploadedMedia interface {
	GetURL() string
	GetDirectPath() string
	GetMediaKey() []byte
	GetFileSHA256() []byte
	GetFileEncSHA256() []byte
	GetFileLength() uint64
	GetMimetype() string
}

func checkUpload(t *testing.T, what string, m uploadedMedia, data []byte, mime string) {
	t.Helper()
	sum := sha256.Sum256(data)
	if m.GetURL() == "" || m.GetDirectPath() == "" || len(m.GetMediaKey()) != 32 || len(m.GetFileEncSHA256()) != 32 {
		t.Errorf("%s: url %q, direct path %q, key %d bytes, enc sha256 %d bytes; want the upload's", what,
			m.GetURL(), m.GetDirectPath(), len(m.GetMediaKey()), len(m.GetFileEncSHA256()))
	}
	if !bytes.Equal(m.GetFileSHA256(), sum[:]) || m.GetFileLength() != uint64(len(data)) {
		t.Errorf("%s: sha256 %x, length %d; want the file's %x, %d", what, m.GetFileSHA256(), m.GetFileLength(), sum, len(data))
	}
	if m.GetMimetype() != mime {
		t.Errorf("%s: mimetype %q; want %q", what, m.GetMimetype(), mime)
	}
}

func TestSendFileUploadsAndShapesTheMessage(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nchart")
	pdf := []byte("%PDF-1.4 report")
	ogg := []byte("OggS voice")
	for _, tc := range []struct {
		name      string
		att       *channel.Attachment
		data      []byte
		mediaType whatsmeow.MediaType
		check     func(t *testing.T, msg *waE2E.Message)
		texts     []string // text messages that follow the file
	}{
		{"image", spooled(t, "chart.png", "image/png", channel.KindImage, png), png, whatsmeow.MediaImage,
			func(t *testing.T, msg *waE2E.Message) {
				im := msg.GetImageMessage()
				if im == nil {
					t.Fatalf("message %v; want an image message", msg)
				}
				checkUpload(t, "image", im, png, "image/png")
				if im.GetCaption() != "Here is the chart." {
					t.Errorf("caption %q; want the text", im.GetCaption())
				}
			}, nil},
		{"document", spooled(t, "report.pdf", "application/pdf", channel.KindDocument, pdf), pdf, whatsmeow.MediaDocument,
			func(t *testing.T, msg *waE2E.Message) {
				doc := msg.GetDocumentMessage()
				if doc == nil {
					t.Fatalf("message %v; want a document message", msg)
				}
				checkUpload(t, "document", doc, pdf, "application/pdf")
				if doc.GetFileName() != "report.pdf" || doc.GetTitle() != "report.pdf" || doc.GetCaption() != "Here is the chart." {
					t.Errorf("file name %q, title %q, caption %q; want report.pdf and the text", doc.GetFileName(), doc.GetTitle(), doc.GetCaption())
				}
			}, nil},
		{"voice note", spooled(t, "hello.ogg", "audio/ogg", channel.KindAudio, ogg), ogg, whatsmeow.MediaAudio,
			func(t *testing.T, msg *waE2E.Message) {
				au := msg.GetAudioMessage()
				if au == nil {
					t.Fatalf("message %v; want an audio message", msg)
				}
				checkUpload(t, "audio", au, ogg, "audio/ogg; codecs=opus")
				if !au.GetPTT() {
					t.Error("an Ogg Opus file is not sent as a voice note")
				}
			}, []string{"Here is the chart."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc2 := connectedClient(t, nil)
			out := channel.Outgoing{Chat: familyChat.String(), Text: "Here is the chart.", ID: "3EB0123456789ABCDEF0", Attachment: tc.att}
			id, err := tc2.Send(context.Background(), out)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			ups := tc2.wa.uploaded()
			if len(ups) != 1 || !bytes.Equal(ups[0].data, tc.data) || ups[0].mediaType != tc.mediaType {
				t.Fatalf("uploads %d (type %v); want the file once as %s", len(ups), ups, tc.mediaType)
			}
			sent := tc2.wa.sentMessages()
			if len(sent) != 1+len(tc.texts) {
				t.Fatalf("%d messages sent; want the file and %d text messages", len(sent), len(tc.texts))
			}
			if sent[0].id != out.ID || id != out.ID || sent[0].to != familyChat {
				t.Errorf("file message id %q to %s, returned %q; want %q to %s", sent[0].id, sent[0].to, id, out.ID, familyChat)
			}
			tc.check(t, sent[0].msg)
			for i, text := range tc.texts {
				if sent[1+i].text != text || sent[1+i].id != PartID(out.ID, 1+i) {
					t.Errorf("message %d: %q id %q; want %q id %q", 1+i, sent[1+i].text, sent[1+i].id, text, PartID(out.ID, 1+i))
				}
			}
		})
	}
}

// A send that failed after the upload is retried under the same id; once
// the file message went out, a retry of the text after it does not send the
// file again.
func TestSendFileRetry(t *testing.T) {
	tc := connectedClient(t, func(o *Options) { o.SharedNumber = true; o.AssistantName = "Andy" })
	att := spooled(t, "hello.ogg", "audio/ogg", channel.KindAudio, []byte("OggS voice"))
	tc.wa.sendErrs = []error{whatsmeow.ErrMessageTimedOut, nil, whatsmeow.ErrMessageTimedOut}
	out := channel.Outgoing{Chat: familyChat.String(), Text: "Listen.", ID: "3EB0123456789ABCDEF0", Attachment: att}
	for i := range 2 {
		if _, err := tc.Send(context.Background(), out); err == nil || errors.Is(err, channel.ErrPermanent) {
			t.Fatalf("attempt %d: err = %v; want a retryable timeout", i+1, err)
		}
	}
	if _, err := tc.Send(context.Background(), out); err != nil {
		t.Fatalf("third attempt: %v", err)
	}
	var ids []string
	for _, s := range tc.wa.sentMessages() {
		kind := "text " + s.text
		if s.msg.GetAudioMessage() != nil {
			kind = "audio"
		}
		ids = append(ids, kind+"@"+s.id)
	}
	first, second := out.ID, PartID(out.ID, 1)
	want := []string{"audio@" + first, "audio@" + first, "text Andy: Listen.@" + second, "text Andy: Listen.@" + second}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("sent %v; want %v", ids, want)
	}
	if n := len(tc.wa.uploaded()); n != 2 {
		t.Errorf("%d uploads; want one per attempt that sent the file (2)", n)
	}
}

func TestSendFileFailures(t *testing.T) {
	tc := connectedClient(t, nil)
	att := spooled(t, "gone.png", "image/png", channel.KindImage, []byte("x"))
	if err := os.Remove(att.Path); err != nil {
		t.Fatal(err)
	}
	_, err := tc.Send(context.Background(), channel.Outgoing{Chat: familyChat.String(), Text: "x", ID: "3EB0123456789ABCDEF1", Attachment: att})
	if !errors.Is(err, channel.ErrPermanent) {
		t.Errorf("missing file: err = %v; want a permanent failure", err)
	}

	att = spooled(t, "chart.png", "image/png", channel.KindImage, []byte("x"))
	tc.wa.uploadErrs = []error{errors.New("media server unreachable")}
	_, err = tc.Send(context.Background(), channel.Outgoing{Chat: familyChat.String(), Text: "x", ID: "3EB0123456789ABCDEF2", Attachment: att})
	if err == nil || errors.Is(err, channel.ErrPermanent) {
		t.Errorf("failed upload: err = %v; want a retryable failure", err)
	}
	if n := len(tc.wa.sentMessages()); n != 0 {
		t.Errorf("%d messages sent without their file; want 0", n)
	}
}
