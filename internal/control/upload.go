package control

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/media"
	"github.com/bridged-app/bridged/internal/store"
)

// MaxFiles is the most files one posted message may carry.
const MaxFiles = 10

// The parts of a multipart POST /v1/chats/{chat}/messages.
const (
	partMessage = "message" // the PostMessage JSON
	partFile    = "file"    // one attached file (filename and Content-Type)
)

// errTooLarge is an attached file or a request over the limits (413).
var errTooLarge = errors.New("too large")

// upload is an attached file staged in the uploads spool.
type upload struct {
	staged *home.Staged
	key    string // set once kept
	media  channel.Media
}

// postFiles serves a multipart post: the "message" part and up to MaxFiles
// "file" parts, each streamed into the uploads spool (at most MaxUpload
// bytes) and posted as a message of its own whose media the worker takes
// from there. Nothing is posted unless every file was taken; a file that
// ends up in no committed message is removed.
func (s *Server) postFiles(w http.ResponseWriter, r *http.Request, chat, ct string) {
	if ct != "multipart/form-data" {
		writeError(w, http.StatusUnsupportedMediaType, fmt.Errorf("content type %s: want application/json, or multipart/form-data with files", ct))
		return
	}
	if err := s.localChat(r.Context(), chat); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.opts.Uploads == nil {
		s.fail(w, r, fmt.Errorf("%w: files cannot be posted: no uploads directory", ErrNotRunning))
		return
	}
	limit := s.opts.MaxUpload
	r.Body = http.MaxBytesReader(w, r.Body, MaxFiles*limit+2*maxBody)
	req, ups, err := s.readParts(r, limit)
	if err == nil {
		err = checkText(req.Text, len(ups) > 0)
	}
	post := ""
	if len(ups) > 1 {
		post = home.UploadKey() // the post's files wait for one another: one turn takes them all
	}
	for i := range ups {
		if err != nil {
			break
		}
		ups[i].key = home.UploadKey()
		ref := media.UploadRef{Key: ups[i].key}
		if post != "" {
			ref.Post, ref.Of = post, len(ups)
		}
		ups[i].media.Ref, _ = json.Marshal(ref)
		err = ups[i].staged.Keep(ups[i].key)
	}
	var ids []store.MessageID
	if err == nil {
		ms := make([]channel.Media, len(ups))
		for i, u := range ups {
			ms[i] = u.media
		}
		ids, err = s.opts.Local.Post(r.Context(), chat, req.sender(), req.Text, ms...)
	}
	for _, u := range ups[min(len(ids), len(ups)):] {
		u.staged.Discard()
	}
	if err != nil {
		if errors.Is(err, errTooLarge) {
			// Read what is left (bounded by the reader above), so the
			// client, still sending, hears the answer.
			_, _ = io.Copy(io.Discard, r.Body)
			writeError(w, http.StatusRequestEntityTooLarge, err)
			return
		}
		s.fail(w, r, err)
		return
	}
	s.log.Info().Str("chat", chat).Int("files", len(ups)).Msg("message with files posted")
	writeJSON(w, http.StatusCreated, posted(ids))
}

// readParts reads a multipart post's parts, staging each file. On an error
// nothing stays staged.
func (s *Server) readParts(r *http.Request, limit int64) (req PostMessage, ups []upload, err error) {
	defer func() {
		if err != nil {
			for _, u := range ups {
				u.staged.Discard()
			}
			ups = nil
		}
	}()
	mr, err := r.MultipartReader()
	if err != nil {
		return req, nil, fmt.Errorf("%w: request body: %v", ErrInvalid, err)
	}
	seenMessage := false
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return req, ups, nil
		}
		if err != nil {
			return req, ups, bodyError(err)
		}
		switch p.FormName() {
		case partMessage:
			if seenMessage {
				return req, ups, fmt.Errorf("%w: more than one %q part", ErrInvalid, partMessage)
			}
			seenMessage = true
			dec := json.NewDecoder(io.LimitReader(p, maxBody))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				return req, ups, fmt.Errorf("%w: %q part: %v", ErrInvalid, partMessage, err)
			}
		case partFile:
			if len(ups) == MaxFiles {
				return req, ups, fmt.Errorf("%w: more than %d files", ErrInvalid, MaxFiles)
			}
			u, err := s.stage(p, limit)
			if err != nil {
				return req, ups, err
			}
			ups = append(ups, u)
		default:
			return req, ups, fmt.Errorf("%w: unknown part %q: want %q and %q parts", ErrInvalid, p.FormName(), partMessage, partFile)
		}
	}
}

// stage streams one file part into the uploads spool.
func (s *Server) stage(p *multipart.Part, limit int64) (upload, error) {
	name := filepath.Base(strings.ReplaceAll(p.FileName(), `\`, "/"))
	if name == "" || name == "." || name == "/" {
		return upload{}, fmt.Errorf("%w: a %q part without a file name", ErrInvalid, partFile)
	}
	m := mediaFor(name, p.Header.Get("Content-Type"), time.Now())
	st, err := s.opts.Uploads.Stage(m.Name, m.MIME, kindOf(m), p, limit)
	switch {
	case errors.Is(err, home.ErrTooLarge):
		return upload{}, fmt.Errorf("%w: %s is larger than the %s limit for files", errTooLarge, name, media.HumanBytes(limit))
	case err != nil:
		return upload{}, bodyError(err)
	}
	m.Size = st.File().Size
	return upload{staged: st, media: m}, nil
}

// bodyError classes an error reading the request: a body over the whole
// request's bound is too large, anything else from the client invalid.
func bodyError(err error) error {
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return fmt.Errorf("%w: the request is larger than %s", errTooLarge, media.HumanBytes(mbe.Limit))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "multipart") {
		return fmt.Errorf("%w: request body: %v", ErrInvalid, err)
	}
	return err
}

// mediaFor is the media of a file posted as name with Content-Type ct: its
// kind from ct, else from the name's extension (an image; audio, which is
// transcribed as a voice note; or a document), and the name it is saved
// as in the group's inbox/: "<date>-<random>-<name>", unique and plain.
func mediaFor(name, ct string, now time.Time) channel.Media {
	typ, _, err := mime.ParseMediaType(ct)
	if err != nil || typ == "" || typ == "application/octet-stream" {
		if byExt, _, err := mime.ParseMediaType(mime.TypeByExtension(strings.ToLower(filepath.Ext(name)))); err == nil {
			typ = byExt
		}
	}
	if typ == "" {
		typ = "application/octet-stream"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	m := channel.Media{
		Source: media.SourceUpload,
		Name:   media.SafeName(now.UTC().Format("20060102") + "-" + hex.EncodeToString(b[:]) + "-" + name),
		MIME:   typ,
	}
	switch {
	case strings.HasPrefix(typ, "image/"):
		m.Label = "image"
	case strings.HasPrefix(typ, "audio/"):
		m.Label, m.Voice = "voice note", true
	default:
		m.Label = fmt.Sprintf("document %q", name)
	}
	return m
}

// kindOf is the spool's kind of m (image, audio or document).
func kindOf(m channel.Media) string {
	switch {
	case m.Label == "image":
		return "image"
	case m.Voice:
		return "audio"
	}
	return "document"
}
