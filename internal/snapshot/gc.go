package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// Grace is how old an object no change names must be before a collection
// removes it: longer than any snapshot takes, so the objects of one being
// taken (written before its row) are never taken for garbage.
const Grace = time.Hour

// pruneBatch is how many changes one write transaction of Prune removes.
const pruneBatch = 100

// Pruned counts what a Prune removed.
type Pruned struct {
	Changes, Objects int
	Bytes            int64
}

// Prune removes the ended changes that began before `before` (never a
// group's newest: what its files are now stays known), then every object
// no remaining change reaches, once it is Grace old, and temporary files
// left by a crash. Snapshots wait while the objects are collected.
func (s *Service) Prune(ctx context.Context, before time.Time) (Pruned, error) {
	var p Pruned
	for {
		n, err := s.db.Changes.Prune(ctx, before, pruneBatch)
		p.Changes += n
		if err != nil {
			return p, err
		}
		if n < pruneBatch {
			break
		}
	}
	s.gc.Lock()
	defer s.gc.Unlock()
	live, err := s.mark(ctx)
	if err != nil {
		return p, err
	}
	old := s.cfg.Now().Add(-Grace)
	err = filepath.WalkDir(s.o.dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(s.o.dir, path)
		name := filepath.Dir(rel) + filepath.Base(rel)
		if filepath.Dir(rel) != "tmp" && live[name] {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().After(old) {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		p.Objects++
		p.Bytes += fi.Size()
		return nil
	})
	if p.Objects > 0 {
		// A group's cache may name a file's content that is gone now:
		// the next snapshot reads every file again.
		s.mu.Lock()
		for _, g := range s.groups {
			g.files, g.memory, g.fileDirs, g.memoryDirs = nil, nil, nil, nil
		}
		s.mu.Unlock()
	}
	return p, err
}

// mark returns the objects the changes reach: their trees, what the trees
// name and the undo plans with what they name.
func (s *Service) mark(ctx context.Context) (map[string]bool, error) {
	live := map[string]bool{}
	var walk func(h string) error
	walk = func(h string) error {
		if h == "" || live[h] {
			return nil
		}
		live[h] = true
		es, err := s.tree(h)
		if err != nil {
			// A tree that cannot be read names nothing more to keep;
			// what it named is kept by the grace or lost already.
			s.log.Warn().Err(err).Str("tree", h).Msg("snapshot collection: a tree cannot be read")
			return nil
		}
		for _, e := range es {
			switch e.Type {
			case typeDir:
				if err := walk(e.Hash); err != nil {
					return err
				}
			case typeFile, typeLink:
				live[e.Hash] = true
			}
		}
		return nil
	}
	var after store.ChangeID
	for {
		cs, err := s.db.Changes.Roots(ctx, after, 500)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			after = c.ID
			for _, h := range []string{c.BeforeFiles, c.BeforeMemory, c.AfterFiles, c.AfterMemory} {
				if err := walk(h); err != nil {
					return nil, err
				}
			}
			if c.Plan != "" {
				live[c.Plan] = true
				var plan []op
				data, err := s.o.get(c.Plan)
				if err == nil {
					err = json.Unmarshal(data, &plan)
				}
				if err != nil {
					s.log.Warn().Err(err).Int64("change", int64(c.ID)).Msg("snapshot collection: an undo's plan cannot be read")
				}
				for _, o := range plan {
					if o.Hash != "" {
						live[o.Hash] = true
					}
				}
			}
		}
		if len(cs) < 500 {
			return live, nil
		}
	}
}
