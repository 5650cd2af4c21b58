package ipchost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// Size caps of the files an agent sends, by kind. They follow WhatsApp's
// limits for media (16 MB for images, voice and audio) and keep documents
// well under its 100 MB, so a file the daemon accepts is one WhatsApp takes.
const (
	MaxImageBytes    = 16 << 20
	MaxAudioBytes    = 16 << 20
	MaxDocumentBytes = 64 << 20
)

// Per-group caps on the files staged for sending, by default: far above
// what a chat sends, low enough that one group cannot fill the disk.
const (
	DefaultFilesPerMinute  = 60
	DefaultFileBytesPerDay = 2 << 30
)

// FileLimits caps the files one group stages for sending (send_message with
// a file), counted from the outbox rows that carry one. Past a cap the tool
// is refused and nothing is staged.
type FileLimits struct {
	PerMinute   int   // files in any 60 seconds
	BytesPerDay int64 // bytes (of the files' sizes) in any 24 hours
}

// sparseMin is the size from which a file whose data blocks are under half
// its size is refused: copied, its holes would take their full size.
const sparseMin = 1 << 20

// AgentWorkspace is where the group's workspace is mounted in its
// container: an absolute file path the agent gives must lie under it.
const AgentWorkspace = "/workspace/group"

// File kinds, as home.Spooled and channel.Attachment name them.
const (
	kindImage    = "image"
	kindAudio    = "audio"
	kindDocument = "document"
)

// audioTypes are the audio files sent as audio (a voice note or a track),
// by extension; WhatsApp plays these formats.
var audioTypes = map[string]string{
	".ogg":  "audio/ogg",
	".opus": "audio/ogg",
	".oga":  "audio/ogg",
	".mp3":  "audio/mpeg",
	".m4a":  "audio/mp4",
	".aac":  "audio/aac",
	".amr":  "audio/amr",
}

// workspacePath turns send_message's file argument into a slash-separated
// path inside the group's workspace, or says why it is not one.
func workspacePath(arg string) (string, error) {
	p := strings.TrimSpace(arg)
	if strings.HasPrefix(p, "/") {
		rest, ok := strings.CutPrefix(path.Clean(p), AgentWorkspace+"/")
		if !ok {
			return "", badRequest("file %q is outside your workspace: give a path inside %s", arg, AgentWorkspace)
		}
		p = rest
	}
	p = strings.TrimPrefix(p, "./")
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return "", badRequest("file %q is outside your workspace: give a path inside %s", arg, AgentWorkspace)
		}
	}
	p = path.Clean(p)
	if p == "." || p == "" {
		return "", badRequest("file %q names no file", arg)
	}
	return p, nil
}

// stageFile copies the file the agent named out of the group's workspace
// into the spool, through the safe file layer: a symlink anywhere on the
// path, a fifo, a device, a file over its kind's cap, a sparse file or a
// file past the group's caps (checkFileCaps) is refused with a message the
// agent can act on, and nothing is staged.
func (h *Host) stageFile(ctx context.Context, folder store.Folder, arg string) (*home.Staged, error) {
	rel, err := workspacePath(arg)
	if err != nil {
		return nil, err
	}
	tree, err := h.home.Group(string(folder))
	if err != nil {
		return nil, fmt.Errorf("open the workspace of %s: %w", folder, err)
	}
	defer tree.Close()
	f, err := tree.OpenFile(rel, MaxDocumentBytes)
	if err != nil {
		return nil, fileFailure(arg, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	head = head[:n]
	name := path.Base(rel)
	kind, mimeType := fileKind(name, head)
	limit := int64(MaxDocumentBytes)
	switch kind {
	case kindImage:
		limit = MaxImageBytes
	case kindAudio:
		limit = MaxAudioBytes
	}
	if fi.Size() > limit {
		return nil, badRequest("file %q not sent: %s is over the %d MiB limit for %s files", arg, sizeText(fi.Size()), limit>>20, kind)
	}
	if fi.Size() >= sparseMin {
		data, err := dataBytes(f, fi)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", rel, err)
		}
		if data < fi.Size()/2 {
			return nil, badRequest("file %q not sent: it is sparse (%s, of which only %s is written data); "+
				"bridged does not send files that are mostly holes: write the data out in full first", arg, sizeText(fi.Size()), sizeText(data))
		}
	}
	if err := h.checkFileCaps(ctx, nil, folder, arg, fi.Size()); err != nil {
		return nil, err
	}
	st, err := h.home.Spool().Stage(name, mimeType, kind, io.MultiReader(strings.NewReader(string(head)), f), limit)
	if errors.Is(err, home.ErrTooLarge) {
		return nil, badRequest("file %q not sent: it grew over the %d MiB limit for %s files", arg, limit>>20, kind)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// checkFileCaps refuses a file of size bytes that would take the group
// past its caps (Config.Files): files in the last minute, bytes in the last
// 24 hours, counted from its outbox rows (inside tx when it is not nil).
func (h *Host) checkFileCaps(ctx context.Context, tx *store.Tx, folder store.Folder, arg string, size int64) error {
	count := h.db.Outbox.Files
	if tx != nil {
		count = tx.Outbox.Files
	}
	now := h.now()
	lim := h.cfg.Files
	files, _, err := count(ctx, folder, now.Add(-time.Minute))
	if err != nil {
		return err
	}
	if files >= lim.PerMinute {
		return refused("file %q not sent: this group already sent %d files in the last minute, the most it may "+
			"(BRIDGED_OUTBOX_FILES_PER_MINUTE); send it again in a minute", arg, files)
	}
	_, bytes, err := count(ctx, folder, now.Add(-24*time.Hour))
	if err != nil {
		return err
	}
	if bytes+size > lim.BytesPerDay {
		return refused("file %q not sent: with it, this group's files of the last 24 hours would come to %s, over the %s "+
			"it may send a day (BRIDGED_OUTBOX_BYTES_PER_DAY)", arg, sizeText(bytes+size), sizeText(lim.BytesPerDay))
	}
	return nil
}

// dataBytes returns how many bytes of the open file f (described by fi)
// hold data rather than holes, found with SEEK_DATA and SEEK_HOLE (the
// allocated blocks where the file system cannot tell). It stops counting
// once half the file is data, and leaves f's offset where it was.
func dataBytes(f *os.File, fi fs.FileInfo) (int64, error) {
	size := fi.Size()
	at, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int64
	var serr error
	err = rc.Control(func(fd uintptr) {
		for off := int64(0); off < size && n < size/2; {
			d, err := unix.Seek(int(fd), off, unix.SEEK_DATA)
			if errors.Is(err, unix.ENXIO) {
				return // only a hole is left
			}
			if err != nil {
				serr = err
				return
			}
			h, err := unix.Seek(int(fd), d, unix.SEEK_HOLE)
			if err != nil {
				serr = err
				return
			}
			h = min(h, size)
			if h <= d {
				return
			}
			n += h - d
			off = h
		}
	})
	if err == nil && serr != nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (errors.Is(serr, unix.EINVAL) || errors.Is(serr, unix.EOPNOTSUPP)) {
			n, serr = min(st.Blocks*512, size), nil
		}
		err = serr
	}
	if err != nil {
		return 0, err
	}
	if _, err := f.Seek(at, io.SeekStart); err != nil {
		return 0, err
	}
	return n, nil
}

// fileFailure explains a file the safe file layer would not open.
func fileFailure(arg string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return badRequest("file %q not sent: no such file in your workspace", arg)
	case errors.Is(err, home.ErrNotRegular):
		return badRequest("file %q not sent: only regular files in your workspace can be sent, not links, fifos, devices or directories (%v)", arg, errors.Unwrap(err))
	case errors.Is(err, home.ErrTooLarge):
		return badRequest("file %q not sent: over the %d MiB limit", arg, MaxDocumentBytes>>20)
	case errors.Is(err, home.ErrBadName):
		return badRequest("file %q not sent: not a plain path inside your workspace", arg)
	}
	return fmt.Errorf("open file %q: %w", arg, err)
}

// fileKind says how a file is sent: JPEG and PNG images (by content) as
// images, the audio formats WhatsApp plays (by extension) as audio, and
// everything else as a document.
func fileKind(name string, head []byte) (kind, mimeType string) {
	sniffed := http.DetectContentType(head)
	if sniffed == "image/jpeg" || sniffed == "image/png" {
		return kindImage, sniffed
	}
	ext := strings.ToLower(path.Ext(name))
	if t, ok := audioTypes[ext]; ok {
		return kindAudio, t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return kindDocument, t
	}
	return kindDocument, sniffed
}

// sizeText is a byte count for people: "512 B", "12.3 KiB", "4.0 MiB".
func sizeText(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// outFile is the file a send_message queues with its message: its staged
// copy, what the answer says of it, and what commits with the row.
type outFile struct {
	h      *Host
	folder store.Folder
	arg    string // the file as the agent named it
	staged *home.Staged
	info   ipc.FileInfo
}

// commit, inside the transaction that enqueues row it, checks the group's
// file caps again (so nothing that raced the first check gets past them),
// sets the file on the row and keeps the staged copy under the row's key,
// where the outbox finds it.
func (f *outFile) commit(ctx context.Context, tx *store.Tx, it store.OutboxItem) error {
	if err := f.h.checkFileCaps(ctx, tx, f.folder, f.arg, f.info.Size); err != nil {
		return err
	}
	if err := tx.Outbox.SetFile(ctx, it.ID, f.info.Name, f.info.Size); err != nil {
		return err
	}
	return f.staged.Keep(home.SpoolKey(int64(it.ID), it.ExternalID))
}
