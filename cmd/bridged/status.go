package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bridged-app/bridged/internal/channel/whatsapp"
	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/router"
	"github.com/bridged-app/bridged/internal/termsafe"
)

func (a *app) cmdStatus(ctx context.Context, args []string) error {
	fs := a.newFlagSet("status", "status [--json] [flags]")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	_, cfg, err := a.parseClientConfig(fs, args, 0, 0)
	if err != nil {
		return err
	}
	c := control.NewClient(cfg.Socket())
	running, err := daemonRunning(ctx, c, cfg.Socket())
	if err != nil {
		return err
	}
	if !running && !exists(cfg.StoreDB()) {
		fmt.Fprintf(a.stdout, "bridged is not running, and %s has no database yet.\n", cfg.Home)
		return nil
	}
	b, _, closeFn, err := a.openBackend(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer closeFn()
	st, err := b.Status(ctx)
	if err != nil {
		return err
	}
	if running {
		if dc, ok, err := askDaemon(ctx, cfg); err == nil && ok {
			cfg = withDaemonValues(cfg, dc.Values)
		}
	}
	if st.Credential == nil {
		// Stopped (or a daemon that does not report it): what the files
		// configure.
		c := filesCredential(cfg)
		st.Credential = &c
	}
	if *asJSON {
		return writeJSON(a.stdout, st)
	}
	printStatus(a.stdout, st, cfg)
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// printStatus writes st for a person.
func printStatus(w io.Writer, st control.Status, cfg *config.Config) {
	loc := cfg.Timezone
	clock := func(t time.Time) string {
		if t.IsZero() {
			return "unknown"
		}
		t = t.In(loc)
		if y, m, d := t.Date(); time.Now().In(loc).Format("2006-01-02") == fmt.Sprintf("%04d-%02d-%02d", y, m, d) {
			return t.Format("15:04:05")
		}
		return t.Format("2006-01-02 15:04")
	}
	if st.Running && st.Daemon != nil {
		fmt.Fprintf(w, "bridged is running (pid %d, version %s, since %s, instance %s)\n",
			st.Daemon.PID, or(st.Daemon.Version, "unknown"), clock(st.Daemon.Started), or(st.Daemon.Instance, "unknown"))
	} else {
		fmt.Fprintln(w, "bridged is not running; showing what the store knows.")
	}
	if st.Credential != nil {
		fmt.Fprintln(w, credentialLine(*st.Credential, cfg.AnthropicURL, cfg.ContainerNetwork))
	} else {
		fmt.Fprintln(w, apiLine(cfg))
	}
	fmt.Fprintln(w, "\nChannels:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if st.Running {
		for _, c := range st.Channels {
			detail := termsafe.Line(c.Detail)
			if !c.Polled.IsZero() {
				detail = strings.TrimSpace("last poll " + clock(c.Polled) + "  " + detail)
			}
			fmt.Fprintf(tw, "  %s\t%s%s\tsince %s\t%s\n", c.Name, c.State, healthNote(c.State, c.Health, c.Conditions), clock(c.Since), detail)
		}
	} else {
		wa := "not paired: run `bridged login` to pair"
		if paired, err := whatsapp.StorePaired(context.Background(), cfg.WhatsAppDB()); err != nil {
			wa = err.Error()
		} else if paired {
			wa = "paired (unless WhatsApp logged it out since)"
		}
		fmt.Fprintf(tw, "  whatsapp\t%s\n", termsafe.Line(wa))
	}
	tw.Flush()
	printConditions(w, st.Channels, clock)
	if st.Running {
		fmt.Fprintf(w, "\nContainers: %d running (queue: %d active, %d waiting)\n", len(st.Containers), st.Queue.Active, st.Queue.Waiting)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, c := range st.Containers {
			state := "working"
			switch {
			case c.Closing:
				state = "closing"
			case c.Idle:
				state = "idle"
			}
			kind := c.Kind
			if c.TaskID != "" {
				kind += " " + c.TaskID
			}
			fmt.Fprintf(tw, "  %s\t%s\tsince %s\t%s\n", c.Group, kind, clock(c.Since), state)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nGroups: %d   Tasks: %d active, %d paused   Outbox: %d pending, %d failed",
		st.Groups, st.Tasks.Active, st.Tasks.Paused, st.Outbox.Pending, st.Outbox.Failed)
	if st.MediaPending > 0 {
		fmt.Fprintf(w, "   Media: %d downloading", st.MediaPending)
	}
	fmt.Fprintln(w)
	if len(st.Failures) > 0 {
		fmt.Fprintln(w, "\nRecent failures (24 h):")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, f := range st.Failures {
			width := 80
			if f.Kind == router.KindBoundary {
				width = 300 // the incident names the path, what was there and where it went
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", clock(f.Time), f.Kind, f.Where, oneLine(f.Error, width))
		}
		tw.Flush()
	} else {
		fmt.Fprintln(w, "\nNo failures in the last 24 h.")
	}
	fmt.Fprintf(w, "\nCost today: $%.4f (%s), metered by the credential proxy\n", st.CostToday, st.Timezone)
	if costDrifts(st.CostToday, st.ReportedCostToday) {
		fmt.Fprintf(w, "The agents' CLI reported $%.4f for today's turns: it differs from the meter, whose figure is what budgets count (calls made outside the CLI, or a forged figure)\n", st.ReportedCostToday)
	}
	if len(st.BudgetPaused) > 0 {
		fmt.Fprintf(w, "Paused by their daily budget until midnight: %s (lift with `bridged groups set FOLDER --budget-daily USD`, 0: no budget)\n", strings.Join(st.BudgetPaused, ", "))
	}
	fmt.Fprintf(w, "Database: %s (%s), %s\n", humanBytes(st.DatabaseBytes), cfg.StoreDB(), retentionLine(cfg.Retention))
	if len(st.APIUsage) > 0 {
		fmt.Fprintln(w, "\nClaude API through the proxy since the daemon started (live; cost priced by the meter):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, u := range st.APIUsage {
			fmt.Fprintf(tw, "  %s\t%d requests\t%d in\t%d out\t%d cache read\t~$%.4f\tlast %s\n",
				u.Group, u.Requests, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CostUSD, clock(u.Last))
		}
		tw.Flush()
	}
}

// apiLine says how the agents reach Claude: through the daemon's credential
// proxy, with which credential, or which variable to set.
func apiLine(cfg *config.Config) string {
	for _, k := range []string{config.EnvAPIKey, config.EnvOAuthToken} {
		if cfg.Secrets[k] != "" {
			return fmt.Sprintf("Claude API: %s through the daemon's credential proxy (%s is set; it never enters a container; network %s)",
				cfg.AnthropicURL, k, cfg.ContainerNetwork)
		}
	}
	return "Claude API: NO CREDENTIAL: " + credproxy.NoCredentialMessage + " (until then the agents' API requests are answered 401)"
}

// humanBytes is n in B, KB, MB or GB (powers of 1024).
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, suffix := float64(n)/unit, "KB"
	for _, s := range []string{"MB", "GB", "TB"} {
		if f < unit {
			break
		}
		f, suffix = f/unit, s
	}
	return fmt.Sprintf("%.1f %s", f, suffix)
}

// retentionLine says what BRIDGED_RETENTION keeps.
func retentionLine(d time.Duration) string {
	if d == 0 {
		return "nothing pruned (BRIDGED_RETENTION=0)"
	}
	return "answered messages, sent outbox rows, task runs and raw usage pruned after " + config.FormatRetention(d)
}

// costDrifts reports whether the CLI's reported cost differs from the
// meter's by more than a cent and 10 %: worth showing, as a cross-check.
func costDrifts(metered, reported float64) bool {
	d := math.Abs(metered - reported)
	return d > 0.01 && d > 0.1*math.Max(math.Abs(metered), math.Abs(reported))
}
