package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/nanoclaw"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/termsafe"
)

func (a *app) cmdImport(ctx context.Context, args []string) error {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "Usage: bridged import nanoclaw [--apply] [--config DIR] [flags] DIR")
		fmt.Fprintln(w, "\n  nanoclaw  bring a NanoClaw v1 install over (a dry run unless --apply)")
	}
	if len(args) == 0 {
		usage(a.stderr)
		return errUsage
	}
	if isHelp(args[0]) {
		usage(a.stdout)
		return flag.ErrHelp
	}
	if args[0] != "nanoclaw" {
		fmt.Fprintf(a.stderr, "bridged import: %s\n", unknownWord("source", args[0], []string{"nanoclaw"}))
		return errUsage
	}
	return a.importNanoClaw(ctx, args[1:])
}

func (a *app) importNanoClaw(ctx context.Context, args []string) error {
	fs := a.newFlagSet("import nanoclaw", "import nanoclaw [--apply] [--config DIR] [flags] DIR")
	apply := fs.Bool("apply", false, "do the import (without it, only list what it would do)")
	configDir := fs.String("config", "", "`DIR` holding NanoClaw's sender-allowlist.json and mount-allowlist.json (default ~/.config/nanoclaw)")
	cf := config.Register(fs)
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	cfg, err := a.resolveClient(cf)
	if err != nil {
		return err
	}
	if *configDir == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("find NanoClaw's configuration: %w; give --config", err)
		}
		*configDir = filepath.Join(h, ".config", "nanoclaw")
	}
	in, err := nanoclaw.Read(ctx, pos[0], *configDir)
	if err != nil {
		return err
	}
	running, err := daemonRunning(ctx, control.NewClient(cfg.Socket()), cfg.Socket())
	if err != nil {
		return err
	}
	if *apply && running {
		return errors.New("bridged is running: stop it, run the import with --apply, then start it again (the import writes the groups' folders and sessions, which a running daemon uses)")
	}
	var db *store.DB
	if *apply {
		if err := (home.Layout{Dir: cfg.Home}).Prepare(); err != nil {
			return err
		}
	}
	if exists(cfg.StoreDB()) || *apply {
		if db, err = store.Open(ctx, cfg.StoreDB(), a.cliLogger()); err != nil {
			return err
		}
		defer db.Close()
	}
	t := nanoclaw.Target{DB: db, Home: home.Layout{Dir: cfg.Home}, Allowlist: cfg.MountAllowlist, Protect: []string{cfg.Home, cfg.EnvFile},
		Assistant: cfg.AssistantName, Loc: cfg.Timezone, Now: time.Now()}
	plan, err := nanoclaw.MakePlan(ctx, in, t)
	if err != nil {
		return err
	}
	out := a.stdout
	if !*apply {
		fmt.Fprintf(out, "Import of NanoClaw %s into %s: a dry run; nothing is written. `--apply` does this:\n", termsafe.Line(in.Dir), cfg.Home)
		printSteps(a, plan.Steps, nil)
	} else {
		h, err := home.New(cfg.Home, a.cliLogger())
		if err != nil {
			return err
		}
		done, err := nanoclaw.Apply(ctx, plan, db, h)
		fmt.Fprintf(out, "Imported NanoClaw %s into %s:\n", termsafe.Line(in.Dir), cfg.Home)
		printSteps(a, nil, done)
		if err != nil {
			return fmt.Errorf("import stopped: %w (what is listed is done; running the import again carries on)", err)
		}
	}
	if len(plan.Have) > 0 {
		fmt.Fprintf(out, "\nAlready in bridged (%d, left as they are):\n", len(plan.Have))
		for _, h := range plan.Have {
			fmt.Fprintln(out, "  = "+termsafe.Line(h))
		}
	}
	if len(plan.Skipped) > 0 {
		fmt.Fprintf(out, "\nNot carried over (%d):\n", len(plan.Skipped))
		for _, s := range plan.Skipped {
			fmt.Fprintf(out, "  - %s: %s\n", termsafe.Line(s.What), termsafe.Line(s.Why))
		}
	}
	fmt.Fprintln(out)
	for _, n := range plan.Notes {
		fmt.Fprintln(out, termsafe.Line(n))
	}
	if !*apply && running {
		fmt.Fprintln(out, "bridged is running: stop it before `--apply`.")
	}
	return nil
}

func printSteps(a *app, steps []nanoclaw.Step, done []string) {
	for _, s := range steps {
		done = append(done, s.Text)
	}
	if len(done) == 0 {
		fmt.Fprintln(a.stdout, "  nothing new to import")
		return
	}
	for _, d := range done {
		fmt.Fprintln(a.stdout, "  + "+termsafe.Line(d))
	}
}
