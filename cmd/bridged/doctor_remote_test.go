package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/config"
)

func TestCheckRemoteControl(t *testing.T) {
	found := func(string) (string, error) { return "/usr/local/bin/claude", nil }
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	for _, tc := range []struct {
		name   string
		cfg    config.Config
		look   func(string) (string, error)
		status string
		want   string
	}{
		{"off", config.Config{RemoteControlCLI: "claude"}, missing, "ok", "off"},
		{"on, found", config.Config{RemoteControl: true, RemoteControlCLI: "claude"}, found, "ok", "/usr/local/bin/claude remote-control"},
		{"on, missing", config.Config{RemoteControl: true, RemoteControlCLI: "/opt/claude"}, missing, "FAIL", "/opt/claude is not found"},
	} {
		c := checkRemoteControl(&tc.cfg, tc.look)
		if c.status != tc.status || !strings.Contains(c.detail, tc.want) {
			t.Errorf("%s: %s %q; want %s and %q", tc.name, c.status, c.detail, tc.status, tc.want)
		}
	}
}

// doctor reads the running daemon's remote control settings.
func TestWithDaemonValuesRemoteControl(t *testing.T) {
	c := withDaemonValues(&config.Config{RemoteControlCLI: "claude"}, map[string]string{"BRIDGED_REMOTE_CONTROL": "true", "BRIDGED_REMOTE_CONTROL_CLI": "/opt/claude"})
	if !c.RemoteControl || c.RemoteControlCLI != "/opt/claude" {
		t.Fatalf("got %v %q; want the daemon's true and /opt/claude", c.RemoteControl, c.RemoteControlCLI)
	}
}
