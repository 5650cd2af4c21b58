package snapshot

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

// Defaults.
const (
	// DefaultMaxFile: a file larger than this is recorded by its size and
	// hash only (its content is not kept, so an undo cannot bring it back).
	DefaultMaxFile = 16 << 20
	// DefaultMaxEntries bounds the entries one snapshot of a tree records;
	// past it the snapshot is partial and says so.
	DefaultMaxEntries = 200_000
)

// maxSource bounds a change's recorded source, in bytes.
const maxSource = 1000

// MemoryPrefix is how paths in the agent's Claude home are shown: as the
// agent sees them, under ~/.claude.
const MemoryPrefix = ".claude/"

// Config configures a Service.
type Config struct {
	// Dir is where objects are kept (home.Layout.SnapshotsDir): never
	// mounted into a container.
	Dir string
	// MaxFile: larger files are recorded by size and hash only; 0 means
	// DefaultMaxFile, a negative value keeps no content at all.
	MaxFile    int64
	MaxEntries int // 0: DefaultMaxEntries
	Now        func() time.Time
	// Tell, when set, tells the owner (the main chat) that a memory change
	// was held, with what it was and how to apply it.
	Tell func(ctx context.Context, text string)
}

// Service records a group's folder and memory at each turn's start and
// end, tells what a turn changed and takes a turn back. Safe for
// concurrent use; each group's snapshots are taken one at a time.
type Service struct {
	cfg  Config
	db   *store.DB
	home *home.Home
	o    *objects
	w    *watcher
	log  zerolog.Logger
	// gc is held for writing by a collection of unused objects, for
	// reading by everything that writes objects or relies on them.
	gc     sync.RWMutex
	mu     sync.Mutex
	groups map[store.Folder]*groupState
	// betweenWrites, when set (tests), runs between two writes of an
	// undo: the window in which a kill cuts an undo off.
	betweenWrites func()
	// listed counts the directories snapshots listed (tests).
	listed atomic.Int64
}

// groupState is one group's snapshots: its lock, what the last snapshot
// of its two trees recorded, and its change begun and not ended.
type groupState struct {
	mu            sync.Mutex
	files, memory *treeState
	note          string // the last snapshot's note
	open          store.ChangeID
	openRoots     roots
	// last is what the group's files were at its last snapshot recorded
	// (zero: not known yet, read from its newest change).
	last           roots
	openKind       store.ChangeKind
	openHold       bool
	openSource     string // what else the open change's input came from (Finish.Source)
	loadedOpenFrom bool
}

// roots are the root trees of one snapshot of a group.
type roots struct{ files, memory string }

// New returns a Service keeping its objects under cfg.Dir (made at the
// first snapshot: a Service that only reads makes nothing).
func New(cfg Config, db *store.DB, h *home.Home, log zerolog.Logger) *Service {
	if cfg.MaxFile == 0 {
		cfg.MaxFile = DefaultMaxFile
	}
	if cfg.MaxEntries == 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, db: db, home: h, o: newObjects(filepath.Join(cfg.Dir, "objects")), w: newWatcher(log), log: log,
		groups: map[store.Folder]*groupState{}}
}

// Close drops the watches of the groups' trees.
func (s *Service) Close() { s.w.close() }

func (s *Service) group(folder store.Folder) *groupState {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[folder]
	if g == nil {
		g = &groupState{files: newTreeState(), memory: newTreeState()}
		s.groups[folder] = g
	}
	return g
}

// Start is a turn that begins.
type Start struct {
	Folder store.Folder
	Chat   store.ChatID
	Kind   store.ChangeKind // ChangeTurn or ChangeTask
	Upto   store.MessageID
	Task   store.TaskID
	// Source names who other than the owner wrote the messages the turn
	// takes (Sources); empty: the owner alone.
	Source string
	// Hold: a change of memory the turn makes is held for the owner (put
	// back at its end, applied by an undo of the hold): the group is in
	// `ask` and Source is not empty.
	Hold bool
}

// Sources names where msgs came from other than the owner: their senders
// other than the owner and bridged ("Bob (+49170…)"), at most three and
// how many more, and "a received file" when one of them (the owner's
// too) brought a file the channel saved into the group's inbox: where a
// turn's input came from, marked on what it changes.
func Sources(msgs []store.Message) string {
	var names []string
	seen := map[string]bool{}
	file := false
	for _, m := range msgs {
		file = file || ReceivedFile(m.Text)
		if m.FromMe || m.IsBot || seen[m.Sender] {
			continue
		}
		seen[m.Sender] = true
		n := m.Sender
		if m.SenderName != "" && m.SenderName != m.Sender {
			n = m.SenderName + " (" + m.Sender + ")"
		}
		names = append(names, n)
	}
	if len(names) > 3 {
		names = append(names[:2], names[2]+fmt.Sprintf(" and %d more", len(names)-3))
	}
	if file {
		names = append(names, "a received file")
	}
	return strings.Join(names, ", ")
}

// ReceivedFile reports whether text holds the placeholder of a file the
// channel saved into the group's inbox ("[document: inbox/a.pdf]",
// "[voice note 0:12, inbox/v.ogg] …"). A sender can type one too: that
// only marks the turn more cautiously.
func ReceivedFile(text string) bool {
	return strings.Contains(text, ": inbox/") || strings.Contains(text, ", inbox/")
}

// maxFetched bounds the pages named in a turn's source.
const maxFetched = 3

// Fetched names the web pages (URLs) and searches (queries) of a turn, as
// part of its source: "a fetched page https://…, a web search "…"", at most
// maxFetched and how many more.
func Fetched(pages, searches []string) string {
	var out []string
	for _, p := range pages {
		out = append(out, "a fetched page "+p)
	}
	for _, q := range searches {
		out = append(out, fmt.Sprintf("a web search %q", q))
	}
	if len(out) > maxFetched {
		out = append(out[:maxFetched-1], out[maxFetched-1]+fmt.Sprintf(" and %d more", len(out)-maxFetched))
	}
	return strings.Join(out, ", ")
}

// Finish is how a turn ends: what its input came from that is known only
// at its end (the pages the agent fetched).
type Finish struct {
	Folder store.Folder
	// Source names what else the turn's input came from (Fetched); it is
	// added to the source recorded as the turn began.
	Source string
	// Hold: a change of memory the turn made is held for the owner, as
	// for Start.Hold (the group is in `ask` and Source is not empty).
	Hold bool
}

// Begin records the folder and memory of st's group as the turn begins. A
// change of the group still open (its end was never seen) is ended first
// with what is there now. It blocks while the snapshot is taken.
func (s *Service) Begin(ctx context.Context, st Start) (store.ChangeID, error) {
	s.gc.RLock()
	defer s.gc.RUnlock()
	g := s.group(st.Folder)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := s.endOpen(ctx, st.Folder, g, "ended when the next turn began"); err != nil {
		return 0, err
	}
	r, note, err := s.take(st.Folder, g)
	if err != nil {
		return 0, err
	}
	if err := s.outside(ctx, st.Folder, g, r); err != nil {
		return 0, err
	}
	id, err := s.db.Changes.Begin(ctx, store.Change{Folder: st.Folder, Chat: st.Chat, Kind: st.Kind, Upto: st.Upto, Task: st.Task, Source: st.Source,
		StartedAt: s.cfg.Now(), BeforeFiles: r.files, BeforeMemory: r.memory, Note: note})
	if err != nil {
		return 0, err
	}
	g.open, g.openRoots, g.openKind, g.last, g.openHold = id, r, st.Kind, r, st.Hold
	return id, nil
}

// outside records what changed since the group's last snapshot recorded,
// outside any turn, now that r was taken as a turn begins. g.mu held.
func (s *Service) outside(ctx context.Context, folder store.Folder, g *groupState, r roots) error {
	if g.last == (roots{}) {
		cs, err := s.db.Changes.List(ctx, folder, time.Time{}, false, 1)
		if err != nil {
			return err
		}
		if len(cs) == 0 || cs[0].Open() {
			return nil
		}
		g.last = roots{cs[0].AfterFiles, cs[0].AfterMemory}
	}
	if g.last == r {
		return nil
	}
	sum, note, err := s.summarize(g.last, r)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	_, err = s.db.Changes.Add(ctx, store.Change{Folder: folder, Kind: store.ChangeOutside, StartedAt: now, EndedAt: now,
		BeforeFiles: g.last.files, BeforeMemory: g.last.memory, AfterFiles: r.files, AfterMemory: r.memory, Summary: sum,
		Note: joinNotes("changed outside any turn", note)})
	return err
}

// End records the folder and memory of f's group as its turn ends, and
// what the turn changed, marked with f.Source too. Without a turn begun it
// does nothing.
func (s *Service) End(ctx context.Context, f Finish) error {
	s.gc.RLock()
	defer s.gc.RUnlock()
	g := s.group(f.Folder)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != 0 {
		g.openHold = g.openHold || f.Hold
		g.openSource = f.Source
	}
	return s.endOpen(ctx, f.Folder, g, "")
}

// endOpen ends g's open change, if any, with the state now. g.mu held.
func (s *Service) endOpen(ctx context.Context, folder store.Folder, g *groupState, why string) error {
	if !g.loadedOpenFrom {
		g.loadedOpenFrom = true
		open, err := s.db.Changes.Opened(ctx)
		if err != nil {
			return err
		}
		for _, c := range open {
			if c.Folder == folder && c.Kind != store.ChangeUndo && c.Kind != store.ChangeHeld {
				g.open, g.openRoots, g.openKind = c.ID, roots{c.BeforeFiles, c.BeforeMemory}, c.Kind
				why = "ended after a restart"
			}
		}
	}
	if g.open == 0 {
		return nil
	}
	id, before, hold, more := g.open, g.openRoots, g.openHold, g.openSource
	g.open, g.openHold, g.openSource = 0, false, ""
	after, note, err := s.take(folder, g)
	if err != nil {
		return err
	}
	sum, snote, err := s.summarize(before, after)
	if err != nil {
		return err
	}
	c, err := s.db.Changes.Get(ctx, id)
	if err != nil {
		return err
	}
	if more != "" {
		if c.Source != "" {
			more = c.Source + ", " + more
		}
		c.Source = more
		if len(c.Source) > maxSource {
			c.Source = strings.ToValidUTF8(c.Source[:maxSource-3], "") + "…"
		}
	}
	err = s.db.Changes.End(ctx, id, after.files, after.memory, sum, joinNotes(c.Note, note, snote, why), c.Source, s.cfg.Now())
	g.last = after
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err == nil && hold && sum.MemoryAdded+sum.MemoryRemoved > 0 {
		c.AfterFiles, c.AfterMemory, c.Summary = after.files, after.memory, sum
		return s.hold(ctx, folder, g, c)
	}
	return err
}

func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" && !contains(out, n) {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// take snapshots folder's group folder and memory and makes the objects
// durable. Only the directories written since the last snapshot (the
// watch) are listed; when none was, the snapshot is the last one, taken
// without opening anything. g.mu held.
func (s *Service) take(folder store.Folder, g *groupState) (r roots, note string, err error) {
	now := s.cfg.Now()
	fs := &scan{w: s.w, t: g.files, maxFile: s.cfg.MaxFile, maxEntries: s.cfg.MaxEntries, now: now}
	ms := &scan{w: s.w, t: g.memory, maxFile: s.cfg.MaxFile, maxEntries: s.cfg.MaxEntries, now: now, include: isMemory}
	fs.full, fs.dirty = s.w.plan(g.files, now)
	ms.full, ms.dirty = s.w.plan(g.memory, now)
	if !fs.full && !ms.full && len(fs.dirty)+len(ms.dirty) == 0 {
		return roots{g.files.root, g.memory.root}, g.note, nil
	}
	defer func() {
		if err != nil {
			// What the watch marked was taken: list it all next time.
			g.files.reset(s.w)
			g.memory.reset(s.w)
		}
	}()
	b := s.o.batch()
	defer b.abort() // what a failed snapshot wrote
	for _, part := range []struct {
		sc   *scan
		open func(string) (*home.Tree, error)
		root *string
	}{{fs, s.home.Group, &r.files}, {ms, s.home.Claude, &r.memory}} {
		part.sc.b = b
		if !part.sc.full && len(part.sc.dirty) == 0 {
			*part.root = part.sc.t.root
			continue
		}
		t, err := part.open(string(folder))
		if err != nil {
			return roots{}, "", fmt.Errorf("snapshot %s: %w", folder, err)
		}
		*part.root, err = part.sc.run(t)
		t.Close()
		if err != nil {
			return roots{}, "", fmt.Errorf("snapshot %s: %w", folder, err)
		}
	}
	if err := b.commit(); err != nil {
		return roots{}, "", err
	}
	s.w.relist(g.files, fs.relist)
	s.w.relist(g.memory, ms.relist)
	var notes []string
	for _, t := range []*treeState{g.files, g.memory} {
		if len(t.large) > 0 {
			notes = append(notes, fmt.Sprintf("%d file(s) over %s recorded by size and hash only (%s)", len(t.large), sizeText(s.cfg.MaxFile), firstOf(t.large)))
		}
		if t.partial {
			notes = append(notes, fmt.Sprintf("more than %d entries, or more than %d in one directory: the rest not recorded", s.cfg.MaxEntries, home.ScanNames))
		}
		if len(t.skipped) > 0 {
			notes = append(notes, fmt.Sprintf("%d entr(ies) could not be read (%s)", len(t.skipped), firstOf(t.skipped)))
		}
	}
	g.note = strings.Join(notes, "; ")
	s.listed.Add(int64(fs.listed + ms.listed))
	s.log.Debug().Str("group", string(folder)).Int("entries", fs.entries+ms.entries).Int("listed", fs.listed+ms.listed).
		Int("hashed", fs.hashed+ms.hashed).Int64("written", fs.written+ms.written).Dur("took", s.cfg.Now().Sub(now)).Msg("snapshot taken")
	return r, g.note, nil
}

// firstOf names the first path of set, and "…" when there are more.
func firstOf(set map[string]bool) string {
	first := ""
	for p := range set {
		if first == "" || p < first {
			first = p
		}
	}
	if len(set) == 1 {
		return first
	}
	return first + ", …"
}
func sizeText(n int64) string {
	switch {
	case n < 0:
		return "0 bytes"
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// isMemory selects the agent's memory in its Claude home: its CLAUDE.md
// and each project's memory/ directory; sessions, settings and the rest
// are not memory.
func isMemory(rel string, dir bool) bool {
	parts := strings.Split(rel, "/")
	switch {
	case len(parts) == 1:
		return rel == "CLAUDE.md" && !dir || rel == "projects" && dir
	case parts[0] != "projects":
		return false
	case len(parts) == 2:
		return dir
	default:
		return parts[2] == "memory"
	}
}

// isMemoryFile reports whether a path of the group folder is memory: its
// CLAUDE.md.
func isMemoryFile(rel string) bool { return rel == "CLAUDE.md" }

// summarize counts what changed between two snapshots.
func (s *Service) summarize(a, b roots) (store.Summary, string, error) {
	var sum store.Summary
	var notes []string
	for _, part := range []struct {
		a, b   string
		memory bool
	}{{a.files, b.files, false}, {a.memory, b.memory, true}} {
		ds, err := s.diffTrees(part.a, part.b, "")
		if err != nil {
			return sum, "", err
		}
		for _, d := range ds {
			if part.memory || isMemoryFile(d.path) {
				add, rem, ok := s.lines(d)
				if !ok && !skipped(d.old) && !skipped(d.new) { // an unreadable one is noted as such
					notes = append(notes, "memory file "+d.path+" is not text")
				}
				sum.MemoryAdded += add
				sum.MemoryRemoved += rem
				continue
			}
			switch {
			case d.old == nil:
				sum.FilesAdded++
			case d.new == nil:
				sum.FilesRemoved++
			default:
				sum.FilesModified++
			}
		}
	}
	return sum, strings.Join(notes, "; "), nil
}

// skipped reports whether e is recorded as not read.
func skipped(e *entry) bool { return e != nil && e.Type == typeSkipped }

// lines counts the lines d adds and removes; ok is false when a side is
// not text whose content is kept (then a change counts as one line).
func (s *Service) lines(d delta) (added, removed int, ok bool) {
	a, okA := s.content(d.old)
	b, okB := s.content(d.new)
	if !okA || !okB {
		return 1, 0, false
	}
	added, removed, _ = lineDiff(a, b, 0)
	return added, removed, true
}

// content returns an entry's kept content (nil for none); ok is false
// when it is not a kept text file.
func (s *Service) content(e *entry) ([]byte, bool) {
	if e == nil {
		return nil, true
	}
	if e.Type != typeFile {
		return nil, false
	}
	data, err := s.o.get(e.Hash)
	if err != nil || !isText(data) {
		return nil, false
	}
	return data, true
}

// displayPath is a path as a person reads it: a path of the Claude home
// under .claude/.
func displayPath(rel string, memory bool) string {
	if memory {
		return MemoryPrefix + rel
	}
	return rel
}

// Line is the summary line of a change, as `bridged why` and the
// dashboard show it: "files changed: +2 −1 ~1, memory changed: 3 lines".
func Line(sm store.Summary) string {
	if sm.Empty() {
		return "no files or memory changed"
	}
	var parts []string
	if n := sm.FilesAdded + sm.FilesRemoved + sm.FilesModified; n > 0 {
		p := fmt.Sprintf("files changed: +%d −%d", sm.FilesAdded, sm.FilesRemoved)
		if sm.FilesModified > 0 {
			p += fmt.Sprintf(" ~%d", sm.FilesModified)
		}
		parts = append(parts, p)
	}
	if n := sm.MemoryAdded + sm.MemoryRemoved; n > 0 {
		unit := "lines"
		if n == 1 {
			unit = "line"
		}
		parts = append(parts, fmt.Sprintf("memory changed: %d %s", n, unit))
	}
	return strings.Join(parts, ", ")
}
