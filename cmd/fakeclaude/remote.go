package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
)

// remoteControl is `claude remote-control [--name NAME]`: it asks "Enable
// Remote Control? (y/n)" and reads the answer from stdin; on y it prints
// the session's link the way the real CLI does ("Session URL:
// https://claude.ai/code?bridge=env_…", the line NanoClaw reads it from) and
// stays up until it is signalled (SIGTERM, SIGINT) or ctx ends. Like the
// real CLI it refuses a Claude credential in its environment: remote
// control takes only a claude.ai login, never an API key or a long-lived
// token.
func remoteControl(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env []string) int {
	name := ""
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--name" && i+1 < len(args):
			name = args[i+1]
			i++
		case strings.HasPrefix(a, "--name="):
			name = strings.TrimPrefix(a, "--name=")
		default:
			fmt.Fprintf(stderr, "error: unknown option '%s'\n", a)
			return 1
		}
	}
	for _, k := range []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"} {
		if getenv(env, k) != "" {
			fmt.Fprintln(stderr, "Error: Remote Control is only available with claude.ai subscriptions. Please use `/login` to sign in with your claude.ai account.")
			return 1
		}
	}
	fmt.Fprintln(stdout, "Remote Control lets you access this CLI session from the web (claude.ai/code) or the Claude app.")
	fmt.Fprint(stdout, "Enable Remote Control? (y/n) ")
	answer, _ := bufio.NewReader(stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		fmt.Fprintln(stdout, "\nRemote Control not enabled.")
		return 1
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	if name != "" {
		fmt.Fprintf(stdout, "\nSession: %s\n", name)
	}
	fmt.Fprintf(stdout, "Session URL: https://claude.ai/code?bridge=env_%s\n", hex.EncodeToString(id[:]))
	fmt.Fprintln(stdout, "Waiting for connection…")
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(stdout, "Remote Control session ended.")
	return 0
}
