package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/termsafe"
)

// changeTeller is what `bridged changes`, `diff` and `undo` need: the
// daemon's control client, or the store when it is stopped.
type changeTeller interface {
	Changes(ctx context.Context, folder string, since time.Time) ([]control.ChangeInfo, error)
	Diff(ctx context.Context, folder string, id int64) (control.ChangeDiff, error)
	Undo(ctx context.Context, folder string, id int64, req control.UndoRequest) (control.UndoReply, error)
}

var (
	_ changeTeller = (*control.Client)(nil)
	_ changeTeller = (*control.Admin)(nil)
)

func (a *app) changeBackend(ctx context.Context, fs *flag.FlagSet, args []string, n int) ([]string, changeTeller, func(), error) {
	pos, cfg, err := a.parseClientConfig(fs, args, n, n)
	if err != nil {
		return nil, nil, nil, err
	}
	b, _, closeFn, err := a.openBackend(ctx, cfg, false)
	if err != nil {
		return nil, nil, nil, err
	}
	t, ok := b.(changeTeller)
	if !ok {
		closeFn()
		return nil, nil, nil, errors.New("this backend keeps no changes")
	}
	return pos, t, closeFn, nil
}

// parseSince reads --since: a duration back from now (24h, 7d) or an RFC
// 3339 time.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want a duration back from now (24h, 7d) or an RFC 3339 time: %w", v, errUsage)
}

func (a *app) cmdChanges(ctx context.Context, args []string) error {
	fs := a.newFlagSet("changes", "changes GROUP [--since 7d|TIME] [--json] [flags]")
	since := fs.String("since", "", "only turns that began since then: a duration back from now (24h, 7d) or an RFC 3339 time")
	asJSON := fs.Bool("json", false, "print the changes as JSON")
	pos, t, closeFn, err := a.changeBackend(ctx, fs, args, 1)
	if err != nil {
		return err
	}
	defer closeFn()
	from, err := parseSince(*since, time.Now())
	if err != nil {
		return err
	}
	cs, err := t.Changes(ctx, pos[0], from)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(a.stdout, cs)
	}
	if len(cs) == 0 {
		fmt.Fprintln(a.stdout, "no turn changed anything in its files or memory")
		return nil
	}
	for _, c := range cs {
		what := c.Kind
		switch {
		case c.Kind == "held":
			what = fmt.Sprintf("held from %d", c.Undoes)
		case c.Undoes != 0:
			what = fmt.Sprintf("undo of %d", c.Undoes)
		case c.Kind == "outside":
			what = "outside any turn"
		case c.Task != "":
			what = "task " + c.Task
		case c.Upto != 0:
			what = fmt.Sprintf("turn to message %d", c.Upto)
		}
		line := c.Line
		if c.Source != "" {
			line += "; input from: " + c.Source
		}
		if c.Note != "" {
			line += " (" + c.Note + ")"
		}
		fmt.Fprintf(a.stdout, "%6d  %s  %-22s %s\n", c.ID, c.StartedAt.Local().Format("2006-01-02 15:04:05"), termsafe.Line(what), termsafe.Line(line))
	}
	return nil
}

func turnArg(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("turn %q: want a turn number as `bridged changes` lists it: %w", s, errUsage)
	}
	return id, nil
}

func (a *app) cmdDiff(ctx context.Context, args []string) error {
	fs := a.newFlagSet("diff", "diff GROUP TURN [--json] [flags]")
	asJSON := fs.Bool("json", false, "print the change as JSON")
	pos, t, closeFn, err := a.changeBackend(ctx, fs, args, 2)
	if err != nil {
		return err
	}
	defer closeFn()
	id, err := turnArg(pos[1])
	if err != nil {
		return err
	}
	d, err := t.Diff(ctx, pos[0], id)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(a.stdout, d)
	}
	c := d.Change
	fmt.Fprintf(a.stdout, "turn %d of %s (%s), %s: %s\n", c.ID, termsafe.Line(c.Group), c.Kind, c.StartedAt.Local().Format("2006-01-02 15:04:05"), c.Line)
	if c.Source != "" {
		fmt.Fprintf(a.stdout, "input not from the owner alone: %s\n", termsafe.Line(c.Source))
	}
	if c.Note != "" {
		fmt.Fprintf(a.stdout, "note: %s\n", termsafe.Line(c.Note))
	}
	for _, f := range d.Files {
		fmt.Fprintf(a.stdout, "\n%s %s", f.Op, termsafe.Line(f.Path))
		if f.Memory {
			fmt.Fprint(a.stdout, " (memory)")
		}
		fmt.Fprintf(a.stdout, ": %s → %s", f.Before, f.After)
		if f.Added+f.Removed > 0 {
			fmt.Fprintf(a.stdout, ", +%d −%d lines", f.Added, f.Removed)
		}
		if f.Note != "" {
			fmt.Fprintf(a.stdout, " (%s)", termsafe.Line(f.Note))
		}
		fmt.Fprintln(a.stdout)
		printLines(a.stdout, f.Lines)
	}
	return nil
}

func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", termsafe.Line(l))
	}
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func (a *app) cmdUndo(ctx context.Context, args []string) error {
	fs := a.newFlagSet("undo", "undo GROUP TURN [--force|--keep] [--only PATH]... [--json] [flags]")
	force := fs.Bool("force", false, "overwrite files changed again since the turn (what they were is kept: the undo can be undone)")
	keep := fs.Bool("keep", false, "leave files changed again since the turn as they are and undo the rest")
	var only multi
	fs.Var(&only, "only", "undo only this path, as `bridged diff` shows it (repeatable)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, t, closeFn, err := a.changeBackend(ctx, fs, args, 2)
	if err != nil {
		return err
	}
	defer closeFn()
	id, err := turnArg(pos[1])
	if err != nil {
		return err
	}
	if *force && *keep {
		return fmt.Errorf("--force and --keep: choose one: %w", errUsage)
	}
	r, err := t.Undo(ctx, pos[0], id, control.UndoRequest{Force: *force, Keep: *keep, Only: only})
	if *asJSON && (err == nil || r.Error != "") {
		if jerr := writeJSON(a.stdout, r); jerr != nil {
			return jerr
		}
		return err
	}
	for _, c := range r.Conflicts {
		verb := "changed again since the turn"
		switch {
		case c.Overwrite:
			verb += ": overwritten"
		case slices.Contains(r.Kept, c.Path):
			verb += ": kept as it is"
		}
		fmt.Fprintf(a.stdout, "conflict %s: %s (the turn left %s, now %s)\n", termsafe.Line(c.Path), verb, c.TurnLeft, c.Now)
		printLines(a.stdout, c.Lines)
	}
	if err != nil {
		return err
	}
	for _, p := range r.NotRestorable {
		fmt.Fprintf(a.stdout, "not restorable %s: its content before the turn was not kept\n", termsafe.Line(p))
	}
	if r.Change == 0 {
		fmt.Fprintln(a.stdout, "nothing to undo: the files are as they were before the turn")
		return nil
	}
	for _, p := range r.Restored {
		fmt.Fprintf(a.stdout, "restored %s\n", termsafe.Line(p))
	}
	fmt.Fprintf(a.stdout, "recorded as turn %d (bridged undo %s %d takes it back)\n", r.Change, termsafe.Line(pos[0]), r.Change)
	return nil
}
