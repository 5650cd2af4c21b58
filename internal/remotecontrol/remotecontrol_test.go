package remotecontrol

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Command
		ok   bool
	}{
		{"/remote-control", Start, true},
		{"  /Remote-Control \n", Start, true},
		{"/remote-control stop", Stop, true},
		{"/remote-control end", Stop, true},
		{"/remote-control off", Stop, true},
		{"/remote-control-end", Stop, true},
		{"/remote-control please now", Usage, true},
		{"/remote-control-end now", Usage, true},
		{"please /remote-control", 0, false},
		{"/remote-controller", 0, false},
		{"", 0, false},
	} {
		got, ok := Parse(tc.text)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tc.text, got, ok, tc.want, tc.ok)
		}
	}
}

func TestEnvironLeavesNoCredential(t *testing.T) {
	got := Environ([]string{
		"HOME=/home/o", "PATH=/bin", "ANTHROPIC_API_KEY=sk-ant-x", "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat",
		"ANTHROPIC_BASE_URL=http://proxy", "BRIDGED_TRANSCRIBE_KEY=k", "BRIDGED_REMOTE_CONTROL=true", "CLAUDE_CONFIG_DIR=/c",
	})
	want := []string{"HOME=/home/o", "PATH=/bin", "CLAUDE_CONFIG_DIR=/c"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q; want %q", got, want)
	}
}

func TestLinkWatcher(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"one line", []string{"Session URL: https://claude.ai/code?bridge=env_abc123\n"}, "https://claude.ai/code?bridge=env_abc123"},
		{"colour escapes", []string{"\x1b[1mhttps://claude.ai/code?bridge=env_x1\x1b[0m\n"}, "https://claude.ai/code?bridge=env_x1"},
		{"split across writes", []string{"banner\nSession URL: https://claude.ai/co", "de?bridge=env_", "split\nWaiting"}, "https://claude.ai/code?bridge=env_split"},
		{"after much output", []string{strings.Repeat("x", 20000), "\nhttps://claude.ai/code/session_9 \n"}, "https://claude.ai/code/session_9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found := make(chan string, 1)
			w := &linkWatcher{found: found}
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			select {
			case got := <-found:
				if got != tc.want {
					t.Fatalf("got %q; want %q", got, tc.want)
				}
			default:
				t.Fatalf("no link found; want %q", tc.want)
			}
			_, _ = w.Write([]byte("https://claude.ai/code?bridge=env_second\n")) // found once only
		})
	}
}

// poster records the posts and hands each to the test.
type poster struct{ posts chan string }

func (p *poster) SendMessage(_ context.Context, chat, text string, origin store.Origin, _ string) (store.OutboxItem, error) {
	if origin != store.OriginNotice {
		panic("not a notice")
	}
	p.posts <- chat + ": " + text
	return store.OutboxItem{}, nil
}

type groups struct{}

func (groups) Main(context.Context) (store.Group, error) {
	return store.Group{Chat: "local:main", Folder: "main", IsMain: true}, nil
}

// script writes an executable shell script standing in for the CLI and
// returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A CLI that asks, prints its link and stays up until it is stopped; its
// working directory and arguments are written to ran.
const upCLI = `read answer
pwd > "$RAN"; echo "$@" "answer=$answer" >> "$RAN"; env >> "$RAN"
printf 'Enable Remote Control? (y/n) \nSession URL: https://claude.ai/code?bridge=env_test1\n'
trap 'exit 0' TERM
while :; do sleep 1; done
`

func newService(t *testing.T, enabled bool, cli string, env ...string) (*Service, *poster, string) {
	t.Helper()
	p := &poster{posts: make(chan string, 16)}
	dir := filepath.Join(t.TempDir(), "rc")
	s, err := New(Config{Enabled: enabled, CLI: cli, Dir: dir, Env: append([]string{"PATH=" + os.Getenv("PATH")}, env...),
		URLTimeout: 5 * time.Second, Groups: groups{}, Post: p, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, p, dir
}

func (p *poster) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-p.posts:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("nothing posted within 20s")
		return ""
	}
}

func (p *poster) none(t *testing.T) {
	t.Helper()
	select {
	case s := <-p.posts:
		t.Fatalf("posted %q; want nothing", s)
	default:
	}
}

func owner(text string) channel.Message {
	return channel.Message{Chat: "local:main", Text: text, FromMe: true, Sender: "you"}
}

func TestOffIsRefusedWithHowToTurnItOn(t *testing.T) {
	s, p, _ := newService(t, false, "/nonexistent/claude")
	if !s.Take(context.Background(), owner("/remote-control")) {
		t.Fatal("the command was not taken out")
	}
	if got := p.next(t); !strings.Contains(got, "Remote control is off") || !strings.Contains(got, Setting+"=true") {
		t.Fatalf("got %q; want it off and how to turn it on", got)
	}
}

func TestOnlyTheOwnersCommandInTheMainChat(t *testing.T) {
	cli := script(t, upCLI)
	s, p, _ := newService(t, true, cli, "RAN="+filepath.Join(t.TempDir(), "ran"))
	ctx := context.Background()
	now := time.Unix(1e9, 0)
	s.cfg.Now = func() time.Time { return now }

	other := channel.Message{Chat: "local:main", Text: "/remote-control", Sender: "local:bob"}
	if !s.Take(ctx, other) {
		t.Fatal("a member's command was stored")
	}
	if got := p.next(t); !strings.Contains(got, "Only the owner") {
		t.Fatalf("got %q; want the owner-only refusal", got)
	}
	s.Take(ctx, other) // told once a minute at most
	p.none(t)
	now = now.Add(refuseEvery)
	s.Take(ctx, other)
	if got := p.next(t); !strings.Contains(got, "Only the owner") {
		t.Fatalf("got %q; want the refusal again after a minute", got)
	}

	bot := owner("/remote-control")
	bot.IsBot = true
	if s.Take(ctx, bot) {
		t.Fatal("bridged's own message was taken as a command")
	}
	elsewhere := owner("/remote-control")
	elsewhere.Chat = "local:fam"
	if s.Take(ctx, elsewhere) {
		t.Fatal("a command outside the main chat was taken")
	}
	if s.Take(ctx, owner("hello")) {
		t.Fatal("an ordinary message was taken")
	}
	p.none(t)
	s.mu.Lock()
	running := s.sess != nil
	s.mu.Unlock()
	if running {
		t.Fatal("a session started")
	}
}

func TestStartOneAtATimeAndStop(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	cli := script(t, upCLI)
	s, p, dir := newService(t, true, cli, "RAN="+ran, "ANTHROPIC_API_KEY=sk-ant-secret")
	ctx := context.Background()

	if !s.Take(ctx, owner("/remote-control")) {
		t.Fatal("not taken")
	}
	if got := p.next(t); got != "local:main: Remote control: https://claude.ai/code?bridge=env_test1\nSend /remote-control stop to end it." {
		t.Fatalf("got %q; want the link", got)
	}
	b, err := os.ReadFile(ran)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if lines[0] != dir || lines[1] != "remote-control --name bridged answer=y" {
		t.Fatalf("the CLI ran in %q as %q; want in %q as remote-control --name bridged, answered y", lines[0], lines[1], dir)
	}
	if strings.Contains(string(b), "sk-ant-secret") {
		t.Fatal("the CLI was given the API key")
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("working directory: %v, %v; want mode 0700", fi, err)
	}

	s.Take(ctx, owner("/remote-control"))
	if got := p.next(t); got != "local:main: Remote control is already running: https://claude.ai/code?bridge=env_test1" {
		t.Fatalf("got %q; want the running session's link", got)
	}
	s.Take(ctx, owner("/remote-control stop"))
	if got := p.next(t); got != "local:main: "+replyEnded {
		t.Fatalf("got %q; want it ended", got)
	}
	s.Take(ctx, owner("/remote-control-end"))
	if got := p.next(t); got != "local:main: "+replyNone {
		t.Fatalf("got %q; want none running", got)
	}
	// A new one starts after the end.
	s.Take(ctx, owner("/remote-control"))
	if got := p.next(t); !strings.Contains(got, "Remote control: https://claude.ai/code") {
		t.Fatalf("got %q; want a new link", got)
	}
}

func TestItsOwnEndIsTold(t *testing.T) {
	cli := script(t, `read a; echo "Session URL: https://claude.ai/code?bridge=env_short"; read b`)
	// The script ends when its stdin (the answer only) runs out.
	s, p, _ := newService(t, true, cli)
	s.Take(context.Background(), owner("/remote-control"))
	if got := p.next(t); !strings.Contains(got, "env_short") {
		t.Fatalf("got %q; want the link", got)
	}
	if got := p.next(t); got != "local:main: "+replyGone {
		t.Fatalf("got %q; want its end told", got)
	}
}

func TestFailuresAreTold(t *testing.T) {
	for _, tc := range []struct {
		name, cli, want string
	}{
		{"no CLI", "/nonexistent/claude", "the claude CLI (/nonexistent/claude) is not found"},
		{"exits first", "", "exited before it printed a link: Error: Remote Control is only available with claude.ai subscriptions."},
		{"no link", "", "printed no link within 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := tc.cli
			switch tc.name {
			case "exits first":
				cli = script(t, "echo 'Error: Remote Control is only available with claude.ai subscriptions.' >&2; exit 1\n")
			case "no link":
				cli = script(t, "trap 'exit 0' TERM; while :; do sleep 1; done\n")
			}
			s, p, _ := newService(t, true, cli)
			s.cfg.URLTimeout = time.Second
			s.Take(context.Background(), owner("/remote-control"))
			got := p.next(t)
			if !strings.Contains(got, "Remote control failed: ") || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q; want a failure saying %q", got, tc.want)
			}
			if strings.HasSuffix(got, "..") {
				t.Fatalf("got %q; want one full stop", got)
			}
		})
	}
}

func TestCloseEndsTheSession(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	s, p, _ := newService(t, true, script(t, upCLI), "RAN="+ran)
	s.Take(context.Background(), owner("/remote-control"))
	p.next(t)
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
	p.none(t)
	s.Take(context.Background(), owner("/remote-control"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		t.Fatal("a session started after Close")
	}
}
