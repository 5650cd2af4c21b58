package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/termsafe"
)

func (a *app) cmdGroups(ctx context.Context, args []string) error {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "Usage: bridged groups list|add|remove|set|new-session [flags] [args]")
		fmt.Fprintln(w, "\n  list    the registered groups (--available: the WhatsApp and Telegram chats seen)")
		fmt.Fprintln(w, "  add     register a chat as a group")
		fmt.Fprintln(w, "  remove  unregister a group (its folder and history stay)")
		fmt.Fprintln(w, "  set     change a group's settings")
		fmt.Fprintln(w, "  new-session  end a group's Claude session: the next message starts a new one (files and memory stay)")
		fmt.Fprintln(w, "\n`bridged groups <subcommand> --help` lists its flags.")
	}
	if len(args) == 0 {
		usage(a.stderr)
		return errUsage
	}
	if isHelp(args[0]) {
		usage(a.stdout)
		return flag.ErrHelp
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
	case "new-session":
		return a.groupsNewSession(ctx, args[1:])
	}
	fmt.Fprintf(a.stderr, "bridged groups: %s\n", unknownWord("subcommand", args[0], []string{"list", "add", "remove", "set", "new-session"}))
	return errUsage
}

// withBackend parses nothing itself: it resolves cf and runs fn with the
// daemon's API or the database.
func (a *app) withBackend(ctx context.Context, cf *config.Flags, create bool, fn func(b backend, running bool) error) error {
	cfg, err := a.resolveClient(cf)
	if err != nil {
		return err
	}
	b, running, closeFn, err := a.openBackend(ctx, cfg, create)
	if err != nil {
		return err
	}
	defer closeFn()
	return fn(b, running)
}

func (a *app) groupsList(ctx context.Context, args []string) error {
	fs := a.newFlagSet("groups list", "groups list [--available] [--json] [flags]")
	available := fs.Bool("available", false, "list the WhatsApp and Telegram chats bridged has seen (to find a chat id for `groups add`)")
	asJSON := fs.Bool("json", false, "print the list as JSON")
	cf := config.Register(fs)
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	err := a.withBackend(ctx, cf, false, func(b backend, _ bool) error {
		if *available {
			return a.printChats(ctx, b, *asJSON)
		}
		gs, err := b.Groups(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(a.stdout, groupsJSON{Groups: nonNil(gs)})
		}
		if len(gs) == 0 {
			fmt.Fprintln(a.stdout, "No groups registered. Add one with: bridged groups add --name main --main local:main")
			return nil
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FOLDER\tCHAT\tNAME\tTRIGGER\tANSWERS\tTOOLS\tMODEL\tTIMEOUT\tEXTRA MOUNTS\tBUDGET TODAY\tALLOWED\tSEES")
		for _, g := range gs {
			answers := "trigger only"
			switch {
			case g.IsMain:
				answers = "everything (main)"
			case !g.RequiresTrigger:
				answers = "everything"
			}
			sees := "-"
			if g.IsMain {
				sees = termsafe.Line(or(g.Sees, store.SeesNoneWord))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Folder, termsafe.Line(g.Chat), termsafe.Line(g.Name), termsafe.Line(g.Trigger), answers, or(g.Tools, "default"),
				termsafe.Line(or(g.Model, "default")), or(g.Timeout, "default"), termsafe.Line(or(formatMounts(g.ExtraMounts), "none")), budgetToday(g), termsafe.Line(formatAllow(g)), sees)
		}
		return tw.Flush()
	})
	if errors.Is(err, errNoStore) {
		// Nothing to list, and nothing is created to list it.
		switch {
		case *asJSON && *available:
			return writeJSON(a.stdout, chatsJSON{Chats: []control.Chat{}})
		case *asJSON:
			return writeJSON(a.stdout, groupsJSON{Groups: []control.Group{}})
		}
		fmt.Fprintln(a.stdout, strings.TrimPrefix(err.Error(), errNoStore.Error()+": "))
		return nil
	}
	return err
}

func (a *app) printChats(ctx context.Context, b backend, asJSON bool) error {
	cs, err := b.Chats(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		out := chatsJSON{Chats: []control.Chat{}}
		for _, c := range cs {
			if !control.IsLocalChat(c.ID) {
				out.Chats = append(out.Chats, c)
			}
		}
		return writeJSON(a.stdout, out)
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
		last := "never"
		if !c.LastActivity.IsZero() {
			last = c.LastActivity.Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termsafe.Line(c.ID), termsafe.Line(or(c.Name, "unnamed")), kind, last, or(c.Folder, "not registered"))
	}
	if n == 0 {
		fmt.Fprintln(a.stdout, "No WhatsApp chats seen yet. Pair with `bridged login`, start the daemon, and send a message in the chat.")
		return nil
	}
	return tw.Flush()
}

// formatBudget shows a daily budget ("none").
func formatBudget(usd float64) string {
	if usd <= 0 {
		return "none"
	}
	return rules.FormatUSD(usd) + "/day"
}

// budgetToday shows what a group's agent cost today against its budget,
// and whether it is paused.
func budgetToday(g control.Group) string {
	if g.BudgetDailyUSD <= 0 {
		return "no budget"
	}
	s := rules.FormatUSD(g.CostTodayUSD) + " of " + rules.FormatUSD(g.BudgetDailyUSD)
	if g.BudgetPaused {
		s += " (paused)"
	}
	return s
}

// or is s, or word when s is empty: a table says in a word what is not
// set ("default", "none", "never").
func or(s, word string) string {
	if s == "" {
		return word
	}
	return s
}

func (a *app) groupsAdd(ctx context.Context, args []string) error {
	fs := a.newFlagSet("groups add", "groups add --name NAME [--folder F] [--main] [--trigger T] [--no-trigger] [flags] CHAT")
	name := fs.String("name", "", "display name of the group (required)")
	folder := fs.String("folder", "", "folder under groups/ (default: a slug of the name)")
	isMain := fs.Bool("main", false, "make this the main (admin) group; it answers every message")
	trigger := fs.String("trigger", "", "trigger word (default @<assistant name>; an @ is added when missing)")
	noTrigger := fs.Bool("no-trigger", false, "answer every message, not only those starting with the trigger")
	tools := fs.String("tools", "", "tool `PROFILE`: full, ask, read-only or chat (default: full for the main group, ask for others; see README \"Permissions\")")
	cf := config.Register(fs)
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *name == "" {
		fmt.Fprintln(a.stderr, "bridged groups add: --name is required")
		return errUsage
	}
	req := control.GroupAdd{Chat: pos[0], Name: *name, Folder: *folder, Trigger: *trigger, IsMain: *isMain, Tools: *tools}
	if *noTrigger {
		f := false
		req.RequiresTrigger = &f
	}
	return a.withBackend(ctx, cf, true, func(b backend, _ bool) error {
		g, err := b.AddGroup(ctx, req)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "Registered %s as group %q (folder groups/%s, trigger %s, tools %s).\n", g.Chat, g.Name, g.Folder, g.Trigger, g.Tools)
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
	return a.withBackend(ctx, cf, false, func(b backend, _ bool) error {
		if err := b.RemoveGroup(ctx, pos[0]); err != nil {
			if errors.Is(err, control.ErrNotFound) {
				return fmt.Errorf("no group with folder %q", pos[0])
			}
			return err
		}
		fmt.Fprintf(a.stdout, "Removed group %s. Its running agent, if any, is stopped (when idle, else when its turn ends); its folder and history are kept; its tasks are paused when they next come due.\n", pos[0])
		return nil
	})
}

// groupsNewSession ends a group's Claude session (as the owner's /new in
// its chat does): the next message starts a new one.
func (a *app) groupsNewSession(ctx context.Context, args []string) error {
	fs := a.newFlagSet("groups new-session", "groups new-session [flags] FOLDER")
	cf := config.Register(fs)
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	return a.withBackend(ctx, cf, false, func(b backend, _ bool) error {
		applies, err := b.EndSession(ctx, pos[0])
		if err != nil {
			if errors.Is(err, control.ErrNotFound) {
				return fmt.Errorf("no group with folder %q", pos[0])
			}
			return err
		}
		fmt.Fprintf(a.stdout, "New session for %s: its next message starts a fresh conversation; its files and memory stay.\n", pos[0])
		if applies != "" && applies != control.AppliesNext {
			fmt.Fprintf(a.stdout, "%s%s.\n", strings.ToUpper(applies[:1]), applies[1:])
		}
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
	_ flag.Value = (*mountFlags)(nil)
	_ flag.Value = (*allowFlags)(nil)
)

// mountFlags is the repeatable --mount flag.
type mountFlags []store.MountRequest

func (m *mountFlags) String() string {
	parts := make([]string, 0, len(*m))
	for _, r := range *m {
		parts = append(parts, rules.FormatMount(r))
	}
	return strings.Join(parts, ",")
}

func (m *mountFlags) Set(s string) error {
	r, err := rules.ParseMount(s)
	if err != nil {
		return err
	}
	*m = append(*m, r)
	return nil
}

func (a *app) groupsSet(ctx context.Context, args []string) error {
	fs := a.newFlagSet("groups set", "groups set [--name N] [--trigger T] [--requires-trigger=BOOL] [--model M] [--timeout D] [--mount HOST[:CONTAINER][:ro|rw]]... [--clear-mounts] [--budget-daily USD] [--tools PROFILE] [--allow SENDER]... [--others context|drop] [--sees all|none|FOLDER,...] [flags] GROUP")
	var name, trigger, model, timeout, budget, others, tools, sees optString
	var allow allowFlags
	var requires optBool
	var mounts mountFlags
	fs.Var(&name, "name", "display `NAME`")
	fs.Var(&trigger, "trigger", "trigger `WORD`, e.g. @Andy (an @ is added when missing)")
	fs.Var(&requires, "requires-trigger", "only messages starting with the trigger wake the agent (true/false)")
	fs.Var(&model, "model", "Claude `MODEL` for this group (empty: the CLI's default)")
	fs.Var(&timeout, "timeout", "container timeout for this group, a Go `DURATION` (0: the daemon's default)")
	fs.Var(&mounts, "mount", "extra mount `HOST[:CONTAINER][:ro|rw]` at /workspace/extra/CONTAINER, checked against the mount allowlist; repeat for several (replaces the group's extra mounts)")
	clearMounts := fs.Bool("clear-mounts", false, "remove the group's extra mounts")
	fs.Var(&budget, "budget-daily", "most the group's agent may cost a day, in `USD`: at 80 % the main chat is told, at 100 % the agent pauses until midnight (0: no budget)")
	fs.Var(&tools, "tools", "tool `PROFILE`: full, ask, read-only or chat (see README \"Permissions\")")
	fs.Var(&allow, "allow", "who besides you may wake the agent: a phone number, `SENDER`@lid, local:NAME, admins; repeatable; everyone: anyone (default); me: you only")
	fs.Var(&others, "others", "others' messages: context (stored, wake nothing; default) or drop")
	fs.Var(&sees, "sees", "main only: other groups' folders it reads: all, none or `FOLDERS` (a,b)")
	cf := config.Register(fs)
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	p := control.GroupPatch{Name: name.v, Trigger: trigger.v, RequiresTrigger: requires.v, Model: model.v, Timeout: timeout.v, Others: others.v, Tools: tools.v, Sees: sees.v}
	if allow.set {
		list, err := allow.list()
		if err != nil {
			return err
		}
		p.Allow = &list
	}
	if budget.v != nil {
		usd, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(*budget.v), "$"), 64)
		if err != nil || usd < 0 || math.IsInf(usd, 0) || math.IsNaN(usd) {
			return fmt.Errorf("--budget-daily: %q is not an amount of USD of at least 0 (0: no budget)", *budget.v)
		}
		p.BudgetDailyUSD = &usd
	}
	switch {
	case *clearMounts && len(mounts) > 0:
		fmt.Fprintln(a.stderr, "bridged groups set: give --mount or --clear-mounts, not both")
		return errUsage
	case *clearMounts:
		p.ExtraMounts = &[]store.MountRequest{}
	case len(mounts) > 0:
		ms := []store.MountRequest(mounts)
		p.ExtraMounts = &ms
	}
	if p == (control.GroupPatch{}) {
		fmt.Fprintln(a.stderr, "bridged groups set: nothing to change (give --name, --trigger, --requires-trigger, --model, --timeout, --mount, --clear-mounts, --budget-daily, --tools, --allow, --others or --sees)")
		return errUsage
	}
	if p.Timeout != nil {
		if _, err := rules.ParseTimeout(*p.Timeout); err != nil {
			return fmt.Errorf("--timeout: %w", err)
		}
	}
	return a.withBackend(ctx, cf, false, func(b backend, _ bool) error {
		g, err := findGroup(ctx, b, pos)
		if err != nil {
			return err
		}
		g, err = b.UpdateGroup(ctx, g.Folder, p)
		if err != nil {
			if errors.Is(err, control.ErrNotFound) {
				return fmt.Errorf("no group with folder %q", pos[0])
			}
			return err
		}
		fmt.Fprintf(a.stdout, "Updated group %s: name %q, trigger %s, requires trigger %v, tools %s, model %s, timeout %s, extra mounts %s, daily budget %s, who may wake it: %s%s.\n",
			g.Folder, g.Name, g.Trigger, g.RequiresTrigger, g.Tools, or(g.Model, "default"), or(g.Timeout, "default"), or(formatMounts(g.ExtraMounts), "none"), formatBudget(g.BudgetDailyUSD), formatAllow(g), formatSees(g))
		applies := g.Applies
		if applies == "" {
			applies = control.AppliesNext
		}
		fmt.Fprintf(a.stdout, "%s%s.\n", strings.ToUpper(applies[:1]), applies[1:])
		return nil
	})
}

// allowFlags is the repeatable --allow flag; "everyone" clears the list,
// "me" admits the owner only.
type allowFlags struct {
	set     bool
	senders []string
}

func (f *allowFlags) String() string { return strings.Join(f.senders, ",") }

func (f *allowFlags) Set(s string) error {
	f.set = true
	f.senders = append(f.senders, strings.TrimSpace(s))
	return nil
}

// list is the allow list the flags give: empty for everyone.
func (f *allowFlags) list() ([]string, error) {
	out := []string{}
	for _, s := range f.senders {
		if strings.EqualFold(s, "everyone") {
			if len(f.senders) > 1 {
				return nil, fmt.Errorf("--allow everyone: give it alone (it clears the list)")
			}
			return out, nil
		}
		if strings.EqualFold(s, store.AllowOwner) && len(f.senders) > 1 {
			return nil, fmt.Errorf("--allow me: give it alone (only you may wake the agent; you always may, so list the others without it)")
		}
		n, err := store.NormalizeSender(s)
		if err != nil {
			return nil, fmt.Errorf("--allow: %w", err)
		}
		out = append(out, n)
	}
	return out, nil
}

// formatAllow says who may wake a group's agent.
func formatAllow(g control.Group) string {
	if len(g.Allow) == 0 {
		return "everyone"
	}
	s := "you, " + strings.Join(g.Allow, ", ")
	if len(g.Allow) == 1 && g.Allow[0] == store.AllowOwner {
		s = "you only"
	}
	if g.Others == store.OthersDrop {
		s += " (others dropped)"
	}
	return s
}

// formatSees says which other groups' folders the main group's agent sees
// (", sees ..."); nothing for another group.
func formatSees(g control.Group) string {
	if !g.IsMain {
		return ""
	}
	return ", other groups' folders it sees: " + or(g.Sees, store.SeesNoneWord)
}

// formatMounts lists mounts as --mount takes them.
func formatMounts(ms []store.MountRequest) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, rules.FormatMount(m))
	}
	return strings.Join(parts, " ")
}

// allowlistChecker checks extra mounts against the mount allowlist as it is
// configured, for `groups set` while the daemon is stopped: the file is
// read when a mount is set, as the daemon will read it when it starts.
func allowlistChecker(cfg *config.Config) control.MountChecker {
	if cfg.MountAllowlist == "" {
		return nil
	}
	return func(ctx context.Context, ms []store.MountRequest, isMain bool) error {
		al, err := container.LoadAllowlist(cfg.MountAllowlist, cfg.Home, cfg.EnvFile)
		if err != nil {
			return err
		}
		return mountChecker(al.WithMasks(home.Layout{Dir: cfg.Home}))(ctx, ms, isMain)
	}
}

// mountChecker checks extra mounts against al (nil: none allowed) exactly
// as the router will before each run, and refuses a read-write mount al
// would make read-only.
func mountChecker(al *container.Allowlist) control.MountChecker {
	if al == nil {
		return nil
	}
	return func(_ context.Context, ms []store.MountRequest, isMain bool) error {
		return al.Validate(containerMounts(ms), isMain)
	}
}

// containerMounts converts a group's stored mounts for the allowlist.
func containerMounts(ms []store.MountRequest) []container.MountRequest {
	out := make([]container.MountRequest, len(ms))
	for i, m := range ms {
		out[i] = container.MountRequest{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadWrite: m.ReadWrite}
	}
	return out
}
