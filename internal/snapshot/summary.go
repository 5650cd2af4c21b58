package snapshot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// The memory summary (BRIDGED_MEMORY_SUMMARY).
const (
	SummaryOff    = "off"
	SummaryWeekly = "weekly"
)

// CheckSummary checks BRIDGED_MEMORY_SUMMARY: off (or empty) or weekly.
func CheckSummary(v string) error {
	switch v {
	case "", SummaryOff, SummaryWeekly:
		return nil
	}
	return errors.New("want off or weekly")
}

// The weekly summary is due each Monday at 09:00 local time.
const (
	summaryDay  = time.Monday
	summaryHour = 9
)

// Bounds of a summary: the lines told of each group, and of the whole.
const (
	maxSummaryLines = 8
	maxSummaryBytes = 3500
	// maxSummaryChanges bounds the changes of one group a summary reads.
	maxSummaryChanges = 100_000
)

// Weekly posts to the main chat, once a week, what each agent's memory
// gained and lost that week (the net change of its CLAUDE.md and its own
// memory, from the recorded changes). The week posted is recorded with the
// post, in one transaction, so a restart never posts one twice; a daemon
// that was down when a summary was due posts it when it starts.
type Weekly struct {
	S    *Service
	Now  func() time.Time
	Loc  *time.Location
	Wake func() // tells the outbox a row was committed
	// Wait waits for d or ctx's end (nil: a timer).
	Wait func(ctx context.Context, d time.Duration) error
}

// Run posts each week's summary when it is due, until ctx ends.
func (w *Weekly) Run(ctx context.Context) error {
	wait := w.Wait
	if wait == nil {
		wait = sleep
	}
	for {
		if _, err := w.Once(ctx); err != nil && ctx.Err() == nil {
			w.S.log.Warn().Err(err).Msg("cannot post the weekly memory summary; trying again in an hour")
			if err := wait(ctx, time.Hour); err != nil {
				return nil
			}
			continue
		}
		now := w.Now()
		if err := wait(ctx, weekEnd(now.Add(7*24*time.Hour), w.Loc).Sub(now)); err != nil {
			return nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// weekEnd is the last time a summary was due at or before now: the latest
// Monday 09:00 in loc.
func weekEnd(now time.Time, loc *time.Location) time.Time {
	now = now.In(loc)
	d := time.Date(now.Year(), now.Month(), now.Day(), summaryHour, 0, 0, 0, loc)
	for d.Weekday() != summaryDay || d.After(now) {
		d = d.AddDate(0, 0, -1)
	}
	return d
}

// Once posts the summary of the week that ended last, unless it was posted
// already; posted reports whether it was (a week in which no memory
// changed is recorded and not posted).
func (w *Weekly) Once(ctx context.Context) (posted bool, err error) {
	end := weekEnd(w.Now(), w.Loc)
	last, err := w.S.db.Changes.Summarized(ctx)
	if err != nil || !last.Before(end) {
		return false, err
	}
	main, err := w.S.db.Groups.Main(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // no main chat to tell: the next week's is tried
	}
	if err != nil {
		return false, fmt.Errorf("the main chat: %w", err)
	}
	text, err := w.S.weekText(ctx, end.AddDate(0, 0, -7), end)
	if err != nil {
		return false, err
	}
	ok, err := w.S.db.Changes.PostSummary(ctx, end, store.OutboxItem{Chat: main.Chat, Text: text, Origin: store.OriginNotice})
	if ok && text != "" {
		w.Wake()
		w.S.log.Info().Time("week_end", end).Msg("weekly memory summary posted")
	}
	return ok && text != "", err
}

// weekText tells what each group's memory gained and lost between from
// and to; empty when nothing changed.
func (s *Service) weekText(ctx context.Context, from, to time.Time) (string, error) {
	groups, err := s.db.Groups.List(ctx)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, g := range groups {
		added, removed, err := s.MemoryChange(ctx, g.Folder, from, to)
		if err != nil {
			return "", err
		}
		if len(added)+len(removed) == 0 {
			continue
		}
		// Each side gets half the lines, or what the other leaves.
		nr := min(len(removed), max(maxSummaryLines/2, maxSummaryLines-len(added)))
		na := min(len(added), maxSummaryLines-nr)
		part := fmt.Sprintf("%s: +%d −%d", g.Folder, len(added), len(removed))
		for _, l := range append(added[:na:na], removed[:nr]...) {
			part += "\n  " + clipLine(l, 160)
		}
		if more := len(added) + len(removed) - na - nr; more > 0 {
			part += fmt.Sprintf("\n  … and %d more (bridged changes %s)", more, g.Folder)
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "", nil
	}
	head := fmt.Sprintf("What your agents' memory gained and lost, %s – %s:", from.Format("Jan 2"), to.Format("Jan 2"))
	text := head
	for i, p := range parts {
		if len(text)+len(p)+2 > maxSummaryBytes {
			text += fmt.Sprintf("\n\n… and %d more groups", len(parts)-i)
			break
		}
		text += "\n\n" + p
	}
	return text, nil
}

func clipLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// MemoryChange returns the lines of folder's memory (its CLAUDE.md and
// the agent's own memory) added and removed by the changes that began in
// [from, to): the net change from the first one's start to the last one's
// end, each line with its path ("+ CLAUDE.md: the dog is Rex").
func (s *Service) MemoryChange(ctx context.Context, folder store.Folder, from, to time.Time) (added, removed []string, err error) {
	s.gc.RLock()
	defer s.gc.RUnlock()
	cs, err := s.db.Changes.List(ctx, folder, from, false, maxSummaryChanges)
	if err != nil {
		return nil, nil, err
	}
	var first, last *store.Change
	for i := range cs { // newest first
		c := &cs[i]
		if c.Open() || !c.StartedAt.Before(to) {
			continue
		}
		if last == nil {
			last = c
		}
		first = c
	}
	if first == nil {
		return nil, nil, nil
	}
	ds, err := s.deltas(roots{first.BeforeFiles, first.BeforeMemory}, roots{last.AfterFiles, last.AfterMemory})
	if err != nil {
		return nil, nil, err
	}
	for _, d := range ds {
		if !d.memory && !isMemoryFile(d.path) {
			continue
		}
		for _, l := range s.fileDiff(d.delta, d.memory, d.display).Lines {
			switch {
			case strings.HasPrefix(l, "+"):
				added = append(added, "+ "+d.display+": "+l[1:])
			case strings.HasPrefix(l, "-"):
				removed = append(removed, "− "+d.display+": "+l[1:])
			}
		}
	}
	return added, removed, nil
}
