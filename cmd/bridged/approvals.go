package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/termsafe"
)

// approvalsClient returns a client of the running daemon: approvals are
// answered by the daemon that waits for them.
func (a *app) approvalsClient(ctx context.Context, cfg *config.Config) (*control.Client, error) {
	c := control.NewClient(cfg.Socket())
	running, err := daemonRunning(ctx, c, cfg.Socket())
	if err != nil {
		return nil, err
	}
	if !running {
		return nil, fmt.Errorf("bridged is not running in %s: approvals are answered by the running daemon (open ones are denied when it starts)", cfg.Home)
	}
	return c, nil
}

func (a *app) cmdApprovals(ctx context.Context, args []string) error {
	sub := "list"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "list", "ls":
		return a.approvalsList(ctx, args)
	case "rules":
		return a.approvalRules(ctx, args)
	case "forget":
		return a.approvalForget(ctx, args)
	}
	if isHelp(sub) {
		fmt.Fprintln(a.stdout, "Usage: bridged approvals [list|rules|forget RULE] [flags]")
		return flag.ErrHelp
	}
	fmt.Fprintf(a.stderr, "bridged approvals: %s\n", unknownWord("subcommand", sub, []string{"list", "rules", "forget"}))
	return errUsage
}

func (a *app) approvalsList(ctx context.Context, args []string) error {
	fs := a.newFlagSet("approvals", "approvals [list] [--open] [--limit N] [--json] [flags]  (also: approvals rules, approvals forget RULE)")
	open := fs.Bool("open", false, "only the requests waiting for an answer")
	limit := fs.Int("limit", 50, "at most this many, newest first (0: all)")
	asJSON := fs.Bool("json", false, "print the list as JSON")
	_, cfg, err := a.parseClientConfig(fs, args, 0, 0)
	if err != nil {
		return err
	}
	c, err := a.approvalsClient(ctx, cfg)
	if err != nil {
		return err
	}
	as, err := c.Approvals(ctx, *open, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(a.stdout, struct {
			Approvals []control.Approval `json:"approvals"`
		}{nonNil(as)})
	}
	if len(as) == 0 {
		fmt.Fprintln(a.stdout, "No approval requests.")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tGROUP\tTOOL\tWHAT\tSTATE\tASKED\tDECIDED BY")
	for _, x := range as {
		state := x.State
		if x.Always {
			state += " (always)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.Line(x.ID), termsafe.Line(x.Folder), termsafe.Line(x.Tool),
			oneLine(x.Subject, 60), termsafe.Line(state), x.AskedAt.In(cfg.Timezone).Format("2006-01-02 15:04:05"), termsafe.Line(or(x.DecidedBy, "nobody yet")))
	}
	return tw.Flush()
}

func (a *app) approvalRules(ctx context.Context, args []string) error {
	fs := a.newFlagSet("approvals rules", "approvals rules [--json] [flags]")
	asJSON := fs.Bool("json", false, "print the rules as JSON")
	_, cfg, err := a.parseClientConfig(fs, args, 0, 0)
	if err != nil {
		return err
	}
	c, err := a.approvalsClient(ctx, cfg)
	if err != nil {
		return err
	}
	rs, err := c.ApprovalRules(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(a.stdout, struct {
			Rules []control.ApprovalRule `json:"rules"`
		}{nonNil(rs)})
	}
	if len(rs) == 0 {
		fmt.Fprintln(a.stdout, "No standing rules. `bridged approve ID --always` adds one.")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tGROUP\tALLOWS\tADDED")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.ID, termsafe.Line(r.Folder), oneLine(r.Rule, 70), r.CreatedAt.In(cfg.Timezone).Format("2006-01-02 15:04"))
	}
	return tw.Flush()
}

func (a *app) approvalForget(ctx context.Context, args []string) error {
	fs := a.newFlagSet("approvals forget", "approvals forget [flags] RULE")
	pos, cfg, err := a.parseClientConfig(fs, args, 1, 1)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil {
		return fmt.Errorf("rule %q is not a number (see `bridged approvals rules`)", pos[0])
	}
	c, err := a.approvalsClient(ctx, cfg)
	if err != nil {
		return err
	}
	if err := c.ForgetApprovalRule(ctx, id); err != nil {
		if errors.Is(err, control.ErrNotFound) {
			return fmt.Errorf("no standing rule %d", id)
		}
		return err
	}
	fmt.Fprintf(a.stdout, "Rule %d removed: its tool calls ask again.\n", id)
	return nil
}

func (a *app) cmdApprove(ctx context.Context, args []string) error {
	return a.decide(ctx, "approve", args)
}

func (a *app) cmdDeny(ctx context.Context, args []string) error {
	return a.decide(ctx, "deny", args)
}

func (a *app) decide(ctx context.Context, verb string, args []string) error {
	usage := verb + " [flags] ID"
	if verb == "approve" {
		usage = "approve [--always] [flags] ID"
	}
	fs := a.newFlagSet(verb, usage)
	var always *bool
	if verb == "approve" {
		always = fs.Bool("always", false, "also allow this group the same command, path or web host from now on without asking")
	}
	pos, cfg, err := a.parseClientConfig(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := a.approvalsClient(ctx, cfg)
	if err != nil {
		return err
	}
	allow := verb == "approve"
	x, err := c.DecideApproval(ctx, pos[0], allow, always != nil && *always)
	if err != nil {
		if errors.Is(err, control.ErrNotFound) {
			return fmt.Errorf("no approval request %q (see `bridged approvals`)", pos[0])
		}
		return err
	}
	fmt.Fprintf(a.stdout, "Approval %s (%s, %s): %s.\n", termsafe.Line(x.ID), termsafe.Line(x.Folder), termsafe.Line(x.Tool), termsafe.Line(x.State))
	return nil
}
