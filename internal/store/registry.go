package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// registry keeps the registered groups in memory: the message loop looks a
// group up for every inbound message, a run for every start, and both
// change rarely. It is read-mostly: a read takes the current snapshot, and
// a committed transaction that registered, changed or removed a group
// (GroupTx.Add, GroupTx.Update, GroupTx.Remove, through any path: the
// control API, an agent's request, the CLI on a stopped daemon) drops it,
// so the next read loads the table again. A load that raced a change is
// used once and not kept (gen tells), so a stale snapshot never outlives
// the change that made it stale.
type registry struct {
	mu   sync.Mutex
	gen  uint64 // counts invalidations
	snap *groupSnap
	// lookups counts Groups.ByChat and Groups.ByFolder calls.
	lookups atomic.Uint64
}

// groupSnap is one read of registered_groups.
type groupSnap struct {
	list     []Group // oldest first, as Groups.List returns them
	byChat   map[ChatID]int
	byFolder map[Folder]int
	main     int // index of the main group; -1: none
}

func newGroupSnap(list []Group) *groupSnap {
	s := &groupSnap{list: list, byChat: make(map[ChatID]int, len(list)), byFolder: make(map[Folder]int, len(list)), main: -1}
	for i, g := range list {
		s.byChat[g.Chat] = i
		s.byFolder[g.Folder] = i
		if g.IsMain {
			s.main = i
		}
	}
	return s
}

// invalidate drops the snapshot; call it after a transaction that changed
// a group committed.
func (r *registry) invalidate() {
	r.mu.Lock()
	r.gen++
	r.snap = nil
	r.mu.Unlock()
}

// Version counts the committed changes of registered groups since
// the database was opened: a group looked up under one version is still
// the registered one while the version is the same.
func (q *GroupQuery) Version() uint64 {
	r := &q.db.registry
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// Lookups counts the lookups of one group (Groups.ByChat,
// Groups.ByFolder) since the database was opened: the message path makes
// one per inbound message, which tests hold it to.
func (q *GroupQuery) Lookups() uint64 { return q.db.registry.lookups.Load() }

// groups returns the current snapshot, loading it when there is none. A
// done ctx fails it as it would fail a query: callers see the same errors
// whether the snapshot is loaded or not.
func (db *DB) groups(ctx context.Context) (*groupSnap, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &db.registry
	r.mu.Lock()
	s, gen := r.snap, r.gen
	r.mu.Unlock()
	if s != nil {
		return s, nil
	}
	rows, err := db.read.QueryContext(ctx, `SELECT `+groupColumns+` FROM registered_groups ORDER BY created_at, folder`)
	if err != nil {
		return nil, err
	}
	list, err := collect(rows, scanGroup)
	if err != nil {
		return nil, err
	}
	s = newGroupSnap(list)
	r.mu.Lock()
	if r.gen == gen {
		r.snap = s
	}
	r.mu.Unlock()
	return s, nil
}

// clone returns a copy of g that shares nothing with the snapshot.
func (g Group) clone() Group {
	g.ContainerConfig.ExtraMounts = slices.Clone(g.ContainerConfig.ExtraMounts)
	g.Allow = slices.Clone(g.Allow)
	return g
}

// ByChat returns the group registered for chat, or ErrNotFound. It
// reads the in-memory registry (loading it once after a change).
func (q *GroupQuery) ByChat(ctx context.Context, chat ChatID) (Group, error) {
	q.db.registry.lookups.Add(1)
	s, err := q.db.groups(ctx)
	if err != nil {
		return Group{}, fmt.Errorf("get group for chat %s: %w", chat, err)
	}
	i, ok := s.byChat[chat]
	if !ok {
		return Group{}, fmt.Errorf("get group for chat %s: %w", chat, ErrNotFound)
	}
	return s.list[i].clone(), nil
}

// ByFolder returns the group with folder, or ErrNotFound. It reads
// the in-memory registry (loading it once after a change).
func (q *GroupQuery) ByFolder(ctx context.Context, folder Folder) (Group, error) {
	q.db.registry.lookups.Add(1)
	s, err := q.db.groups(ctx)
	if err != nil {
		return Group{}, fmt.Errorf("get group %s: %w", folder, err)
	}
	i, ok := s.byFolder[folder]
	if !ok {
		return Group{}, fmt.Errorf("get group %s: %w", folder, ErrNotFound)
	}
	return s.list[i].clone(), nil
}

// Main returns the main group, or ErrNotFound when none is set. It
// reads the in-memory registry.
func (q *GroupQuery) Main(ctx context.Context) (Group, error) {
	s, err := q.db.groups(ctx)
	if err != nil {
		return Group{}, fmt.Errorf("get main group: %w", err)
	}
	if s.main < 0 {
		return Group{}, fmt.Errorf("get main group: %w", ErrNotFound)
	}
	return s.list[s.main].clone(), nil
}

// List returns every registered group, oldest first, from the
// in-memory registry.
func (q *GroupQuery) List(ctx context.Context) ([]Group, error) {
	s, err := q.db.groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	out := make([]Group, len(s.list))
	for i, g := range s.list {
		out[i] = g.clone()
	}
	return out, nil
}
