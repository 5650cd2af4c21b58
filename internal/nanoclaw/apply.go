package nanoclaw

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

const nofollow = syscall.O_NOFOLLOW

type applier struct {
	db   *store.DB
	home *home.Home
}

// Apply does p's steps in order, into db and h, and returns the text of
// each step done. It stops at the first step that fails; what was done
// stays, and a new plan picks up from there.
func Apply(ctx context.Context, p *Plan, db *store.DB, h *home.Home) ([]string, error) {
	a := &applier{db: db, home: h}
	var done []string
	for _, s := range p.Steps {
		if err := s.do(ctx, a); err != nil {
			return done, fmt.Errorf("%s: %w", s.Text, err)
		}
		done = append(done, s.Text)
	}
	return done, nil
}

// writeNewFile writes data to path, made with its directory, only if
// nothing is there: temp file, sync, link into place.
func writeNewFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".import-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s appeared meanwhile: %w", path, err)
		}
		return err
	}
	return nil
}
