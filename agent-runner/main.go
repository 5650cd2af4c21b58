// Command agent-runner runs inside a group's container. It reads one run
// input (ipc.RunInput) on stdin, drives the claude CLI over its stream-json
// protocol, feeds it follow-up messages from the IPC input directory, and
// writes only ipc.Event lines on stdout; logs go to stderr.
//
// `agent-runner mcp` is the stdio MCP server ("bridge") that claude starts
// from --mcp-config; it turns tool calls into IPC requests.
//
// Flags (each also read from the environment variable in brackets; flags
// win): --ipc-dir [BRIDGED_AGENT_IPC_DIR] (/workspace/ipc), --workdir
// [BRIDGED_AGENT_WORKDIR] (/workspace/group), --global-dir
// [BRIDGED_AGENT_GLOBAL_DIR] (/workspace/global), --extra-dir
// [BRIDGED_AGENT_EXTRA_DIR] (/workspace/extra), --claude
// [BRIDGED_AGENT_CLAUDE] (claude), --log-level [BRIDGED_AGENT_LOG_LEVEL]
// (info).
//
// The Claude API: when BRIDGED_AGENT_API_SOCKET names the host's
// credential-proxy socket, the runner serves 127.0.0.1:<port> and forwards
// each connection to it; claude gets ANTHROPIC_BASE_URL pointing there and a
// placeholder credential (of the kind BRIDGED_AGENT_API_AUTH names). The
// real credential never enters the container.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bridged-app/bridged/agent-runner/mcpserver"
	"github.com/bridged-app/bridged/agent-runner/runner"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process
	}()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-runner:", err)
		os.Exit(1)
	}
}

// maxInputBytes bounds the run input read from stdin.
const maxInputBytes = 16 << 20

// errUsage is returned for bad flags (already explained on stderr).
var errUsage = errors.New("usage")

type options struct {
	ipcDir, workDir, globalDir, extraDir, claude, logLevel string
	mcpTimeout                                             time.Duration
}

func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (options, error) {
	fs := flag.NewFlagSet("agent-runner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := func(env, fallback string) string {
		if v := getenv(env); v != "" {
			return v
		}
		return fallback
	}
	var o options
	fs.StringVar(&o.ipcDir, "ipc-dir", def("BRIDGED_AGENT_IPC_DIR", "/workspace/ipc"), "the group's IPC directory [BRIDGED_AGENT_IPC_DIR]")
	fs.StringVar(&o.workDir, "workdir", def("BRIDGED_AGENT_WORKDIR", "/workspace/group"), "claude's working directory [BRIDGED_AGENT_WORKDIR]")
	fs.StringVar(&o.globalDir, "global-dir", def("BRIDGED_AGENT_GLOBAL_DIR", "/workspace/global"), "directory of the global CLAUDE.md [BRIDGED_AGENT_GLOBAL_DIR]")
	fs.StringVar(&o.extraDir, "extra-dir", def("BRIDGED_AGENT_EXTRA_DIR", "/workspace/extra"), "each directory in it is added with --add-dir [BRIDGED_AGENT_EXTRA_DIR]")
	fs.StringVar(&o.claude, "claude", def("BRIDGED_AGENT_CLAUDE", "claude"), "the claude executable [BRIDGED_AGENT_CLAUDE]")
	fs.StringVar(&o.logLevel, "log-level", def("BRIDGED_AGENT_LOG_LEVEL", "info"), "debug, info, warn or error [BRIDGED_AGENT_LOG_LEVEL]")
	mcpTimeout := def("BRIDGED_AGENT_MCP_TIMEOUT", "")
	// Hidden: how long MCP tools wait for the host (tests shorten it).
	fs.StringVar(&mcpTimeout, "mcp-timeout", mcpTimeout, "")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: agent-runner [flags] < run-input.json\n       agent-runner mcp")
		fs.VisitAll(func(f *flag.Flag) {
			if f.Usage != "" {
				fmt.Fprintf(fs.Output(), "  --%s (default %q)\n    \t%s\n", f.Name, f.DefValue, f.Usage)
			}
		})
	}
	if err := fs.Parse(args); err != nil {
		return o, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %q\n", fs.Args())
		return o, errUsage
	}
	if mcpTimeout != "" {
		d, err := time.ParseDuration(mcpTimeout)
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "--mcp-timeout / BRIDGED_AGENT_MCP_TIMEOUT=%q: want a positive Go duration\n", mcpTimeout)
			return o, errUsage
		}
		o.mcpTimeout = d
	}
	return o, nil
}

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) > 0 && args[0] == "mcp" {
		cfg, err := mcpserver.ConfigFromEnv(getenv)
		if err != nil {
			return fmt.Errorf("mcp server configuration: %w", err)
		}
		return mcpserver.Run(ctx, cfg, stdin, stdout)
	}

	// Not dumpable: a process of the same user (the agent's commands)
	// cannot open /proc/<runner>/fd/1 and write lines the host would take
	// for the runner's own (an approval_wait announcement above all), nor
	// attach to the runner. claude, exec'd, is dumpable again.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintln(stderr, "agent-runner: cannot make itself non-dumpable:", err)
	}
	// The daemon's mount report, when it asks for one: the first line on
	// stdout, before the input is read and anything the agent controls
	// runs here (docs/decisions.md, record 44).
	if targets := getenv(ipc.MountsEnv); targets != "" {
		if err := ipc.ReportMounts(stdout, targets); err != nil {
			return fmt.Errorf("report the mounts: %w", err)
		}
	}
	fail := func(msg string, retryable bool) error {
		writeEvent(stdout, ipc.Event{Type: ipc.EventError, Message: msg, Retryable: retryable})
		return errors.New(msg)
	}
	opts, err := parseFlags(args, stderr, getenv)
	if err != nil {
		return fail("agent-runner: invalid flags", false)
	}
	level, err := zerolog.ParseLevel(opts.logLevel)
	if err != nil || opts.logLevel == "" {
		level = zerolog.InfoLevel
	}
	log := zerolog.New(stderr).Level(level).With().Timestamp().Str("component", "agent-runner").Logger()

	if os.Geteuid() == 0 && getenv("IS_SANDBOX") != "1" {
		return fail("agent-runner is running as root: claude refuses bypassPermissions as uid 0; "+
			"run the container as a non-root user (or set IS_SANDBOX=1 inside a real sandbox)", false)
	}

	if err := limitNoFile(getenv(ipc.EnvNoFile)); err != nil {
		return fail("agent-runner: "+err.Error(), false)
	}

	data, err := io.ReadAll(io.LimitReader(stdin, maxInputBytes+1))
	if err != nil {
		return fail(fmt.Sprintf("read run input: %v", err), true)
	}
	if len(data) > maxInputBytes {
		return fail(fmt.Sprintf("run input is over %d bytes", maxInputBytes), false)
	}
	in, err := ipc.DecodeRunInput(data)
	if err != nil {
		return fail(fmt.Sprintf("bad run input: %v", err), false)
	}
	log = log.With().Str("group", in.Group).Logger()

	self, err := os.Executable()
	if err != nil {
		return fail(fmt.Sprintf("find own executable: %v", err), false)
	}
	// Paths are resolved now: claude runs in the workdir and the MCP server
	// wherever claude starts it.
	ipcDir, err := filepath.Abs(opts.ipcDir)
	if err != nil {
		return fail(fmt.Sprintf("ipc dir: %v", err), false)
	}
	claude := opts.claude
	if strings.ContainsRune(claude, filepath.Separator) {
		if claude, err = filepath.Abs(claude); err != nil {
			return fail(fmt.Sprintf("claude path: %v", err), false)
		}
	}
	return runner.Run(ctx, runner.Config{
		Input:      in,
		IPCDir:     ipcDir,
		WorkDir:    opts.workDir,
		GlobalDir:  opts.globalDir,
		ExtraDir:   opts.extraDir,
		Claude:     claude,
		Self:       self,
		MCPTimeout: opts.mcpTimeout,
		Environ:    os.Environ(),
		APISocket:  getenv(ipc.EnvAPISocket),
		APIAuth:    getenv(ipc.EnvAPIAuth),
		APIAddr:    getenv(ipc.EnvAPIAddr),
		Events:     stdout,
		Logger:     log,
	})
}

// writeEvent writes one event line directly (before the runner exists).
func writeEvent(w io.Writer, ev ipc.Event) {
	line, err := json.Marshal(ev)
	if err != nil {
		return
	}
	_, _ = w.Write(append(line, '\n'))
}

// limitNoFile lowers the process's open-file limit, soft and hard, to n
// (ipc.EnvNoFile; empty: left as it is). A limit already lower stays: the
// runner may only lower it. Everything the runner starts inherits it.
func limitNoFile(n string) error {
	if n == "" {
		return nil
	}
	v, err := strconv.ParseUint(n, 10, 64)
	if err != nil || v == 0 {
		return fmt.Errorf("%s=%q: want a positive whole number", ipc.EnvNoFile, n)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("read the open-file limit: %w", err)
	}
	lim.Cur = min(lim.Cur, v)
	lim.Max = min(lim.Max, v)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("lower the open-file limit to %d: %w", v, err)
	}
	return nil
}
