package media

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

// SourceUpload is the source of files posted with a message through the
// control API: its Ref is UploadRef, the file is in the home's uploads
// spool (home.Home.Uploads).
const SourceUpload = "upload"

// UploadRef is the Ref of an uploaded file.
type UploadRef struct {
	Key string `json:"key"`
	// Post and Of mark a file of a post of Of > 1 files (Post is the
	// post's key): the post's messages wait for one another and are
	// handed to the agent in one turn (store.PendingMessages).
	Post string `json:"post,omitempty"`
	Of   int    `json:"of,omitempty"`
}

// Uploads fetches posted files from the uploads spool and removes each once
// its media settled.
type Uploads struct {
	Spool home.Spool
	Log   zerolog.Logger
}

// Fetch copies m's upload into dst.
func (u Uploads) Fetch(ctx context.Context, m store.Media, dst *os.File, limit int64) error {
	var ref UploadRef
	if err := json.Unmarshal(m.Ref, &ref); err != nil || ref.Key == "" {
		return fmt.Errorf("bad upload reference")
	}
	f, ok, err := u.Spool.Get(ref.Key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the uploaded file is gone")
	}
	src, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("open the uploaded file: %w", err)
	}
	defer src.Close()
	n, err := io.Copy(dst, io.LimitReader(readerCtx{ctx, src}, limit+1))
	if err != nil {
		return fmt.Errorf("copy the uploaded file: %w", err)
	}
	if n > limit {
		return ErrTooLarge
	}
	return nil
}

// Cleanup removes m's upload.
func (u Uploads) Cleanup(m store.Media) {
	var ref UploadRef
	if json.Unmarshal(m.Ref, &ref) != nil || ref.Key == "" {
		return
	}
	if err := u.Spool.Remove(ref.Key); err != nil {
		u.Log.Warn().Err(err).Str("key", ref.Key).Msg("cannot remove an upload")
	}
}

// uploadLeftover is how old an upload no pending media names must be to be
// removed: older than any request that could still be committing it.
const uploadLeftover = time.Hour

// Prune removes uploads no pending media names (their message was never
// committed, or the daemon died before removing them), given the media
// pending at start.
func (u Uploads) Prune(pending []store.Media) {
	keep := make(map[string]bool)
	for _, m := range pending {
		var ref UploadRef
		if m.Source == SourceUpload && json.Unmarshal(m.Ref, &ref) == nil {
			keep[ref.Key] = true
		}
	}
	n, err := u.Spool.PruneUploads(time.Now().Add(-uploadLeftover), func(key string) bool { return keep[key] })
	if err != nil {
		u.Log.Warn().Err(err).Msg("cannot prune uploads")
	} else if n > 0 {
		u.Log.Info().Int("uploads", n).Msg("removed uploads no message needs")
	}
}

// readerCtx stops a copy once ctx ends.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
