package whatsapp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/channel"
	mediapool "github.com/bridged-app/bridged/internal/media"
	"github.com/bridged-app/bridged/internal/store"
)

// encOverhead is what encryption adds to a file (padding and MAC).
const encOverhead = 64

// errTooLarge is returned when a download grows past the cap.
var errTooLarge = fmt.Errorf("whatsapp: %w", mediapool.ErrTooLarge)

// mediaRef is what bridged stores with a message to download its media
// later (channel.Media.Ref): the media message itself, which holds the
// encrypted file's direct path, its keys and hashes.
type mediaRef struct {
	Type  string `json:"type"`  // image, audio, document
	Proto []byte `json:"proto"` // the waE2E message, protobuf
}

// mediaOf describes ct's attachment for the media worker, or nil when there
// is none. head and tail are the message's text around its placeholder.
func mediaOf(info *types.MessageInfo, ct content, head, tail string) *channel.Media {
	if ct.media == nil {
		return nil
	}
	ref := mediaRef{}
	var msg proto.Message
	switch x := ct.media.msg.(type) {
	case *waE2E.ImageMessage:
		ref.Type, msg = "image", x
	case *waE2E.AudioMessage:
		ref.Type, msg = "audio", x
	case *waE2E.DocumentMessage:
		ref.Type, msg = "document", x
	default:
		return nil
	}
	raw, err := proto.Marshal(msg)
	if err != nil {
		return nil
	}
	ref.Proto = raw
	b, err := json.Marshal(ref)
	if err != nil {
		return nil
	}
	return &channel.Media{
		Source:  ChannelName,
		Ref:     b,
		Label:   ct.label,
		Name:    fmt.Sprintf("%s-%s.%s", info.Timestamp.Format("2006-01-02"), safeName(info.ID), extension(ct.media)),
		MIME:    ct.media.mime,
		Size:    int64(min(ct.media.size, 1<<62)),
		Voice:   ct.media.voice,
		Seconds: ct.media.seconds,
		Head:    head,
		Tail:    tail,
	}
}

// Fetch downloads the media m refers to into dst: the media worker's
// fetcher for WhatsApp. It waits for the connection (until ctx ends) and
// refuses to write more than limit bytes (plus the encryption's overhead;
// the worker checks the decrypted size).
func (c *Client) Fetch(ctx context.Context, m store.Media, dst *os.File, limit int64) error {
	var ref mediaRef
	if err := json.Unmarshal(m.Ref, &ref); err != nil {
		return fmt.Errorf("bad media reference: %w", err)
	}
	var msg whatsmeow.DownloadableMessage
	switch ref.Type {
	case "image":
		msg = &waE2E.ImageMessage{}
	case "audio":
		msg = &waE2E.AudioMessage{}
	case "document":
		msg = &waE2E.DocumentMessage{}
	default:
		return fmt.Errorf("bad media reference: type %q", ref.Type)
	}
	if err := proto.Unmarshal(ref.Proto, msg.(proto.Message)); err != nil {
		return fmt.Errorf("bad media reference: %w", err)
	}
	if err := c.conn.waitConnected(ctx); err != nil {
		return err
	}
	return c.wa.DownloadToFile(ctx, msg, &cappedFile{f: dst, limit: limit + encOverhead})
}

// cappedFile is a whatsmeow.File that refuses to grow past limit, so a
// sender who lies about a file's size cannot fill the disk. It hides
// *os.File's ReadFrom, so every write goes through the check.
type cappedFile struct {
	f     *os.File
	limit int64
}

func (c *cappedFile) Read(p []byte) (int, error)                { return c.f.Read(p) }
func (c *cappedFile) ReadAt(p []byte, off int64) (int, error)   { return c.f.ReadAt(p, off) }
func (c *cappedFile) Seek(off int64, whence int) (int64, error) { return c.f.Seek(off, whence) }
func (c *cappedFile) Stat() (os.FileInfo, error)                { return c.f.Stat() }

func (c *cappedFile) Write(p []byte) (int, error) {
	pos, err := c.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	if pos+int64(len(p)) > c.limit {
		return 0, errTooLarge
	}
	return c.f.Write(p)
}

func (c *cappedFile) WriteAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > c.limit {
		return 0, errTooLarge
	}
	return c.f.WriteAt(p, off)
}

func (c *cappedFile) Truncate(size int64) error {
	if size > c.limit {
		return errTooLarge
	}
	return c.f.Truncate(size)
}

// safeName keeps letters, digits, '-' and '_' of a message id, so an id can
// never name a path outside the inbox.
func safeName(id string) string {
	var b strings.Builder
	for _, r := range id {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "message"
	}
	return truncate(b.String(), 64)
}

var mimeExt = map[string]string{
	"image/jpeg":         "jpg",
	"image/png":          "png",
	"image/webp":         "webp",
	"image/gif":          "gif",
	"image/heic":         "heic",
	"audio/ogg":          "ogg",
	"audio/mpeg":         "mp3",
	"audio/mp4":          "m4a",
	"audio/aac":          "aac",
	"audio/amr":          "amr",
	"video/mp4":          "mp4",
	"application/pdf":    "pdf",
	"application/zip":    "zip",
	"application/json":   "json",
	"text/plain":         "txt",
	"text/csv":           "csv",
	"application/msword": "doc",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":       "xlsx",
}

// extension picks a file extension: the document's own (when it is a plain
// short one), else from the MIME type, else "bin".
func extension(m *media) string {
	if ext := strings.TrimPrefix(filepath.Ext(m.fileName), "."); ext != "" && len(ext) <= 8 && isAlnum(ext) {
		return strings.ToLower(ext)
	}
	mt := strings.ToLower(strings.TrimSpace(strings.SplitN(m.mime, ";", 2)[0]))
	if ext, ok := mimeExt[mt]; ok {
		return ext
	}
	return "bin"
}

func isAlnum(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
