package whatsapp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.mau.fi/whatsmeow/types"
)

// Media download limits.
const (
	// mediaTimeout bounds one download, which runs before the message is
	// acknowledged.
	mediaTimeout = 2 * time.Minute
	// inboxDir is the folder, inside the group's folder, media are saved to.
	inboxDir = "inbox"
	// encOverhead is what encryption adds to a file (padding and MAC).
	encOverhead = 64
)

// errTooLarge is returned when a download grows past the cap.
var errTooLarge = errors.New("file is larger than the download limit")

// fetchMedia saves ct's attachment into the chat's inbox/ when it is allowed
// and returns the placeholder detail: the saved path relative to the group
// folder, or why nothing was saved. "" means nothing to say.
func (c *Client) fetchMedia(ctx context.Context, sink Sink, chat string, info *types.MessageInfo, ct content) string {
	if ct.media == nil || c.opts.Home == nil {
		return ""
	}
	folder, ok := sink.MediaFolder(ctx, chat)
	if !ok || folder == "" {
		return ""
	}
	limit := c.opts.MaxMediaBytes
	if ct.media.size > uint64(limit) {
		return fmt.Sprintf("not downloaded, %s is over the %s limit", humanBytes(ct.media.size), humanBytes(uint64(limit)))
	}
	name := fmt.Sprintf("%s-%s.%s", info.Timestamp.Format("2006-01-02"), safeName(info.ID), extension(ct.media))
	rel := inboxDir + "/" + name
	log := c.log.With().Str("chat", chat).Str("message_id", info.ID).Logger()
	err := c.download(ctx, folder, name, ct.media, limit)
	if errors.Is(err, errTooLarge) {
		log.Warn().Int64("limit", limit).Msg("media over the download limit; not saved")
		return fmt.Sprintf("not downloaded, it is over the %s limit", humanBytes(uint64(limit)))
	} else if err != nil {
		log.Warn().Err(err).Msg("cannot download WhatsApp media")
		return "download failed: " + truncate(oneLine(err.Error()), 120)
	}
	log.Debug().Str("group", folder).Str("file", rel).Msg("saved WhatsApp media")
	return rel
}

// download writes the attachment to groups/<folder>/inbox/name through the
// home: into a new temporary file (created exclusively, so a planted link
// is never written through), then renamed into place, which replaces
// whatever the agent put at that name. An inbox/ that is not a real
// directory is moved aside and recreated. A file already there (a
// redelivered message) is kept.
func (c *Client) download(ctx context.Context, folder, name string, m *media, limit int64) error {
	group, err := c.opts.Home.Group(folder)
	if err != nil {
		return fmt.Errorf("open group folder: %w", err)
	}
	defer group.Close()
	inbox, err := group.Dir(inboxDir)
	if err != nil {
		return fmt.Errorf("open inbox: %w", err)
	}
	defer inbox.Close()
	if inbox.Exists(name) {
		return nil
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmpName := ".download-" + hex.EncodeToString(rnd[:]) + ".tmp"
	tmp, err := inbox.Create(tmpName, 0o644)
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	defer func() {
		if tmp != nil {
			_ = tmp.Close()
			_ = inbox.Remove(tmpName)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, mediaTimeout)
	defer cancel()
	if err := c.wa.DownloadToFile(ctx, m.msg, &cappedFile{f: tmp, limit: limit + encOverhead}); err != nil {
		return err
	}
	st, err := tmp.Stat()
	if err != nil {
		return fmt.Errorf("stat download: %w", err)
	}
	if st.Size() > limit {
		return errTooLarge
	}
	if err := tmp.Chmod(0o644); err != nil { // the umask may have narrowed it
		return fmt.Errorf("chmod download: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync download: %w", err)
	}
	err = tmp.Close()
	tmp = nil
	if err == nil {
		err = inbox.Rename(tmpName, name)
	}
	if err != nil {
		_ = inbox.Remove(tmpName)
		return fmt.Errorf("move download into place: %w", err)
	}
	return nil
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
