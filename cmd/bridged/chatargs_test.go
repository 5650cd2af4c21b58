package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/control"
)

// `chat` finds the group by folder, chat id or name; `chat -m` without a
// group talks to the main group as the interactive chat does; `/help` in
// the interactive chat is answered by the chat, not sent to the agent.
func TestChatGroupArgumentAndHelp(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	startDaemon(t, home, func(text string) []string { return []string{"echo: " + text} })
	for _, args := range [][]string{
		{"--name", "main", "--main", "local:main"},
		{"--name", "Team Chat", "--folder", "team", "local:team-x"},
	} {
		if _, _, err := cli(t, ctx, nil, "", append([]string{"groups", "add", "--home", home}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	c := control.NewClient(filepath.Join(home, "bridged.sock"))
	landed := func(chat, text string) bool {
		ms, err := c.Messages(ctx, chat, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Direction == control.In && m.Text == text {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct{ group, chat string }{
		{"", "local:main"},
		{"team", "local:team-x"},
		{"local:team-x", "local:team-x"},
		{"Team Chat", "local:team-x"},
		{"team chat", "local:team-x"},
	} {
		text := "hi via " + tc.group
		args := []string{"chat", "--home", home, "-m", text}
		if tc.group != "" {
			args = append(args, tc.group)
		}
		out, _, err := cli(t, ctx, nil, "", args...)
		if err != nil || out != "echo: "+text+"\n" {
			t.Errorf("chat -m %q %q: %q, %v; want the reply", text, tc.group, out, err)
			continue
		}
		if !landed(tc.chat, text) {
			t.Errorf("chat -m %q %q did not post to %s", text, tc.group, tc.chat)
		}
	}

	_, stderr, err := cli(t, ctx, nil, "/help\n", "chat", "--home", home)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/attach FILE", "/help", "Ctrl-D"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("/help printed\n%s\nwant %q listed", stderr, want)
		}
	}
	if landed("local:main", "/help") {
		t.Error("/help was sent to the agent; want it answered by the chat")
	}
}
