package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bridged-app/bridged/internal/store"
)

// maxToldLines bounds the lines of a held change told in the chat.
const maxToldLines = 20

// hold puts the memory c changed back as it was before c, at once, as a
// change of its own (kind held, undoing c's memory part): the owner applies
// it with an undo of the hold. Config.Tell tells the owner, with the lines.
// g.mu held; c has ended.
func (s *Service) hold(ctx context.Context, folder store.Folder, g *groupState, c store.Change) error {
	ds, err := s.deltas(roots{c.BeforeFiles, c.BeforeMemory}, roots{c.AfterFiles, c.AfterMemory})
	if err != nil {
		return err
	}
	var plan []op
	var lines []string
	var paths []string
	for _, d := range ds {
		if !d.memory && !isMemoryFile(d.path) {
			continue
		}
		if d.old != nil && d.old.Type != typeFile && d.old.Type != typeLink {
			continue // its content before was not kept
		}
		plan = append(plan, planOp(d))
		paths = append(paths, d.display)
		fd := s.fileDiff(d.delta, d.memory, d.display)
		for _, l := range fd.Lines {
			lines = append(lines, d.display+": "+l)
		}
	}
	if len(plan) == 0 {
		return nil
	}
	data, err := json.Marshal(plan)
	if err != nil {
		return err
	}
	b := s.o.batch()
	ph, _, err := b.put(data)
	if err == nil {
		err = b.commit()
	}
	if err != nil {
		b.abort()
		return err
	}
	now := roots{c.AfterFiles, c.AfterMemory}
	hid, err := s.db.Changes.Begin(ctx, store.Change{Folder: folder, Chat: c.Chat, Kind: store.ChangeHeld, Undoes: c.ID, Plan: ph,
		Source: c.Source, StartedAt: s.cfg.Now(), BeforeFiles: now.files, BeforeMemory: now.memory,
		Note: fmt.Sprintf("memory change of turn %d held for the owner: input from: %s", c.ID, c.Source)})
	if err != nil {
		return err
	}
	if err := s.apply(folder, plan); err != nil {
		return err
	}
	g.open, g.openRoots, g.openKind = hid, now, store.ChangeHeld
	if err := s.endOpen(ctx, folder, g, ""); err != nil {
		return err
	}
	s.log.Info().Str("group", string(folder)).Int64("turn", int64(c.ID)).Int64("held", int64(hid)).Str("source", c.Source).
		Msg("memory change from someone other than the owner held for the owner")
	if s.cfg.Tell != nil {
		if len(lines) > maxToldLines {
			lines = append(lines[:maxToldLines], fmt.Sprintf("… %d more lines: bridged diff %s %d", len(lines)-maxToldLines, folder, c.ID))
		}
		s.cfg.Tell(ctx, fmt.Sprintf("Memory change of %s held: turn %d, whose input came from %s, changed %s. It is not written until you apply it: "+
			"bridged undo %s %d, or reply /undo %s %d.\n%s",
			folder, c.ID, c.Source, strings.Join(paths, ", "), folder, hid, folder, hid, strings.Join(lines, "\n")))
	}
	return nil
}
