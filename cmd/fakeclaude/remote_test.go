package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

// remote-control prints its link as the real CLI does and stays up until
// it is stopped; a credential in its environment, or a no, ends it.
func TestRemoteControl(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := run(ctx, []string{"remote-control", "--name", "bridged"}, strings.NewReader("y\n"), pw, &errOut, []string{"HOME=/nonexistent"}, 1000)
		pw.Close()
		done <- code
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	link := regexp.MustCompile(`^Session URL: https://claude\.ai/code\?bridge=env_[0-9a-f]{24}$`)
	var seen []string
	timeout := time.After(10 * time.Second)
	for len(seen) == 0 || !link.MatchString(seen[len(seen)-1]) {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("ended before its link; stdout %q stderr %q", seen, errOut.String())
			}
			seen = append(seen, l)
		case <-timeout:
			t.Fatalf("no session link within 10s; stdout %q", seen)
		}
	}
	if all := strings.Join(seen, "\n"); !strings.Contains(all, "Enable Remote Control? (y/n)") || !strings.Contains(all, "Session: bridged") {
		t.Errorf("stdout %q; want the question and the session's name", all)
	}
	select {
	case code := <-done:
		t.Fatalf("exited %d before it was stopped", code)
	default:
	}
	cancel()
	for range lines {
	}
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after the stop; want 0", code)
	}

	for _, tc := range []struct {
		env    []string
		answer string
		want   string
	}{
		{[]string{"CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-x"}, "y\n", "only available with claude.ai subscriptions"},
		{[]string{"ANTHROPIC_API_KEY=sk-ant-x"}, "y\n", "only available with claude.ai subscriptions"},
		{nil, "n\n", "Remote Control not enabled"},
	} {
		var o, e bytes.Buffer
		if code := run(context.Background(), []string{"remote-control"}, strings.NewReader(tc.answer), &o, &e, tc.env, 1000); code != 1 || !strings.Contains(o.String()+e.String(), tc.want) {
			t.Errorf("env %v, answer %q: exit %d, output %q; want 1 and %q", tc.env, tc.answer, code, o.String()+e.String(), tc.want)
		}
	}
}
