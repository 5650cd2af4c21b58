package claudecli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// The test binary doubles as a fake claude: with helperScriptEnv set it
// replays a timeline (the fixtures' *.timeline.jsonl format: {"dir":"in"|
// "out"|"err"|"note","line":"…"}) instead of running tests. "out" lines are
// printed, "in" entries wait for one stdin line, "err" lines go to stderr,
// and notes control the process:
//
//	parent closed stdin -> …   read stdin until EOF
//	child exited rc=N          exit N
//	ignore SIGTERM             ignore SIGTERM from now on
//	hang                       block forever
//	spawn sleeper              start `sleep 300` in the process group, log its pid
//
// Request ids the host chose are mapped onto the recorded ones, so recorded
// control_responses reach the right waiter. Everything read from stdin, the
// argv and the environment are logged to helperLogEnv as JSON lines.
const (
	helperScriptEnv = "CLAUDECLI_HELPER_SCRIPT"
	helperLogEnv    = "CLAUDECLI_HELPER_LOG"
)

func TestMain(m *testing.M) {
	if script := os.Getenv(helperScriptEnv); script != "" {
		os.Exit(runHelper(script, os.Getenv(helperLogEnv)))
	}
	// The tests fail when a goroutine one of them started outlives them.
	goleak.VerifyTestMain(m)
}

type timelineEntry struct {
	Dir  string `json:"dir"`
	Line string `json:"line"`
}

type helperLog struct {
	Kind string   `json:"kind"` // argv, env, stdin, pid
	Args []string `json:"args,omitempty"`
	Line string   `json:"line,omitempty"`
	PID  int      `json:"pid,omitempty"`
}

var requestIDPattern = regexp.MustCompile(`"request_id":"([^"]*)"`)

func runHelper(script, logPath string) int {
	data, err := os.ReadFile(script)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 97
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 97
	}
	defer logf.Close()
	logEntry := func(e helperLog) {
		b, _ := json.Marshal(e)
		logf.Write(append(b, '\n'))
	}
	logEntry(helperLog{Kind: "argv", Args: os.Args[1:]})
	logEntry(helperLog{Kind: "env", Args: os.Environ()})

	in := bufio.NewReader(os.Stdin)
	readIn := func() (string, bool) {
		line, err := in.ReadString('\n')
		if err != nil {
			return "", false
		}
		line = strings.TrimRight(line, "\n")
		logEntry(helperLog{Kind: "stdin", Line: line})
		return line, true
	}
	idMap := map[string]string{} // recorded id → host's id

	for _, raw := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		var e timelineEntry
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			fmt.Fprintln(os.Stderr, "helper: bad script line:", err)
			return 97
		}
		switch e.Dir {
		case "out":
			line := e.Line
			for rec, host := range idMap {
				line = strings.ReplaceAll(line, `"request_id":"`+rec+`"`, `"request_id":"`+host+`"`)
			}
			fmt.Fprintln(os.Stdout, line)
		case "err":
			fmt.Fprintln(os.Stderr, e.Line)
		case "in":
			for {
				got, ok := readIn()
				if !ok {
					return 98 // stdin closed while the script expected input
				}
				gotInit := strings.Contains(got, `"subtype":"initialize"`)
				wantInit := strings.Contains(e.Line, `"subtype":"initialize"`)
				if gotInit && !wantInit {
					continue // a raw recording without initialize: the CLI never answered it
				}
				if strings.Contains(e.Line, `"type":"control_request"`) {
					if rec, host := requestIDPattern.FindStringSubmatch(e.Line), requestIDPattern.FindStringSubmatch(got); rec != nil && host != nil {
						idMap[rec[1]] = host[1]
					}
				}
				break
			}
		case "note":
			switch {
			case strings.HasPrefix(e.Line, "parent closed stdin"):
				for {
					if _, ok := readIn(); !ok {
						break
					}
				}
			case strings.HasPrefix(e.Line, "child exited rc="):
				rc, _ := strconv.Atoi(strings.TrimPrefix(e.Line, "child exited rc="))
				return rc
			case e.Line == "ignore SIGTERM":
				signal.Ignore(syscall.SIGTERM)
			case e.Line == "hang":
				select {}
			case e.Line == "spawn sleeper":
				cmd := exec.Command("sleep", "300")
				if err := cmd.Start(); err != nil {
					fmt.Fprintln(os.Stderr, "helper:", err)
					return 97
				}
				logEntry(helperLog{Kind: "pid", PID: cmd.Process.Pid})
			}
		}
	}
	return 0
}

// The requests below are the driver's own machinery (sendRequest,
// awaitResponse), which bridged uses only for initialize; the tests use them
// to sequence and to play other control requests against the recordings.

// WaitInitialized blocks until the CLI answered initialize, and returns the
// answer's payload. It fails if the CLI refused or exited first.
func (p *Process) WaitInitialized(ctx context.Context) (json.RawMessage, error) {
	select {
	case <-p.initDone:
		return p.initResp, p.initErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Interrupt asks the CLI to abort the turn in flight and waits for its
// answer. The turn then ends with an error_during_execution result.
func (p *Process) Interrupt(ctx context.Context) error {
	_, err := p.Request(ctx, ControlInterrupt, nil)
	return err
}

// Request sends a control request with the given body fields (merged next to
// subtype) and waits for the answer's payload.
func (p *Process) Request(ctx context.Context, subtype ControlSubtype, body map[string]any) (json.RawMessage, error) {
	req := map[string]any{}
	for k, v := range body {
		req[k] = v
	}
	req["subtype"] = subtype
	ch, err := p.sendRequest(subtype, req)
	if err != nil {
		return nil, err
	}
	return p.awaitResponse(ctx, subtype, ch)
}
