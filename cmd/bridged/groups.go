package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
)

func (a *app) cmdGroups(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(a.stderr, "Usage: bridged groups list|add|remove|set [flags] [args]")
		return errUsage
	}
	switch args[0] {
	case "list", "ls":
		return a.groupsList(ctx, args[1:])
	case "add":
		return a.groupsAdd(ctx, args[1:])
	case "remove", "rm":
		return a.groupsRemove(ctx, args[1:])
	case "set":
		return a.groupsSet(ctx, args[1:])
	}
	fmt.Fprintf(a.stderr, "bridged groups: unknown subcommand %q (want list, add, remove or set)\n", args[0])
	return errUsage
}

// withBackend parses nothing itself: it resolves cf and runs fn with the
// daemon's API or the database.
func (a *app) withBackend(ctx context.Context, cf *config.Flags, fn func(b backend, running bool) error) error {
	cfg, err := cf.Resolve(a.getenv)
	if err != nil {
		return err
	}
	b, running, closeFn, err := a.openBackend(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeFn()
	return fn(b, running)
}

func (a *app) groupsList(ctx context.Context, args []string) error {
	fs := a.newFlagSet("groups list", "groups list [--available] [flags]")
	available := fs.Bool("available", false, "list the WhatsApp chats bridged has seen (to find a chat id for `groups add`)")
	cf := config.Register(fs)
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	return a.withBackend(ctx, cf, func(b backend, _ bool) error {
		if *available {
			return a.printChats(ctx, b)
		}
		gs, err := b.Groups(ctx)
		if err != nil {
			return err
		}
		if len(gs) == 0 {
			fmt.Fprintln(a.stdout, "No groups registered. Add one with: bridged groups add --name main --main local:main")
			return nil
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FOLDER\tCHAT\tNAME\tTRIGGER\tANSWERS\tMODEL\tTIMEOUT")
		for _, g := range gs {
			answers := "trigger only"
			switch {
			case g.IsMain:
				answers = "everything (main)"
			case !g.RequiresTrigger:
				answers = "everything"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Folder, g.Chat, g.Name, g.Trigger, answers,
				orDash(g.Model), orDash(g.Timeout))
		}
		return tw.Flush()
	})
}

func (a *app) printChats(ctx context.Context, b backend) error {
	cs, err := b.Chats(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	n := 0
	for _, c := range cs {
		if control.IsLocalChat(c.ID) {
			continue
		}
		if n == 0 {
			fmt.Fprintln(tw, "CHAT\tNAME\tKIND\tLAST ACTIVITY\tREGISTERED AS")
		}
		n++
		kind := "direct"
		if c.IsGroup {
			kind = "group"
		}
		last := "-"
		if !c.LastActivity.IsZero() {
			last = c.LastActivity.Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.ID, orDash(c.Name), kind, last, orDash(c.Folder))
	}
	if n == 0 {
		fmt.Fprintln(a.stdout, "No WhatsApp chats seen yet. Pair with `bridged login`, start the daemon, and send a message in the chat.")
		return nil
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) groupsAdd(ctx context.Context, args []string) error {
	fs := a.newFlagSet("groups add", "groups add --name NAME [--folder F] [--main] [--trigger T] [--no-trigger] [flags] CHAT")
	name := fs.String("name", "", "display name of the group (required)")
	folder := fs.String("folder", "", "folder under groups/ (default: a slug of the name)")
	isMain := fs.Bool("main", false, "make this the main (admin) group; it answers every message")
	trigger := fs.String("trigger", "", "trigger word (default @<assistant name>)")
	noTrigger := fs.Bool("no-trigger", false, "answer every message, not only those starting with the trigger")
	cf := config.Register(fs)
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *name == "" {
		fmt.Fprintln(a.stderr, "bridged groups add: --name is required")
		return errUsage
	}
	req := control.GroupAdd{Chat: pos[0], Name: *name, Folder: *folder, Trigger: *trigger, IsMain: *isMain}
	if *noTrigger {
		f := false
		req.RequiresTrigger = &f
	}
	return a.withBackend(ctx, cf, func(b backend, _ bool) error {
		g, err := b.AddGroup(ctx, req)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "Registered %s as group %q (folder groups/%s, trigger %s).\n", g.Chat, g.Name, g.Folder, g.Trigger)
		return nil
	})
}

func (a *app) groupsRemove(ctx context.Context, args []string) error {
	fs := a.newFlagSet("groups remove", "groups remove [flags] FOLDER")
	cf := config.Register(fs)
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	return a.withBackend(ctx, cf, func(b backend, _ bool) error {
		if err := b.RemoveGroup(ctx, pos[0]); err != nil {
			if errors.Is(err, control.ErrNotFound) {
				return fmt.Errorf("no group with folder %q", pos[0])
			}
			return err
		}
		fmt.Fprintf(a.stdout, "Removed group %s. Its folder and history are kept; its tasks are paused when they next come due.\n", pos[0])
		return nil
	})
}

// optString is a string flag that knows whether it was set.
type optString struct{ v *string }

func (o *optString) String() string {
	if o.v == nil {
		return ""
	}
	return *o.v
}

func (o *optString) Set(s string) error { o.v = &s; return nil }

// optBool is a boolean flag that knows whether it was set.
type optBool struct{ v *bool }

func (o *optBool) String() string {
	if o.v == nil {
		return ""
	}
	return strconv.FormatBool(*o.v)
}

func (o *optBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	o.v = &b
	return nil
}

func (o *optBool) IsBoolFlag() bool { return true }

var (
	_ flag.Value = (*optString)(nil)
	_ flag.Value = (*optBool)(nil)
)

func (a *app) groupsSet(ctx context.Context, args []string) error {
	fs := a.newFlagSet("groups set", "groups set [--name N] [--trigger T] [--requires-trigger=BOOL] [--model M] [--timeout D] [flags] FOLDER")
	var name, trigger, model, timeout optString
	var requires optBool
	fs.Var(&name, "name", "display name")
	fs.Var(&trigger, "trigger", "trigger word, e.g. @Andy")
	fs.Var(&requires, "requires-trigger", "only messages starting with the trigger wake the agent (true/false)")
	fs.Var(&model, "model", "Claude model for this group (empty: the CLI's default)")
	fs.Var(&timeout, "timeout", "container timeout for this group, a Go duration (0: the daemon's default)")
	cf := config.Register(fs)
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	p := control.GroupPatch{Name: name.v, Trigger: trigger.v, RequiresTrigger: requires.v, Model: model.v, Timeout: timeout.v}
	if p == (control.GroupPatch{}) {
		fmt.Fprintln(a.stderr, "bridged groups set: nothing to change (give --name, --trigger, --requires-trigger, --model or --timeout)")
		return errUsage
	}
	if p.Timeout != nil && *p.Timeout != "" && *p.Timeout != "0" {
		if _, err := time.ParseDuration(*p.Timeout); err != nil {
			return fmt.Errorf("--timeout %q: want a Go duration such as 45m", *p.Timeout)
		}
	}
	return a.withBackend(ctx, cf, func(b backend, _ bool) error {
		g, err := b.UpdateGroup(ctx, pos[0], p)
		if err != nil {
			if errors.Is(err, control.ErrNotFound) {
				return fmt.Errorf("no group with folder %q", pos[0])
			}
			return err
		}
		fmt.Fprintf(a.stdout, "Updated group %s: name %q, trigger %s, requires trigger %v, model %s, timeout %s.\n",
			g.Folder, g.Name, g.Trigger, g.RequiresTrigger, orDash(g.Model), orDash(g.Timeout))
		return nil
	})
}
