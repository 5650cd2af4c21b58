package main

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// Every subcommand's --help is short and names its own flags, --home and
// --env-file, not the daemon's settings (only `run --help` lists those);
// --help works at every level, `bridged help CMD` too.
func TestSubcommandHelpIsShort(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"login"}, []string{"--phone"}},
		{[]string{"chat"}, []string{"-m ", "--attach FILE", "--timeout", "--quiet", "--sender"}},
		{[]string{"groups"}, []string{"list", "add", "remove", "set", "new-session"}},
		{[]string{"groups", "new-session"}, nil},
		{[]string{"groups", "list"}, []string{"--available", "--json"}},
		{[]string{"groups", "add"}, []string{"--name", "--folder", "--main", "--trigger", "--no-trigger"}},
		{[]string{"groups", "remove"}, nil},
		{[]string{"groups", "set"}, []string{"--name", "--trigger", "--requires-trigger", "--model", "--timeout", "--mount", "--clear-mounts", "--budget-daily"}},
		{[]string{"tasks"}, []string{"list", "add", "pause", "resume", "cancel", "runs"}},
		{[]string{"tasks", "list"}, []string{"--json"}},
		{[]string{"tasks", "add"}, []string{"--cron", "--every", "--at", "--context"}},
		{[]string{"tasks", "pause"}, nil},
		{[]string{"tasks", "runs"}, []string{"--limit", "--json"}},
		{[]string{"status"}, []string{"--json"}},
		{[]string{"why"}, []string{"--chat", "--json"}},
		{[]string{"changes"}, []string{"--since", "--json"}},
		{[]string{"diff"}, []string{"--json"}},
		{[]string{"undo"}, []string{"--force", "--keep", "--only", "--json"}},
		{[]string{"doctor"}, []string{"--json"}},
		{[]string{"config"}, []string{"--json"}},
		{[]string{"install-service"}, []string{"--user", "--dry-run", "--force"}},
		{[]string{"help", "groups", "add"}, []string{"--name"}},
	} {
		for _, h := range []string{"--help", "-h"} {
			args := append(append([]string(nil), tc.args...), h)
			if tc.args[0] == "help" {
				args = tc.args
			}
			stderr, errOut, err := cli(t, context.Background(), nil, "", args...)
			name := strings.Join(args, " ")
			if errOut != "" {
				t.Errorf("bridged %s wrote its help to stderr; want stdout only:\n%s", name, errOut)
			}
			if err != nil && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("bridged %s: %v\n%s", name, err, stderr)
				continue
			}
			if n := strings.Count(stderr, "\n"); n >= 25 {
				t.Errorf("bridged %s: %d lines; want under 25:\n%s", name, n, stderr)
			}
			want := tc.want
			if len(tc.args) > 1 || (tc.args[0] != "groups" && tc.args[0] != "tasks") {
				want = append(want, "--home")
				if tc.args[0] != "install-service" {
					want = append(want, "--env-file")
				}
			}
			for _, w := range want {
				if !strings.Contains(stderr, w) {
					t.Errorf("bridged %s lacks %q:\n%s", name, w, stderr)
				}
			}
			if strings.Contains(stderr, "--idle-timeout ") || strings.Contains(stderr, "--container-memory") {
				t.Errorf("bridged %s lists the daemon's settings:\n%s", name, stderr)
			}
		}
	}
	stderr, _, _ := cli(t, context.Background(), nil, "", "run", "--help")
	for _, w := range []string{"--image", "--idle-timeout", "--container-memory"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("bridged run --help lacks the daemon setting %s:\n%s", w, stderr)
		}
	}
}

// Help asked for goes to stdout (`bridged --help | less`), exit 0; a usage
// error goes to stderr, exit 2.
func TestHelpOnStdout(t *testing.T) {
	ctx := context.Background()
	helps := [][]string{{"--help"}, {"-h"}, {"help"}, {"tasks", "-h"}, {"status", "-h"}, {"groups", "set", "--help"}, {"import", "nanoclaw", "--help"}}
	for _, c := range commands() {
		helps = append(helps, []string{c.name, "--help"})
	}
	for _, args := range helps {
		out, errOut, err := cli(t, ctx, nil, "", args...)
		if (err != nil && exitCode(err) != 0) || !strings.Contains(out, "Usage: bridged") || errOut != "" {
			t.Errorf("bridged %s: %v, stdout %q, stderr %q; want the usage on stdout, exit 0", strings.Join(args, " "), err, out, errOut)
		}
	}
	for _, args := range [][]string{nil, {"groups"}, {"status", "--bogus"}, {"groups", "set"}} {
		out, errOut, err := cli(t, ctx, nil, "", args...)
		if exitCode(err) != 2 || out != "" || !strings.Contains(errOut, "Usage: bridged") {
			t.Errorf("bridged %s: exit %d, stdout %q, stderr %q; want the usage on stderr, exit 2", strings.Join(args, " "), exitCode(err), out, errOut)
		}
	}
}

// A mistyped command or subcommand is answered with the nearest one.
func TestMistypedCommand(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, "did you mean status?"},
		{[]string{"grups", "list"}, "did you mean groups?"},
		{[]string{"groups", "lsit"}, "did you mean list?"},
		{[]string{"tasks", "pasue", "x"}, "did you mean pause?"},
		{[]string{"approvals", "rule"}, "did you mean rules?"},
	} {
		_, errOut, err := cli(t, ctx, nil, "", tc.args...)
		if exitCode(err) != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("bridged %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), exitCode(err), errOut, tc.want)
		}
	}
	if _, errOut, _ := cli(t, ctx, nil, "", "zzzzzzzz"); strings.Contains(errOut, "did you mean") {
		t.Errorf("bridged zzzzzzzz: %q; want no guess for a word near none", errOut)
	}
}
