package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/control"
)

func TestRunRefusesSecondDaemon(t *testing.T) {
	home := newHome(t)
	startDaemon(t, home, nil)
	_, _, err := cli(t, context.Background(), nil, "", "run", "--home", home, "--log-level", "error")
	if !errors.Is(err, control.ErrAlreadyRunning) {
		t.Fatalf("got %v; want ErrAlreadyRunning", err)
	}
	if _, err := control.NewClient(filepath.Join(home, "bridged.sock")).Groups(context.Background()); err != nil {
		t.Errorf("the first daemon stopped answering: %v", err)
	}
}

func TestRunWithoutDocker(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	home := newHome(t)
	before := goroutinesOf("/cmd/bridged.(*app).cmdRun")
	_, _, err := cli(t, context.Background(), nil, "", "run", "--home", home, "--log-level", "error")
	if err == nil || !strings.Contains(err.Error(), "docker is not reachable") {
		t.Fatalf("got %v; want a clear 'docker is not reachable' error", err)
	}
	if after := goroutinesOf("/cmd/bridged.(*app).cmdRun"); after > before {
		t.Errorf("%d goroutines of run outlive it (%d before)", after, before)
	}
	// The home layout and templates are there, and no socket was left.
	for _, p := range []string{"store/bridged.db", "groups/global/CLAUDE.md", "groups/main/CLAUDE.md", "data/ipc"} {
		if _, err := os.Stat(filepath.Join(home, p)); err != nil {
			t.Errorf("missing %s after a failed start: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "bridged.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket left behind after a failed start: %v", err)
	}
}

// goroutinesOf counts the live goroutines whose stack names fn, as a frame
// or as the function that started them.
func goroutinesOf(fn string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}
