package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/termsafe"
)

func (a *app) cmdTasks(ctx context.Context, args []string) error {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "Usage: bridged tasks list|add GROUP PROMPT|pause ID|resume ID|cancel ID|runs ID [flags]")
		fmt.Fprintln(w, "\n  list    the scheduled tasks")
		fmt.Fprintln(w, "  add     schedule a prompt for a group: --cron EXPR, --every DURATION or --at TIME")
		fmt.Fprintln(w, "  pause   stop a task from running until resumed")
		fmt.Fprintln(w, "  resume  let a paused task run again")
		fmt.Fprintln(w, "  cancel  delete a task (its run log stays)")
		fmt.Fprintln(w, "  runs    a task's latest runs")
		fmt.Fprintln(w, "\n`bridged tasks <subcommand> --help` lists its flags.")
	}
	if len(args) == 0 {
		usage(a.stderr)
		return errUsage
	}
	if isHelp(args[0]) {
		usage(a.stdout)
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "list", "ls":
		return a.tasksList(ctx, args)
	case "add":
		return a.tasksAdd(ctx, args)
	case "pause", "resume", "cancel", "runs":
		return a.taskCmd(ctx, sub, args)
	}
	fmt.Fprintf(a.stderr, "bridged tasks: %s\n", unknownWord("subcommand", sub, []string{"list", "add", "pause", "resume", "cancel", "runs"}))
	return errUsage
}

// fmtTime is t in loc to the minute, "never" when there is none.
func fmtTime(t *time.Time, loc *time.Location) string {
	if t == nil || t.IsZero() {
		return "never"
	}
	return t.In(loc).Format("2006-01-02 15:04")
}

func (a *app) tasksList(ctx context.Context, args []string) error {
	fs := a.newFlagSet("tasks list", "tasks list [--json] [flags]")
	asJSON := fs.Bool("json", false, "print the list as JSON")
	_, cfg, err := a.parseClientConfig(fs, args, 0, 0)
	if err != nil {
		return err
	}
	b, _, closeFn, err := a.openBackend(ctx, cfg, false)
	if errors.Is(err, errNoStore) {
		if *asJSON {
			return writeJSON(a.stdout, tasksJSON{Tasks: []control.Task{}})
		}
		fmt.Fprintln(a.stdout, strings.TrimPrefix(err.Error(), errNoStore.Error()+": "))
		return nil
	}
	if err != nil {
		return err
	}
	defer closeFn()
	ts, err := b.Tasks(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(a.stdout, tasksJSON{Tasks: nonNil(ts)})
	}
	if len(ts) == 0 {
		fmt.Fprintln(a.stdout, "No scheduled tasks. Agents create them with their schedule_task tool; you with `bridged tasks add`.")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tGROUP\tSTATUS\tSCHEDULE\tNEXT RUN\tLAST RUN\tPROMPT")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%s\t%s\n", t.ID, t.Folder, taskStatus(t), t.Kind, termsafe.Line(t.Value),
			fmtTime(t.NextRun, cfg.Timezone), fmtTime(t.LastRun, cfg.Timezone), oneLine(t.Prompt, 50))
	}
	return tw.Flush()
}

// taskStatus is a task's status as tasks list shows it: a task that paused
// itself after its failures says so, and a failing one how often it failed.
func taskStatus(t control.Task) string {
	switch {
	case t.PausedByFailures && t.Status == "paused":
		return fmt.Sprintf("paused (failed %d× in a row)", t.Failures)
	case t.Failures > 0 && t.Status == "active":
		return fmt.Sprintf("active (failed %d× in a row)", t.Failures)
	}
	return t.Status
}

// tasksAdd schedules a task of the owner's: the schedule is checked by the
// task rules, the group found as `chat` finds it, and the daemon, when it
// runs, wakes its scheduler.
func (a *app) tasksAdd(ctx context.Context, args []string) error {
	fs := a.newFlagSet("tasks add", "tasks add --cron EXPR|--every DURATION|--at TIME [--context isolated|group] [flags] GROUP PROMPT...")
	cron := fs.String("cron", "", "run on a cron `EXPR`ession, in the configured timezone (\"0 9 * * 1\": Mondays at 9:00)")
	every := fs.String("every", "", "run every `DURATION` (a Go duration: 30m, 2h, 24h)")
	at := fs.String("at", "", "run once at `TIME`, local (\"2026-12-24 18:00\") or RFC 3339")
	contextMode := fs.String("context", "isolated", "the runs' context `MODE`: isolated (a fresh session each run) or group (the group's conversation)")
	pos, cfg, err := a.parseClientConfig(fs, args, 2, -1)
	if err != nil {
		return err
	}
	var kinds []string
	req := control.TaskAdd{Prompt: strings.Join(pos[1:], " "), ContextMode: *contextMode}
	for _, k := range []struct {
		v    string
		kind schedule.Kind
	}{{*cron, schedule.Cron}, {*every, schedule.Interval}, {*at, schedule.Once}} {
		if k.v != "" {
			kinds = append(kinds, string(k.kind))
			req.Kind, req.Value = string(k.kind), k.v
		}
	}
	if len(kinds) != 1 {
		fmt.Fprintln(a.stderr, "bridged tasks add: give one schedule: --cron EXPR, --every DURATION or --at TIME")
		return errUsage
	}
	b, _, closeFn, err := a.openBackend(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer closeFn()
	g, err := findGroup(ctx, b, pos[:1])
	if err != nil {
		return err
	}
	req.Folder = g.Folder
	t, err := b.AddTask(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Scheduled task %s for group %s (%s %s, %s context); next run %s.\n",
		t.ID, t.Folder, t.Kind, termsafe.Line(t.Value), t.ContextMode, fmtTime(t.NextRun, cfg.Timezone))
	return nil
}

func (a *app) taskCmd(ctx context.Context, sub string, args []string) error {
	fs := a.newFlagSet("tasks "+sub, "tasks "+sub+" [flags] ID")
	limit, asJSON := 20, false
	if sub == "runs" {
		fs.IntVar(&limit, "limit", 20, "most runs to show (0: all)")
		fs.BoolVar(&asJSON, "json", false, "print the runs as JSON")
	}
	pos, cfg, err := a.parseClientConfig(fs, args, 1, 1)
	if err != nil {
		return err
	}
	b, _, closeFn, err := a.openBackend(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer closeFn()
	id := pos[0]
	var t control.Task
	switch sub {
	case "pause":
		t, err = b.PauseTask(ctx, id)
	case "resume":
		t, err = b.ResumeTask(ctx, id)
	case "cancel":
		err = b.CancelTask(ctx, id)
	case "runs":
		return a.printRuns(ctx, b, id, limit, cfg.Timezone, asJSON)
	}
	if errors.Is(err, control.ErrNotFound) {
		return fmt.Errorf("no task %s", id)
	}
	if err != nil {
		return err
	}
	switch sub {
	case "cancel":
		fmt.Fprintf(a.stdout, "Cancelled task %s; its runs stay (`bridged tasks runs %s`) until the retention prunes them.\n", id, id)
	case "pause":
		fmt.Fprintf(a.stdout, "Paused task %s.\n", id)
	case "resume":
		fmt.Fprintf(a.stdout, "Resumed task %s; next run %s.\n", id, fmtTime(t.NextRun, cfg.Timezone))
	}
	return nil
}

func (a *app) printRuns(ctx context.Context, b backend, id string, limit int, loc *time.Location, asJSON bool) error {
	runs, err := b.TaskRuns(ctx, id, limit)
	if errors.Is(err, control.ErrNotFound) {
		return fmt.Errorf("no task %s", id)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(a.stdout, runsJSON{Task: id, Runs: nonNil(runs)})
	}
	if len(runs) == 0 {
		fmt.Fprintf(a.stdout, "Task %s has not run yet.\n", id)
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED\tDURATION\tSTATUS\tCOST\tRESULT")
	for _, r := range runs {
		out := r.Result
		if r.Error != "" {
			out = r.Error
		}
		started := r.StartedAt
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", fmtTime(&started, loc), r.Duration, r.Status, rules.FormatUSD(r.CostUSD), oneLine(out, 60))
	}
	return tw.Flush()
}
