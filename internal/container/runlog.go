package container

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// maxRunLogStderr bounds the stderr kept in one run log.
const maxRunLogStderr = 10 << 20

// RunLog is data/logs/<folder>/run-<time>.log: the run's input (never the
// secrets; the prompt only at debug level), the container's stderr, its exit
// status and duration. data/logs is the daemon's own (owner only, never
// mounted), so no agent can reach or redirect it. A log that cannot be
// written is skipped with a warning; the run goes on.
type RunLog struct {
	mu      sync.Mutex
	f       *os.File
	w       *bufio.Writer
	written int
	cut     bool
	start   time.Time
}

// OpenRunLog creates a run log in dir, named after now. Close it when done.
func OpenRunLog(log zerolog.Logger, dir string, now time.Time) *RunLog {
	rl := &RunLog{start: time.Now()}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Warn().Err(err).Msg("cannot create run log directory")
		return rl
	}
	name := "run-" + now.UTC().Format("20060102T150405.000Z") + ".log"
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		log.Warn().Err(err).Msg("cannot create run log")
		return rl
	}
	rl.f, rl.w = f, bufio.NewWriter(f)
	return rl
}

func (rl *RunLog) printf(format string, args ...any) {
	if rl.w != nil {
		fmt.Fprintf(rl.w, format, args...)
	}
}

// Header writes what the run of kind (and task) was started with (the input
// carries no credential: those stay in the daemon's proxy).
func (rl *RunLog) Header(withPrompt bool, kind, task string, spec Spec, in ipc.RunInput) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	promptBytes := len(in.Prompt)
	in.ApprovalKey = ""
	if !withPrompt {
		in.Prompt = ""
	}
	b, _ := json.MarshalIndent(in, "", "  ")
	rl.printf("=== bridged run ===\n")
	rl.printf("started: %s\ngroup: %s\nkind: %s\n", rl.start.UTC().Format(time.RFC3339Nano), spec.Group, kind)
	if task != "" {
		rl.printf("task: %s\n", task)
	}
	rl.printf("container: %s\nimage: %s\nuser: %s\nprompt bytes: %d\n", spec.Name, spec.Image, spec.User, promptBytes)
	for _, m := range spec.Mounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		rl.printf("mount: %s -> %s (%s)\n", m.Source, m.Target, mode)
	}
	if !withPrompt {
		rl.printf("input (prompt left out; it is logged at debug level):\n")
	} else {
		rl.printf("input:\n")
	}
	rl.printf("%s\n--- stderr ---\n", b)
	rl.flushLocked()
}

// Stderr adds one line of the container's stderr (cut after 10 MiB).
func (rl *RunLog) Stderr(line string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.w == nil || rl.cut {
		return
	}
	if rl.written+len(line) > maxRunLogStderr {
		rl.cut = true
		rl.printf("[stderr cut: over %d bytes]\n", maxRunLogStderr)
		return
	}
	rl.written += len(line) + 1
	rl.printf("%s\n", line)
}

// Footer writes how the run ended: the container's end, the results it
// committed, whether it replied, and the run's failure (nil: none).
func (rl *RunLog) Footer(e Ended, results int, replied bool, failure error) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.printf("--- end ---\nexit code: %d\nduration: %s\nresults: %d\nreplied: %t\ntimed out: %t\n",
		e.Exit.Code, time.Since(rl.start).Round(time.Millisecond), results, replied, e.TimedOut)
	if e.Exit.Err != nil {
		rl.printf("exit error: %v\n", e.Exit.Err)
	}
	if err := failure; err != nil {
		rl.printf("failure: %v\n", err)
	}
	rl.flushLocked()
}

func (rl *RunLog) flushLocked() {
	if rl.w != nil {
		_ = rl.w.Flush()
	}
}

// Close flushes and closes the log.
func (rl *RunLog) Close() {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.f == nil {
		return
	}
	rl.flushLocked()
	_ = rl.f.Close()
	rl.f, rl.w = nil, nil
}
