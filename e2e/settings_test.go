package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The owner's emergency brake: a busy `full` group set to read-only says
// the change applies when its turn ends, and the very next command is
// refused (the message sent during the turn is not piped into the old
// container: it waits for one started with the new profile). An idle
// agent is stopped at once, and the answer says so; with nothing running
// the change applies from the next message. --allow me leaves the owner
// alone able to wake the agent.
func TestE2ESettingsChangeReachesTheRunningAgent(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "5m")
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "fam", "--no-trigger", "--tools", "full", "local:fam")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := e.watchContainers(ctx)
	famDir := filepath.Join(e.home, "groups", "fam")
	const wait = 90 * time.Second

	// full writes, and its agent stays for the next message.
	if got := e.bash("local:fam", "touch before && echo wrote", wait); got != "wrote" || !exists(filepath.Join(famDir, "before")) {
		t.Fatalf("full fam got %q; want the command run", got)
	}

	// Busy: a turn in progress when the profile changes.
	busy := e.post("local:fam", "fake:sleep 20s fake:reply slept")
	waitBusy(t, e, "fam", wait)
	out := e.mustCLI("groups", "set", "--tools", "read-only", "fam")
	if !strings.Contains(out, "Applies when the current turn ends.") {
		t.Errorf("groups set during a turn said:\n%s\nwant it to apply when the current turn ends", out)
	}
	e.post("local:fam", "fake:bash touch after-set && echo wrote")
	replies := e.waitOut("local:fam", busy, 2, 2*wait)
	if replies[0].Text != "slept" {
		t.Errorf("the busy turn answered %q; want slept", replies[0].Text)
	}
	if exists(filepath.Join(famDir, "after-set")) {
		t.Error("the command sent after the change to read-only wrote")
	}
	if !strings.Contains(replies[1].Text, "not allowed") {
		t.Errorf("the command after the change got %q; want refused as not allowed", replies[1].Text)
	}
	if _, _, starts := watch.snapshot(); starts != 2 {
		t.Errorf("%d container starts; want 2 (the read-only command in a new one)", starts)
	}

	// Idle: stopped at once.
	watch.waitRunning(t, 1, wait)
	out = e.mustCLI("groups", "set", "--tools", "ask", "fam")
	if !strings.Contains(out, "Applied: the running agent was stopped.") {
		t.Errorf("groups set with an idle agent said:\n%s\nwant the running agent stopped", out)
	}
	watch.waitRunning(t, 0, wait)
	waitNoAgent(t, e, "fam", wait)

	// Nothing running. --allow me: the owner only wakes the agent.
	out = e.mustCLI("groups", "set", "--allow", "me", "fam")
	if !strings.Contains(out, "Applies from the next message.") || !strings.Contains(out, "who may wake it: you only") {
		t.Errorf("groups set --allow me with no agent running said:\n%s\nwant you only, from the next message", out)
	}
	if _, errs, code, _ := e.chatM("fam", "bob says hello", "--as", "bob", "--timeout", "60s"); code != 3 || !strings.Contains(errs, "sender not allowed") {
		t.Errorf("chat --as bob with --allow me: exit %d, stderr %q; want exit 3, sender not allowed", code, errs)
	}
	if got := e.ask("local:fam", "fake:reply only you", wait); got != "only you" {
		t.Errorf("the owner got %q with --allow me; want the reply", got)
	}
	if _, _, starts := watch.snapshot(); starts != 3 {
		t.Errorf("%d container starts; want 3 (bob's message woke nothing)", starts)
	}
	d.stop(t)
}

// waitBusy waits until folder's agent is working on a turn, as `bridged
// status` shows it.
func waitBusy(t *testing.T, e *env, folder string, within time.Duration) {
	t.Helper()
	waitAgent(t, e, folder, "busy", within, func(present, busy bool) bool { return busy })
}

// waitNoAgent waits until the daemon's status lists no agent for folder:
// the container gone from the engine is not yet the daemon's word.
func waitNoAgent(t *testing.T, e *env, folder string, within time.Duration) {
	t.Helper()
	waitAgent(t, e, folder, "gone", within, func(present, busy bool) bool { return !present })
}

// waitAgent polls the daemon's status until ok holds of folder's agent
// (present in the list; busy: neither idle nor closing).
func waitAgent(t *testing.T, e *env, folder, what string, within time.Duration, ok func(present, busy bool) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var st struct {
			Containers []struct {
				Group   string `json:"group"`
				Idle    bool   `json:"idle"`
				Closing bool   `json:"closing"`
			} `json:"containers"`
		}
		if err := e.api("GET", "/v1/status", nil, &st); err != nil {
			t.Fatal(err)
		}
		present, busy := false, false
		for _, c := range st.Containers {
			if c.Group == folder {
				present, busy = true, busy || (!c.Idle && !c.Closing)
			}
		}
		if ok(present, busy) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's agent not %s within %s: %+v", folder, what, within, st.Containers)
		}
		time.Sleep(100 * time.Millisecond) // polling tick: the status reports no event
	}
}

// Removing a group stops its running agent: an idle container does not
// stay up until its idle timeout with the group gone.
func TestE2ERemovedGroupAgentStops(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "5m")
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := e.watchContainers(ctx)
	const wait = 90 * time.Second

	if got := e.ask("local:fam", "fake:reply hi", wait); got != "hi" {
		t.Fatalf("fam got %q; want hi", got)
	}
	watch.waitRunning(t, 1, wait)
	out := e.mustCLI("groups", "remove", "fam")
	if !strings.Contains(out, "Its running agent, if any, is stopped") {
		t.Errorf("groups remove said:\n%s\nwant that its running agent is stopped", out)
	}
	watch.waitRunning(t, 0, wait)
	d.stop(t)
}
