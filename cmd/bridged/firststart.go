package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/store"
)

// firstMainChat is the chat the daemon registers as the main group on its
// first start, when no group is registered: the terminal's `bridged chat`.
const firstMainChat = "local:main"

// chatHint is the command that talks to home's main agent: `bridged chat`
// (the program as it was started, bin/bridged after `make run`, unless
// "bridged" on PATH is this binary), with --home when home is not the one
// every command finds by default.
func chatHint(home string) string {
	prog := "bridged"
	if self, err := os.Executable(); err == nil {
		onPath, err := exec.LookPath("bridged")
		if a, b := evalPath(self), evalPath(onPath); err != nil || a != b {
			prog = os.Args[0]
		}
	}
	def, err := config.DefaultHome(os.Getenv)
	if os.Getenv("BRIDGED_HOME") == home || (err == nil && def == home) {
		return prog + " chat"
	}
	return prog + " chat --home " + home
}

// evalPath is p absolute with its symlinks resolved, or p.
func evalPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// greetFirstStart runs before anything else of the daemon does. On the
// first start of a home (firstStart: its database did not exist) with no
// group registered, it registers the terminal chat local:main as the main
// group, so `make run` alone leaves an agent to talk to. Each start then
// says in its first lines how to reach the main agent from a terminal, or,
// with no group at all, how to register one.
func greetFirstStart(ctx context.Context, db *store.DB, cfg *config.Config, firstStart bool, log zerolog.Logger) error {
	gs, err := db.Groups.List(ctx)
	if err != nil {
		return err
	}
	if len(gs) == 0 && firstStart {
		adm := &control.Admin{DB: db, AssistantName: cfg.AssistantName, Timezone: cfg.Timezone}
		if _, err := adm.AddGroup(ctx, control.GroupAdd{Chat: firstMainChat, Name: "main", IsMain: true}); err != nil {
			return fmt.Errorf("register the terminal's main chat: %w", err)
		}
		log.Info().Str("chat", firstMainChat).Msg("first start with no group: registered the terminal chat " + firstMainChat + " as the main group")
	}
	main, err := db.Groups.Main(ctx)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if len(gs) == 0 {
			log.Warn().Msg("no group is registered, so no agent answers: register the terminal's main chat with `bridged groups add --name main --main " + firstMainChat + "`")
		}
		return nil
	case err != nil:
		return err
	}
	if control.IsLocalChat(string(main.Chat)) {
		log.Info().Str("group", string(main.Folder)).Msg("talk to the main agent from another terminal: " + chatHint(cfg.Home))
	}
	return nil
}
