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
// left by a crash. The objects are marked while snapshots go on; snapshots
// wait only while the changes recorded meanwhile are marked too (one may
// have reused an old object) and the unreached objects are removed.
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
	live := map[string]bool{}
	last, err := s.mark(ctx, live, 0)
	if err != nil {
		return p, err
	}
	type candidate struct {
		path, name string
		size       int64
	}
	var cands []candidate
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
		if filepath.Dir(rel) == "tmp" {
			name = ""
		}
		if name != "" && live[name] {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().Before(old) {
			cands = append(cands, candidate{path, name, fi.Size()})
		}
		return nil
	})
	if err != nil || len(cands) == 0 {
		return p, err
	}
	s.gc.Lock()
	defer s.gc.Unlock()
	if _, err := s.mark(ctx, live, last); err != nil {
		return p, err
	}
	gone := map[string]bool{}
	for _, c := range cands {
		if c.name != "" && live[c.name] {
			continue
		}
		if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return p, err
		}
		gone[c.name] = true
		p.Objects++
		p.Bytes += c.size
	}
	// A group's caches may name what is gone (a snapshot whose change was
	// never recorded): those entries are read again next time, and every
	// directory is listed (one of last time may name what is gone).
	s.mu.Lock()
	for _, g := range s.groups {
		for _, t := range []*treeState{g.files, g.memory} {
			lost := false
			for k, c := range t.files {
				if gone[c.hash] {
					delete(t.files, k)
					lost = true
				}
			}
			for k, c := range t.dirs {
				if gone[c.hash] {
					delete(t.dirs, k)
					lost = true
				}
			}
			if lost {
				s.w.mu.Lock()
				t.full = true
				s.w.mu.Unlock()
			}
		}
	}
	s.mu.Unlock()
	return p, nil
}

// mark adds to live the objects the changes after `after` reach: their
// trees, what the trees name and the undo plans with what they name. It
// returns where a later mark resumes: after the last change marked, or
// before the first one still open (its end names objects not marked yet).
func (s *Service) mark(ctx context.Context, live map[string]bool, after store.ChangeID) (store.ChangeID, error) {
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
	resume := store.ChangeID(-1)
	done := func() store.ChangeID {
		if resume >= 0 {
			return resume
		}
		return after
	}
	for {
		cs, err := s.db.Changes.Roots(ctx, after, 500)
		if err != nil {
			return done(), err
		}
		for _, c := range cs {
			after = c.ID
			if c.Open() && resume < 0 {
				resume = c.ID - 1
			}
			for _, h := range []string{c.BeforeFiles, c.BeforeMemory, c.AfterFiles, c.AfterMemory} {
				if err := walk(h); err != nil {
					return done(), err
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
			return done(), nil
		}
	}
}
