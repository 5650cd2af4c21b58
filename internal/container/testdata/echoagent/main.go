// Command echoagent stands in for the agent-runner in the container package's
// Docker tests. It reads the RunInput from stdin until EOF, prints a session
// event, runs the directives found in the prompt (one per line), and prints a
// result event "echo: <prompt>". Directives:
//
//	stderr TEXT   print TEXT on stderr
//	garbage       print a line that is not an event on stdout
//	long N        print an N-byte line that is not an event on stdout
//	sleep DUR     sleep for a Go duration
//	ignore-term   ignore SIGTERM from now on
//	id            print "uid=U gid=G" on stderr
//	env           print the environment on stderr
//	tmp           write a file in /tmp and print "tmp ok" on stderr
//	write PATH    write a file at PATH and print "wrote PATH" or
//	              "cannot write PATH" on stderr
//	exit N        exit with code N at once
//
// Build it explicitly (testdata is not part of ./...):
// CGO_ENABLED=0 go build ./internal/container/testdata/echoagent
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
)

func main() {
	os.Exit(run())
}

func run() int {
	out := bufio.NewWriter(os.Stdout)
	emit := func(ev ipc.Event) {
		b, _ := json.Marshal(ev)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	if targets := os.Getenv(ipc.MountsEnv); targets != "" {
		ipc.ReportMounts(out, targets)
		out.Flush()
	}
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read stdin:", err)
		return 1
	}
	in, err := ipc.DecodeRunInput(data)
	if err != nil {
		emit(ipc.Event{Type: ipc.EventError, Message: err.Error()})
		return 1
	}
	fmt.Fprintf(os.Stderr, "input: group=%s\n", in.Group)
	emit(ipc.Event{Type: ipc.EventSession, SessionID: "echo-session"})
	for _, line := range strings.Split(in.Prompt, "\n") {
		verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch verb {
		case "stderr":
			fmt.Fprintln(os.Stderr, arg)
		case "garbage":
			out.WriteString("this is not an event\n")
			out.Flush()
		case "long":
			n, _ := strconv.Atoi(arg)
			out.WriteString(strings.Repeat("x", n) + "\n")
			out.Flush()
		case "sleep":
			d, _ := time.ParseDuration(arg)
			time.Sleep(d)
		case "ignore-term":
			signal.Ignore(syscall.SIGTERM)
		case "id":
			fmt.Fprintf(os.Stderr, "uid=%d gid=%d\n", os.Getuid(), os.Getgid())
		case "env":
			for _, kv := range os.Environ() {
				fmt.Fprintln(os.Stderr, "env:", kv)
			}
		case "tmp":
			if err := os.WriteFile("/tmp/probe", []byte("ok"), 0o600); err != nil {
				fmt.Fprintln(os.Stderr, "tmp failed:", err)
			} else {
				fmt.Fprintln(os.Stderr, "tmp ok")
			}
		case "write":
			if err := os.WriteFile(arg, []byte("written by echoagent"), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "cannot write", arg)
			} else {
				fmt.Fprintln(os.Stderr, "wrote", arg)
			}
		case "rename", "symlink":
			// rename OLD NEW, symlink TARGET LINK: the outcome, with the
			// kernel's errno when refused.
			x, y, _ := strings.Cut(arg, " ")
			do := os.Rename
			if verb == "symlink" {
				do = os.Symlink
			}
			if err := do(x, y); err != nil {
				var errno syscall.Errno
				errors.As(err, &errno)
				fmt.Fprintf(os.Stderr, "cannot %s %s: %s\n", verb, y, errnoName(errno))
			} else {
				fmt.Fprintln(os.Stderr, verb, "done:", y)
			}
		case "exit":
			code, _ := strconv.Atoi(arg)
			return code
		}
	}
	emit(ipc.Event{Type: ipc.EventResult, Text: "echo: " + in.Prompt, SessionID: "echo-session"})
	return 0
}

// errnoName names the errnos the attacks expect.
func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EACCES:
		return "EACCES"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EROFS:
		return "EROFS"
	case syscall.ENOENT:
		return "ENOENT"
	}
	return e.Error()
}
