package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/media"
	"github.com/bridged-app/bridged/internal/store"
)

// MaxDownload is the largest file a bot may download (getFile).
const MaxDownload = 20 << 20

// mediaRef is what Fetch needs of a message's file.
type mediaRef struct {
	FileID string `json:"file_id"`
}

// inboundFile is a message's photo, document, voice note or audio.
type inboundFile struct {
	id, label, name, mime string
	size                  int64
	voice                 bool
	seconds               int
}

// fileOf returns the file a message carries that bridged fetches.
func fileOf(tm *models.Message) (inboundFile, bool) {
	base := time.Unix(int64(tm.Date), 0).UTC().Format("2006-01-02") + fmt.Sprintf("-%d", tm.ID)
	switch {
	case len(tm.Photo) > 0:
		p := tm.Photo[len(tm.Photo)-1] // the largest
		return inboundFile{id: p.FileID, label: "image", name: base + ".jpg", mime: "image/jpeg", size: int64(p.FileSize)}, true
	case tm.Voice != nil:
		v := tm.Voice
		return inboundFile{id: v.FileID, label: "voice note", name: base + ".ogg", mime: or(v.MimeType, "audio/ogg"), size: v.FileSize, voice: true, seconds: v.Duration}, true
	case tm.Audio != nil:
		a := tm.Audio
		return inboundFile{id: a.FileID, label: "audio", name: base + "-" + safeName(or(a.FileName, "audio")), mime: a.MimeType, size: a.FileSize, seconds: a.Duration}, true
	case tm.Document != nil:
		d := tm.Document
		name := or(d.FileName, "document")
		return inboundFile{id: d.FileID, label: fmt.Sprintf("document %q", name), name: base + "-" + safeName(name), mime: d.MimeType, size: d.FileSize}, true
	}
	return inboundFile{}, false
}

// safeName keeps a file name's letters, digits, dots, dashes and
// underscores.
func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, filepath.Base(s))
	if strings.Trim(s, "._") == "" {
		return "file"
	}
	return s
}

// mediaFor is the channel's media of f, with head (the caption) and tail
// (a quote note) around its placeholder; nil, with a placeholder to use
// instead, for a file over Telegram's download limit.
func mediaFor(f inboundFile, head, tail string) (*channel.Media, string) {
	if f.size > MaxDownload {
		return nil, fmt.Sprintf("[%s: not downloaded: over the 20 MB a Telegram bot may download]", f.label)
	}
	ref, _ := json.Marshal(mediaRef{FileID: f.id})
	return &channel.Media{Source: ChannelName, Ref: ref, Label: f.label, Name: f.name, MIME: f.mime, Size: f.size,
		Voice: f.voice, Seconds: f.seconds, Head: head, Tail: tail}, ""
}

// Fetch downloads the file m refers to into dst (the media worker's
// fetcher for Telegram: getFile, then the file's URL), failing with an
// error wrapping media.ErrTooLarge once it would pass limit bytes.
func (c *Client) Fetch(ctx context.Context, m store.Media, dst *os.File, limit int64) error {
	var ref mediaRef
	if err := json.Unmarshal(m.Ref, &ref); err != nil || ref.FileID == "" {
		return fmt.Errorf("bad media reference: %v", err)
	}
	if c.api == nil {
		return errors.New("telegram: no bot token")
	}
	if !c.waitHold(ctx) {
		return ctx.Err()
	}
	cctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	f, err := c.api.GetFile(cctx, &bot.GetFileParams{FileID: ref.FileID})
	cancel()
	if err != nil {
		return fmt.Errorf("telegram getFile: %w", redact(err, c.opts.Token))
	}
	if f.FileSize > limit {
		return fmt.Errorf("%w: %d bytes", media.ErrTooLarge, f.FileSize)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/file/bot"+c.opts.Token+"/"+f.FilePath, nil)
	if err != nil {
		return redact(err, c.opts.Token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("telegram download: %w", redact(err, c.opts.Token))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("telegram download: HTTP %d", resp.StatusCode)
	}
	n, err := io.Copy(dst, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("telegram download: %w", redact(err, c.opts.Token))
	}
	if n > limit {
		return fmt.Errorf("%w: more than %d bytes", media.ErrTooLarge, limit)
	}
	return nil
}
