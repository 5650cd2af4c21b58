package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
	_, _, err := cli(t, context.Background(), nil, "", "run", "--home", home, "--log-level", "error")
	if err == nil || !strings.Contains(err.Error(), "docker is not reachable") {
		t.Fatalf("got %v; want a clear 'docker is not reachable' error", err)
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
