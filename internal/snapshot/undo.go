package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

// Errors of Diff and Undo.
var (
	// ErrOpen: the change has not ended (its turn runs, or was cut off
	// and is ended at the group's next turn).
	ErrOpen = errors.New("the turn has not ended yet")
	// ErrConflict: files the turn changed were changed again since; the
	// owner chooses (UndoOptions.Force or Keep, or Only).
	ErrConflict = errors.New("changed again since the turn")
	// ErrOtherGroup: the change is not the named group's.
	ErrOtherGroup = errors.New("the turn is not this group's")
)

// FileDiff is one path a change changed.
type FileDiff struct {
	Path   string `json:"path"`             // memory under .claude/
	Memory bool   `json:"memory,omitempty"` // the group's CLAUDE.md or the agent's own memory
	Op     string `json:"op"`               // added, removed, modified
	Before string `json:"before"`           // what it was ("file, 12 bytes", "nothing", …)
	After  string `json:"after"`
	// Added and Removed count lines of a text file; Lines lists the
	// changes with two lines of context ("+", "-", " " and "@@").
	Added   int      `json:"added,omitempty"`
	Removed int      `json:"removed,omitempty"`
	Lines   []string `json:"lines,omitempty"`
	Note    string   `json:"note,omitempty"`
}

// Report is what one change changed, file by file.
type Report struct {
	Change store.Change `json:"-"`
	Files  []FileDiff   `json:"files"`
}

// maxListing bounds the lines of one file's listing in a report.
const maxListing = 400

// Diff reports what change id changed (from its before to its after
// snapshot). A change still open is ErrOpen.
func (s *Service) Diff(ctx context.Context, id store.ChangeID) (Report, error) {
	c, err := s.db.Changes.Get(ctx, id)
	if err != nil {
		return Report{}, err
	}
	if c.Open() {
		return Report{Change: c}, ErrOpen
	}
	s.gc.RLock()
	defer s.gc.RUnlock()
	ds, err := s.deltas(roots{c.BeforeFiles, c.BeforeMemory}, roots{c.AfterFiles, c.AfterMemory})
	if err != nil {
		return Report{}, err
	}
	r := Report{Change: c}
	for _, d := range ds {
		r.Files = append(r.Files, s.fileDiff(d.delta, d.memory, d.display))
	}
	return r, nil
}

// rootDelta is a delta with the tree it is in.
type rootDelta struct {
	delta
	memory  bool   // in the Claude home
	display string // the path as shown
}

func (s *Service) deltas(a, b roots) ([]rootDelta, error) {
	var out []rootDelta
	fd, err := s.diffTrees(a.files, b.files, "")
	if err != nil {
		return nil, err
	}
	for _, d := range fd {
		out = append(out, rootDelta{d, false, d.path})
	}
	md, err := s.diffTrees(a.memory, b.memory, "")
	if err != nil {
		return nil, err
	}
	for _, d := range md {
		out = append(out, rootDelta{d, true, displayPath(d.path, true)})
	}
	return out, nil
}

func (s *Service) fileDiff(d delta, inClaude bool, display string) FileDiff {
	f := FileDiff{Path: display, Memory: inClaude || isMemoryFile(d.path), Before: describe(d.old), After: describe(d.new)}
	switch {
	case d.old == nil:
		f.Op = "added"
	case d.new == nil:
		f.Op = "removed"
	default:
		f.Op = "modified"
	}
	a, okA := s.content(d.old)
	b, okB := s.content(d.new)
	switch {
	case okA && okB:
		f.Added, f.Removed, f.Lines = lineDiff(a, b, 2)
		if len(f.Lines) > maxListing {
			f.Note = fmt.Sprintf("%d more lines not shown", len(f.Lines)-maxListing)
			f.Lines = f.Lines[:maxListing]
		}
	case d.old != nil && d.new != nil && d.old.Type == d.new.Type && d.old.Hash == d.new.Hash:
		f.Note = "permissions changed"
	case d.old != nil && d.old.Type == typeLarge || d.new != nil && d.new.Type == typeLarge:
		f.Note = "over the size limit: recorded by size and hash only"
	default:
		f.Note = "not text"
	}
	return f
}

// UndoOptions choose what an undo does with the files the turn changed
// that were changed again since.
type UndoOptions struct {
	// Force overwrites them (what they were is kept in the undo's own
	// record, so the undo can be undone).
	Force bool
	// Keep leaves them as they are and undoes the rest.
	Keep bool
	// Only limits the undo to these paths (as Diff shows them).
	Only []string
}

// Conflict is a path the turn changed that was changed again since.
type Conflict struct {
	Path      string   `json:"path"`
	TurnLeft  string   `json:"turn_left"` // what the turn left there
	Now       string   `json:"now"`       // what is there now
	Lines     []string `json:"lines,omitempty"`
	Overwrite bool     `json:"overwritten,omitempty"` // Force: it was overwritten
}

// UndoResult is what an undo did.
type UndoResult struct {
	Change    store.ChangeID `json:"change,omitempty"` // the undo's own record; 0: nothing was done
	Restored  []string       `json:"restored,omitempty"`
	Conflicts []Conflict     `json:"conflicts,omitempty"`
	// Kept are conflicting paths left as they are (Keep).
	Kept []string `json:"kept,omitempty"`
	// NotRestorable are paths whose earlier content was not kept (over the
	// size limit, a special file, unreadable).
	NotRestorable []string `json:"not_restorable,omitempty"`
}

// op is one write of an undo's plan: put path (in the Claude home when
// Memory) back to Entry (nil: remove it).
type op struct {
	Path   string `json:"path"`
	Memory bool   `json:"memory,omitempty"`
	Type   string `json:"type,omitempty"` // "f", "l"; empty: remove
	Perm   uint32 `json:"perm,omitempty"`
	Hash   string `json:"hash,omitempty"`
	// Dir: a directory the turn made, removed when empty after the
	// writes.
	Dir bool `json:"dir,omitempty"`
}

// Undo puts folder's files and memory that change id changed back to what
// they were before it, and records that as a change of its own (kind
// undo), so it can be undone in turn. A path changed again since the turn
// is a conflict: without Force or Keep nothing is written and the result
// lists the conflicts with ErrConflict. The caller makes sure no turn of
// the group runs meanwhile (agentrun.Runner.Idle). The writes follow a plan
// recorded before the first of them, so an undo cut off by a crash is
// finished by Recover.
func (s *Service) Undo(ctx context.Context, folder store.Folder, id store.ChangeID, opt UndoOptions) (UndoResult, error) {
	var res UndoResult
	c, err := s.db.Changes.Get(ctx, id)
	if err != nil {
		return res, err
	}
	if c.Folder != folder {
		return res, ErrOtherGroup
	}
	if c.Open() {
		return res, ErrOpen
	}
	s.gc.RLock()
	defer s.gc.RUnlock()
	g := s.group(folder)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := s.endOpen(ctx, folder, g, "ended before an undo"); err != nil {
		return res, err
	}
	now, note, err := s.take(folder, g)
	if err != nil {
		return res, err
	}
	if err := s.outside(ctx, folder, g, now); err != nil {
		return res, err
	}
	g.last = now
	ds, err := s.deltas(roots{c.BeforeFiles, c.BeforeMemory}, roots{c.AfterFiles, c.AfterMemory})
	if err != nil {
		return res, err
	}
	var plan []op
	var taken []rootDelta
	for _, d := range ds {
		if len(opt.Only) > 0 && !slices.Contains(opt.Only, d.display) {
			continue
		}
		root := now.files
		if d.memory {
			root = now.memory
		}
		cur, err := s.lookup(root, d.path)
		if err != nil {
			return res, err
		}
		switch {
		case same(cur, d.old):
			continue // already as it was before the turn
		case d.old != nil && d.old.Type != typeFile && d.old.Type != typeLink:
			res.NotRestorable = append(res.NotRestorable, d.display)
			continue
		case !same(cur, d.new):
			cf := Conflict{Path: d.display, TurnLeft: describe(d.new), Now: describe(cur)}
			if a, okA := s.content(d.new); okA {
				if b, okB := s.content(cur); okB {
					_, _, cf.Lines = lineDiff(a, b, 2)
				}
			}
			switch {
			case opt.Force:
				cf.Overwrite = true
			case opt.Keep:
				res.Kept = append(res.Kept, d.display)
				res.Conflicts = append(res.Conflicts, cf)
				continue
			}
			res.Conflicts = append(res.Conflicts, cf)
		}
		plan = append(plan, planOp(d))
		taken = append(taken, d)
	}
	if len(res.Conflicts) > 0 && !opt.Force && !opt.Keep {
		return res, fmt.Errorf("%d file(s) %w: --force overwrites them (the undo can be undone), --keep leaves them and undoes the rest", len(res.Conflicts), ErrConflict)
	}
	// Directories the turn made and that are empty once its files go.
	if len(plan) == 0 {
		return res, nil
	}
	plan = append(plan, s.madeDirs(taken)...)
	if len(plan) == 0 {
		return res, nil
	}
	data, err := json.Marshal(plan)
	if err != nil {
		return res, err
	}
	b := s.o.batch()
	ph, _, err := b.put(data)
	if err == nil {
		err = b.commit()
	}
	if err != nil {
		b.abort()
		return res, err
	}
	uid, err := s.db.Changes.Begin(ctx, store.Change{Folder: folder, Kind: store.ChangeUndo, Undoes: id, Plan: ph,
		StartedAt: s.cfg.Now(), BeforeFiles: now.files, BeforeMemory: now.memory, Note: note})
	if err != nil {
		return res, err
	}
	if err := s.apply(folder, plan); err != nil {
		return res, err
	}
	g.open, g.openRoots, g.openKind = uid, now, store.ChangeUndo
	if err := s.endOpen(ctx, folder, g, ""); err != nil {
		return res, err
	}
	res.Change = uid
	for _, p := range plan {
		if !p.Dir {
			res.Restored = append(res.Restored, displayPath(p.Path, p.Memory))
		}
	}
	return res, nil
}

func planOp(d rootDelta) op {
	p := op{Path: d.path, Memory: d.memory}
	if d.old != nil {
		p.Type, p.Perm, p.Hash = string(d.old.Type), d.old.Perm, d.old.Hash
	}
	return p
}

// madeDirs are the directories holding files the turn added that were not
// there before it, deepest first, to remove when empty.
func (s *Service) madeDirs(ds []rootDelta) []op {
	seen := map[op]bool{}
	var out []op
	for _, d := range ds {
		if d.old != nil {
			continue
		}
		for dir := path.Dir(d.path); dir != "." && dir != ""; dir = path.Dir(dir) {
			o := op{Path: dir, Memory: d.memory, Dir: true}
			if !seen[o] {
				seen[o] = true
				out = append(out, o)
			}
		}
	}
	slices.SortFunc(out, func(a, b op) int { return strings.Count(b.Path, "/") - strings.Count(a.Path, "/") })
	return out
}

// apply carries out an undo's plan. Every step is idempotent, so a plan
// cut off is finished by running it again.
func (s *Service) apply(folder store.Folder, plan []op) error {
	trees := map[bool]*home.Tree{}
	defer func() {
		for _, t := range trees {
			t.Close()
		}
	}()
	for _, p := range plan {
		if s.betweenWrites != nil {
			s.betweenWrites()
		}
		t := trees[p.Memory]
		if t == nil {
			var err error
			if p.Memory {
				t, err = s.home.Claude(string(folder))
			} else {
				t, err = s.home.Group(string(folder))
			}
			if err != nil {
				return err
			}
			trees[p.Memory] = t
		}
		var err error
		switch {
		case p.Dir:
			// Only an empty directory goes; one with anything in it stays.
			if derr := t.Delete(p.Path); derr != nil && !isNotEmpty(derr) {
				err = derr
			}
		case p.Type == "":
			err = t.Delete(p.Path)
		case p.Type == string(typeLink):
			var target []byte
			if target, err = s.o.get(p.Hash); err == nil {
				err = t.PutLink(p.Path, string(target))
			}
		default:
			var data []byte
			if data, err = s.o.get(p.Hash); err == nil {
				err = t.Put(p.Path, data, os.FileMode(p.Perm&0o777))
			}
		}
		if err != nil {
			return fmt.Errorf("undo: %s: %w", p.Path, err)
		}
	}
	return nil
}

func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}

// Recover finishes what a crash cut off: the writes of an undo (its plan
// runs again) and every change left open (ended with what is there now).
func (s *Service) Recover(ctx context.Context) error {
	open, err := s.db.Changes.Opened(ctx)
	if err != nil {
		return err
	}
	for _, c := range open {
		s.gc.RLock()
		g := s.group(c.Folder)
		g.mu.Lock()
		err := s.recoverOne(ctx, c, g)
		g.mu.Unlock()
		s.gc.RUnlock()
		if err != nil {
			return fmt.Errorf("recover change %d of %s: %w", c.ID, c.Folder, err)
		}
	}
	return nil
}

func (s *Service) recoverOne(ctx context.Context, c store.Change, g *groupState) error {
	why := "ended after a restart"
	if (c.Kind == store.ChangeUndo || c.Kind == store.ChangeHeld) && c.Plan != "" {
		data, err := s.o.get(c.Plan)
		if err != nil {
			return err
		}
		var plan []op
		if err := json.Unmarshal(data, &plan); err != nil {
			return err
		}
		if err := s.removeTemps(c.Folder, plan); err != nil {
			return err
		}
		if err := s.apply(c.Folder, plan); err != nil {
			return err
		}
		why = "finished after a restart"
	}
	g.loadedOpenFrom = true
	g.open, g.openRoots, g.openKind = c.ID, roots{c.BeforeFiles, c.BeforeMemory}, c.Kind
	return s.endOpen(ctx, c.Folder, g, why)
}

// removeTemps removes what the writes of plan cut off by a crash left
// beside their paths: the undo is finished as if it had never stopped.
func (s *Service) removeTemps(folder store.Folder, plan []op) error {
	for _, memory := range []bool{false, true} {
		open := s.home.Group
		if memory {
			open = s.home.Claude
		}
		var t *home.Tree
		for _, p := range plan {
			if p.Memory != memory || p.Dir {
				continue
			}
			if t == nil {
				var err error
				if t, err = open(string(folder)); err != nil {
					return err
				}
				defer t.Close()
			}
			if err := t.RemoveTemps(p.Path); err != nil {
				return fmt.Errorf("undo: %s: %w", p.Path, err)
			}
		}
	}
	return nil
}

// lookup finds path in tree root (nil: not there).
func (s *Service) lookup(root, p string) (*entry, error) {
	h := root
	parts := strings.Split(p, "/")
	for i, name := range parts {
		es, err := s.tree(h)
		if err != nil {
			return nil, err
		}
		var found *entry
		for k := range es {
			if es[k].Name == name {
				found = &es[k]
				break
			}
		}
		if found == nil {
			return nil, nil
		}
		if i == len(parts)-1 {
			return found, nil
		}
		if found.Type != typeDir {
			return nil, nil
		}
		h = found.Hash
	}
	return nil, nil
}

// same reports whether two entries are the same thing with the same
// content.
func same(a, b *entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Type == b.Type && a.Hash == b.Hash && a.Perm == b.Perm && a.Kind == b.Kind
}
