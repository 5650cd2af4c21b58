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

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/snapshot"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/termsafe"
)

// errUsage marks a usage error whose message was already printed.
var errUsage = errors.New("usage error")

// errChecksFailed is returned by doctor when a check failed.
var errChecksFailed = errors.New("some checks failed")

func exitCode(err error) int {
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errNotTriggered):
		return exitNotTriggered
	case errors.Is(err, errBudgetPaused):
		return exitBudgetPaused
	}
	return 1
}

// app is the command line with its streams and environment, so tests can run
// it in-process.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// environ lists the environment (KEY=VALUE), for the unknown BRIDGED_
	// variables in it; nil: none.
	environ func() []string
	// root prefixes the system paths install-service writes (tests).
	root string
}

type command struct {
	name    string
	summary string
	run     func(a *app, ctx context.Context, args []string) error
}

func commands() []command {
	return []command{
		{"run", "run the daemon", (*app).cmdRun},
		{"login", "pair WhatsApp (QR code in the terminal, or --phone for a pairing code); `login telegram` checks and stores the bot token", (*app).cmdLogin},
		{"chat", "talk to a group's agent from the terminal (local chats)", (*app).cmdChat},
		{"groups", "list, add, remove or change registered groups", (*app).cmdGroups},
		{"import", "bring a NanoClaw install over: groups, memory, tasks, allow lists, history (a dry run unless --apply)", (*app).cmdImport},
		{"tasks", "list, add, pause, resume or cancel scheduled tasks", (*app).cmdTasks},
		{"approvals", "tool calls waiting for the owner, and every decision; standing rules (rules, forget RULE)", (*app).cmdApprovals},
		{"approve", "let a tool call the agent asked for run (once, or --always)", (*app).cmdApprove},
		{"deny", "refuse a tool call the agent asked for", (*app).cmdDeny},
		{"status", "connection, containers, queue, recent failures, cost today", (*app).cmdStatus},
		{"why", "one message's life: trigger, turn, attempts, cost, replies (why it got no answer)", (*app).cmdWhy},
		{"changes", "the turns that changed a group's files or memory (--since 7d)", (*app).cmdChanges},
		{"diff", "what one turn changed in a group's files and memory, file by file", (*app).cmdDiff},
		{"undo", "put back what one turn changed (itself recorded, so it can be undone)", (*app).cmdUndo},
		{"dashboard", "print a one-time login link to the web dashboard", (*app).cmdDashboard},
		{"doctor", "check Docker, the image, credentials, pairing, allowlist, permissions, clock", (*app).cmdDoctor},
		{"config", "print the effective configuration (secrets masked)", (*app).cmdConfig},
		{"install-service", "write the systemd unit, the env file and the home (--user for a user unit)", (*app).cmdInstallService},
		{"version", "print the version", (*app).cmdVersion},
	}
}

// usage prints the command list to w: stdout when it was asked for,
// stderr after a usage error.
func (a *app) usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: bridged <command> [flags] [args]")
	fmt.Fprintln(w, "Commands:")
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintln(w, "\nEvery command takes --home DIR (env BRIDGED_HOME; default ~/.local/share/bridged)")
	fmt.Fprintln(w, "and --env-file FILE (default ./.env if present); `bridged <command> -h` lists its flags.")
}

func (a *app) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		a.usage(a.stderr)
		return errUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help", "-help":
		if name == "help" && len(args) > 1 {
			// bridged help CMD [SUB]: that command's help.
			return a.run(ctx, append(args[1:], "--help"))
		}
		a.usage(a.stdout)
		return nil
	case "-version", "--version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(a, ctx, args[1:])
		}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	fmt.Fprintf(a.stderr, "bridged: %s\n\n", unknownWord("command", name, names))
	a.usage(a.stderr)
	return errUsage
}

// unknownWord says that word is no known kind ("command", "subcommand"),
// with the nearest of known when one is near: `unknown command "stauts":
// did you mean status?`, else the list of known.
func unknownWord(kind, word string, known []string) string {
	if n := config.Nearest(word, known); n != "" {
		return fmt.Sprintf("unknown %s %q: did you mean %s?", kind, word, n)
	}
	switch {
	case kind == "command":
		return fmt.Sprintf("unknown %s %q", kind, word)
	case len(known) == 1:
		return fmt.Sprintf("unknown %s %q (want %s)", kind, word, known[0])
	}
	return fmt.Sprintf("unknown %s %q (want %s or %s)", kind, word, strings.Join(known[:len(known)-1], ", "), known[len(known)-1])
}

// newFlagSet returns a flag set for a subcommand that prints its usage:
// its own flags, --home and --env-file, one line each; to stdout when
// -h or --help asked for it (parse then returns flag.ErrHelp), to stderr
// after a usage error. Every command accepts the daemon's settings too
// (config.Register), but only `bridged run` lists them.
func (a *app) newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("bridged "+name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Bool("h", false, "print this help")
	fs.Bool("help", false, "print this help")
	fs.Usage = func() {
		w := a.stderr
		if helpAsked(fs) {
			w = a.stdout
		}
		fmt.Fprintf(w, "Usage: bridged %s\n\nFlags:\n", synopsis)
		hidden := 0
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name == "h" || f.Name == "help" {
				return
			}
			if name != "run" && config.IsDaemonSetting(f.Name) {
				hidden++
				return
			}
			arg, usage := flag.UnquoteUsage(f)
			if arg != "" {
				arg = " " + arg
			}
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
				usage += " (default " + f.DefValue + ")"
			}
			dash := "--"
			if len(f.Name) == 1 {
				dash = "-"
			}
			for i, line := range wrap(usage, 78) {
				if i == 0 {
					fmt.Fprintf(tw, "  %s%s%s\t%s\n", dash, f.Name, arg, line)
				} else {
					fmt.Fprintf(tw, "\t%s\n", line)
				}
			}
		})
		tw.Flush()
		if hidden > 0 {
			fmt.Fprintln(w, "\nThe daemon's settings (--image, --idle-timeout, …) are accepted too: `bridged run --help` lists them.")
		}
	}
	return fs
}

// helpAsked reports whether -h or --help was given to fs. newFlagSet
// defines both (unlisted), so that its usage can tell help asked for
// (stdout) from a usage error (stderr).
func helpAsked(fs *flag.FlagSet) bool {
	for _, h := range []string{"h", "help"} {
		if f := fs.Lookup(h); f != nil && f.Value.String() == "true" {
			return true
		}
	}
	return false
}

// wrap breaks s into lines of at most width runes at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len([]rune(line))+1+len([]rune(w)) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// parse parses flags and positional arguments; flags may also follow
// positional arguments ("groups set main --model opus"). It returns the
// positional arguments. want bounds their number (min, max; max < 0: any).
func parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		// After "--" everything is positional.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if helpAsked(fs) {
		fs.Usage()
		return nil, flag.ErrHelp
	}
	if len(pos) < minArgs || (maxArgs >= 0 && len(pos) > maxArgs) {
		fs.Usage()
		return nil, errUsage
	}
	return pos, nil
}

// parseConfig registers the configuration flags on fs, parses args like
// parse and resolves the configuration. It returns the positional arguments.
func (a *app) parseConfig(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, *config.Config, error) {
	cf := config.Register(fs)
	pos, err := parse(fs, args, minArgs, maxArgs)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := cf.Resolve(a.getenv)
	if err != nil {
		return nil, nil, err
	}
	a.noteUnknown(cfg)
	return pos, cfg, nil
}

// noteUnknown adds the environment's unknown BRIDGED_ variables to the env
// file's in cfg.Unknown.
func (a *app) noteUnknown(cfg *config.Config) {
	if a.environ == nil {
		return
	}
	var names []string
	for _, kv := range a.environ() {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	cfg.Unknown = append(cfg.Unknown, config.UnknownVariables(names, "the environment")...)
}

// parseClientConfig is parseConfig for a command that talks to the daemon
// or its database: an invalid value of a daemon-only setting is ignored
// with a warning (see resolveClient).
func (a *app) parseClientConfig(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, *config.Config, error) {
	cf := config.Register(fs)
	pos, err := parse(fs, args, minArgs, maxArgs)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := a.resolveClient(cf)
	return pos, cfg, err
}

// resolveClient resolves cf for a command that talks to the daemon or its
// database; a bad value only the daemon uses is told on stderr, not fatal.
func (a *app) resolveClient(cf *config.Flags) (*config.Config, error) {
	cfg, err := cf.ResolveClient(a.getenv)
	if err != nil {
		return nil, err
	}
	a.noteUnknown(cfg)
	for _, msg := range cfg.Unknown {
		fmt.Fprintf(a.stderr, "bridged: warning: %s\n", msg)
	}
	for _, msg := range cfg.Ignored {
		fmt.Fprintf(a.stderr, "bridged: warning: %s; ignored here (only the daemon uses it; `bridged run` refuses it)\n", msg)
	}
	return cfg, nil
}

// cliLogger is the logger of the short-lived commands: warnings and errors
// only, on stderr.
func (a *app) cliLogger() zerolog.Logger {
	setDurationFormat()
	return zerolog.New(zerolog.ConsoleWriter{Out: a.stderr, TimeFormat: time.TimeOnly, NoColor: true, FormatFieldValue: consoleValue}).
		Level(zerolog.WarnLevel).With().Timestamp().Logger()
}

// backend is what the group, task and status commands need. The control
// Client implements it through the running daemon, control.Admin directly on
// the database when the daemon is stopped.
type backend interface {
	Groups(ctx context.Context) ([]control.Group, error)
	FindGroups(ctx context.Context, name string) ([]control.Group, error)
	AddGroup(ctx context.Context, req control.GroupAdd) (control.Group, error)
	RemoveGroup(ctx context.Context, folder string) error
	UpdateGroup(ctx context.Context, folder string, p control.GroupPatch) (control.Group, error)
	EndSession(ctx context.Context, folder string) (string, error)
	Chats(ctx context.Context) ([]control.Chat, error)
	Tasks(ctx context.Context) ([]control.Task, error)
	AddTask(ctx context.Context, req control.TaskAdd) (control.Task, error)
	PauseTask(ctx context.Context, id string) (control.Task, error)
	ResumeTask(ctx context.Context, id string) (control.Task, error)
	CancelTask(ctx context.Context, id string) error
	TaskRuns(ctx context.Context, id string, limit int) ([]control.TaskRun, error)
	Status(ctx context.Context) (control.Status, error)
}

var (
	_ backend = (*control.Client)(nil)
	_ backend = (*control.Admin)(nil)
)

// healthTimeout bounds the check whether the daemon answers.
const healthTimeout = 3 * time.Second

// daemonRunning reports whether a daemon answers on the control socket.
// A socket that accepts but does not answer is an error: writing to the
// database behind a hung daemon's back would confuse it.
func daemonRunning(ctx context.Context, c *control.Client, socket string) (bool, error) {
	hctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	err := c.Health(hctx)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, control.ErrNotRunning):
		return false, nil
	}
	return false, fmt.Errorf("the daemon's control socket %s does not answer (%w); is bridged hung?", socket, err)
}

// errNoStore is openBackend's error when neither a daemon nor a database is
// there and the command must not create one.
var errNoStore = errors.New("no database")

// noStoreError says that home holds no daemon and no database.
func noStoreError(cfg *config.Config) error {
	return fmt.Errorf("%w: bridged is not running and %s has no database yet: start it with `bridged run` (or `make run`), or give --home", errNoStore, cfg.Home)
}

// openBackend returns the daemon's API when it runs, else the database
// opened directly. close releases what was opened. Only create lets it
// create a database where there is none: a command that only reads (or
// changes what must already exist) gets errNoStore instead, and leaves no
// state behind.
func (a *app) openBackend(ctx context.Context, cfg *config.Config, create bool) (b backend, running bool, closeFn func(), err error) {
	c := control.NewClient(cfg.Socket())
	running, err = daemonRunning(ctx, c, cfg.Socket())
	if err != nil {
		return nil, false, nil, err
	}
	if running {
		return c, true, func() {}, nil
	}
	if !create && !exists(cfg.StoreDB()) {
		return nil, false, nil, noStoreError(cfg)
	}
	db, err := store.Open(ctx, cfg.StoreDB(), a.cliLogger())
	if err != nil {
		return nil, false, nil, err
	}
	adm := &control.Admin{DB: db, AssistantName: cfg.AssistantName, Timezone: cfg.Timezone, CheckMounts: allowlistChecker(cfg)}
	release := func() { db.Close() }
	if hm, err := home.New(cfg.Home, a.cliLogger()); err == nil {
		snaps := snapshot.New(snapshot.Config{Dir: hm.Layout().SnapshotsDir()}, db, hm, a.cliLogger())
		adm.Snapshots = snaps
		release = func() { snaps.Close(); db.Close() }
	}
	return adm, false, release, nil
}

// oneLine shortens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return termsafe.Line(s)
}

func nopLogger() zerolog.Logger { return zerolog.Nop() }
