package main

import (
	"github.com/bridged-app/bridged/internal/config"
)

// checkRemoteControl says whether /remote-control is on and, when it is,
// whether its CLI is found (with lookPath, as the daemon looks it up:
// PATH here may not be the daemon's).
func checkRemoteControl(cfg *config.Config, lookPath func(string) (string, error)) check {
	if !cfg.RemoteControl {
		return check{name: "remote-control", status: "ok", detail: "off: /remote-control in the main chat is refused (BRIDGED_REMOTE_CONTROL)"}
	}
	path, err := lookPath(cfg.RemoteControlCLI)
	if err != nil {
		return check{name: "remote-control", status: "FAIL", detail: "on, but its CLI " + cfg.RemoteControlCLI + " is not found",
			hint: "install Claude Code and log in with `claude auth login` as the user bridged runs as, or set BRIDGED_REMOTE_CONTROL_CLI to its path"}
	}
	return check{name: "remote-control", status: "ok",
		detail: "on: the owner's /remote-control in the main chat starts `" + path + " remote-control` on this machine, outside every container (it needs the claude.ai login of bridged's user)"}
}
