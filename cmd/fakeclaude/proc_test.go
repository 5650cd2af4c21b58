package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bridged-app/bridged/agent-runner/mcpserver"
	"github.com/bridged-app/bridged/internal/testcover"
	"github.com/bridged-app/bridged/internal/testlog"
)

// The test binary doubles as the fake (role "claude") and as the bridge MCP
// server (role "mcp"), so the tests drive real processes without a build step.
const roleEnv = "FAKECLAUDE_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "claude":
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ(), os.Getuid()))
	case "mcp":
		cfg, err := mcpserver.ConfigFromEnv(os.Getenv)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := mcpserver.Run(context.Background(), cfg, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The tests fail when a goroutine one of them started outlives them.
	goleak.VerifyTestMain(m)
}

var streamArgs = []string{"--output-format", "stream-json", "--verbose", "--input-format", "stream-json"}

// proc is a running fake.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan map[string]any
	stderr *testlog.Buffer
	exited chan struct{}
	code   int
}

// baseEnv is a small environment for the fake: HOME, PATH and its role,
// and GORACE: a race-enabled child otherwise sleeps a second at exit.
func baseEnv(home string, extra ...string) []string {
	return append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), roleEnv + "=claude", "GORACE=atexit_sleep_ms=0"}, extra...)
}

func startFake(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append(append([]string{}, streamArgs...), args...)...)
	cmd.Dir = dir
	cmd.Env = append(env, testcover.Env(t)...)
	p := &proc{t: t, cmd: cmd, lines: make(chan map[string]any, 256), stderr: &testlog.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"type": "NOT-JSON", "line": sc.Text()}
			}
			p.lines <- m
		}
		close(p.lines)
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *proc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write stdin: %v", err)
	}
}

func userLine(text string) string {
	b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text},
		"parent_tool_use_id": nil, "session_id": ""})
	return string(b)
}

func (p *proc) sendUser(text string) { p.t.Helper(); p.send(userLine(text)) }

// next returns the next stdout line, or nil once stdout is closed.
func (p *proc) next() map[string]any {
	p.t.Helper()
	select {
	case m, ok := <-p.lines:
		if !ok {
			return nil
		}
		if m["type"] == "NOT-JSON" {
			p.t.Fatalf("fake printed a non-JSON line: %q", m["line"])
		}
		return m
	case <-time.After(15 * time.Second):
		p.t.Fatalf("no stdout line within 15s; stderr: %s", p.stderr.String())
		return nil
	}
}

// until reads lines until one satisfies pred, returning it and the lines before.
func (p *proc) until(what string, pred func(map[string]any) bool) (map[string]any, []map[string]any) {
	p.t.Helper()
	var before []map[string]any
	for {
		m := p.next()
		if m == nil {
			p.t.Fatalf("stdout ended before %s; saw %v; stderr: %s", what, kinds(before), p.stderr.String())
		}
		if pred(m) {
			return m, before
		}
		before = append(before, m)
	}
}

func isType(typ string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["type"] == typ }
}

func (p *proc) result() (map[string]any, []map[string]any) {
	p.t.Helper()
	return p.until("a result", isType("result"))
}

// wait closes stdin and returns the exit code and any remaining lines.
func (p *proc) wait() (int, []map[string]any) {
	p.t.Helper()
	p.stdin.Close()
	var rest []map[string]any
	for m := p.next(); m != nil; m = p.next() {
		rest = append(rest, m)
	}
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		p.t.Fatal("fake did not exit")
	}
	return p.code, rest
}

func kind(m map[string]any) string {
	k, _ := m["type"].(string)
	if st, ok := m["subtype"].(string); ok && (k == "system" || k == "result") {
		k += "/" + st
	}
	return k
}

func kinds(ms []map[string]any) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = kind(m)
	}
	return out
}

func assistantText(m map[string]any) string {
	msg, _ := m["message"].(map[string]any)
	content, _ := msg["content"].([]any)
	var parts []string
	for _, c := range content {
		if b, ok := c.(map[string]any); ok && b["type"] == "text" {
			parts = append(parts, b["text"].(string))
		}
	}
	return strings.Join(parts, "")
}

// readTranscript returns the JSON entries of a session file.
func readTranscript(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read transcript: %v", err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("transcript line %q is not JSON", l)
		}
		out = append(out, m)
	}
	return out
}
