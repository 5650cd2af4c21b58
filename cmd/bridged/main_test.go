package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/local"
	"github.com/bridged-app/bridged/internal/control"
	bhome "github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
	"github.com/bridged-app/bridged/internal/turns"
)

// newHome returns a fresh home directory with a path short enough for the
// control socket, its store there as the first command leaves it: a copy,
// not a migration (0.4 s under -race).
func newHome(t *testing.T) string {
	t.Helper()
	d := newEmptyHome(t)
	storetest.Fresh(t, filepath.Join(d, "store", "bridged.db"))
	return d
}

// newEmptyHome is newHome with nothing in it, not even the store.
func newEmptyHome(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "bcli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// cli runs the command line in-process with an environment of its own.
func cli(t *testing.T, ctx context.Context, env map[string]string, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }}
	err = a.run(ctx, args)
	return out.String(), errb.String(), err
}

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		min, max int
		wantPos  []string
		wantName string
		wantMain bool
		wantErr  error
	}{
		{"flags first", []string{"--name", "main", "--main", "local:main"}, 1, 1, []string{"local:main"}, "main", true, nil},
		{"flags after", []string{"local:main", "--name", "main", "--main"}, 1, 1, []string{"local:main"}, "main", true, nil},
		{"single dash", []string{"-name=x", "chat"}, 1, 1, []string{"chat"}, "x", false, nil},
		{"double dash", []string{"--name", "x", "--", "--main"}, 1, 1, []string{"--main"}, "x", false, nil},
		{"missing arg", []string{"--name", "x"}, 1, 1, nil, "x", false, errUsage},
		{"extra arg", []string{"a", "b"}, 1, 1, nil, "", false, errUsage},
		{"unknown flag", []string{"--colour", "red", "a"}, 1, 1, nil, "", false, errUsage},
		{"help", []string{"-h"}, 0, 0, nil, "", false, flag.ErrHelp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			name := fs.String("name", "", "")
			isMain := fs.Bool("main", false, "")
			pos, err := parse(fs, tt.args, tt.min, tt.max)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v; want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if !reflect.DeepEqual(pos, tt.wantPos) || *name != tt.wantName || *isMain != tt.wantMain {
				t.Errorf("got pos %q name %q main %v; want %q %q %v", pos, *name, *isMain, tt.wantPos, tt.wantName, tt.wantMain)
			}
		})
	}
}

func TestCommandLineErrors(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	tests := []struct {
		name    string
		args    []string
		want    error
		wantErr string
	}{
		{"no command", nil, errUsage, "Usage: bridged"},
		{"unknown command", []string{"fly"}, errUsage, `unknown command "fly"`},
		{"groups without sub", []string{"groups"}, errUsage, "groups list|add"},
		{"add without name", []string{"groups", "add", "--home", home, "local:main"}, errUsage, "--name is required"},
		{"add without chat", []string{"groups", "add", "--home", home, "--name", "x"}, errUsage, "Usage: bridged groups add"},
		{"set nothing", []string{"groups", "set", "--home", home, "main"}, errUsage, "nothing to change"},
		{"chat --attach without file", []string{"chat", "--home", home, "-m", "hi", "main", "--attach"}, errUsage, "flag needs an argument: -attach"},
		{"bad requires-trigger", []string{"groups", "set", "--home", home, "--requires-trigger=maybe", "main"}, errUsage, "want true or false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := cli(t, ctx, nil, "", tt.args...)
			if !errors.Is(err, tt.want) {
				t.Errorf("got error %v; want %v", err, tt.want)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("stderr %q lacks %q", stderr, tt.wantErr)
			}
		})
	}
	if exitCode(errUsage) != 2 || exitCode(errors.New("x")) != 1 || exitCode(flag.ErrHelp) != 0 {
		t.Error("exit codes: want usage 2, failure 1, help 0")
	}
}

// TestGroupsWithDaemonStopped is the first thing a new user does.
func TestGroupsWithDaemonStopped(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	out, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "main", "--main", "local:main", "--home", home)
	if err != nil {
		t.Fatalf("groups add: %v", err)
	}
	if !strings.Contains(out, "Registered local:main") {
		t.Errorf("groups add printed %q; want a confirmation", out)
	}
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--home", home, "--name", "The Family", "--no-trigger", "120363@g.us"); err != nil {
		t.Fatalf("groups add family: %v", err)
	}
	out, _, err = cli(t, ctx, nil, "", "groups", "list", "--home", home)
	if err != nil {
		t.Fatalf("groups list: %v", err)
	}
	for _, want := range []string{"main", "local:main", "@Andy", "everything (main)", "the-family", "120363@g.us", "everything"} {
		if !strings.Contains(out, want) {
			t.Errorf("groups list lacks %q:\n%s", want, out)
		}
	}
	// A second main group is refused with the store's reason.
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--home", home, "--name", "other", "--main", "local:other"); err == nil || !strings.Contains(err.Error(), "main") {
		t.Errorf("second main group got %v; want an error about the main group", err)
	}
	out, _, err = cli(t, ctx, nil, "", "groups", "set", "the-family", "--home", home, "--model", "opus", "--requires-trigger=true", "--timeout", "45m")
	if err != nil {
		t.Fatalf("groups set: %v", err)
	}
	if !strings.Contains(out, "model opus") || !strings.Contains(out, "requires trigger true") {
		t.Errorf("groups set printed %q", out)
	}
	if _, _, err := cli(t, ctx, nil, "", "groups", "remove", "--home", home, "the-family"); err != nil {
		t.Fatalf("groups remove: %v", err)
	}
	if _, _, err := cli(t, ctx, nil, "", "groups", "remove", "--home", home, "the-family"); err == nil || !strings.Contains(err.Error(), `no group with folder "the-family"`) {
		t.Errorf("second remove got %v; want no such group", err)
	}
	out, _, err = cli(t, ctx, nil, "", "groups", "list", "--home", home)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "the-family") {
		t.Errorf("removed group still listed:\n%s", out)
	}
	// The settings went to the database under the home.
	db := openDB(t, home)
	g, err := db.Groups.ByFolder(ctx, "main")
	if err != nil || !g.IsMain || g.Chat != "local:main" {
		t.Errorf("stored main group %+v, %v; want main on local:main", g, err)
	}
}

// groups set --allow keeps who may wake a group's agent, normalised; groups
// list shows it; everyone clears it; a bad sender or everyone with others is
// refused.
func TestGroupsSetAllow(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--home", home, "--name", "fam", "local:fam"); err != nil {
		t.Fatal(err)
	}
	out, _, err := cli(t, ctx, nil, "", "groups", "set", "fam", "--home", home, "--allow", "+49 170 1234567", "--allow", "local:bob", "--allow", "admins", "--others", "drop")
	if err != nil {
		t.Fatalf("groups set --allow: %v", err)
	}
	want := "you, 491701234567@s.whatsapp.net, local:bob, admins (others dropped)"
	if !strings.Contains(out, want) {
		t.Errorf("groups set printed %q; want %q", out, want)
	}
	if out, _, _ := cli(t, ctx, nil, "", "groups", "list", "--home", home); !strings.Contains(out, want) {
		t.Errorf("groups list lacks %q:\n%s", want, out)
	}
	for _, bad := range [][]string{{"--allow", "bob"}, {"--allow", "everyone", "--allow", "local:bob"}, {"--others", "ignore"}} {
		if _, _, err := cli(t, ctx, nil, "", append([]string{"groups", "set", "fam", "--home", home}, bad...)...); err == nil {
			t.Errorf("groups set %v: no error; want a refusal", bad)
		}
	}
	if out, _, err := cli(t, ctx, nil, "", "groups", "set", "fam", "--home", home, "--allow", "everyone"); err != nil || !strings.Contains(out, "who may wake it: everyone") {
		t.Errorf("groups set --allow everyone: %q, %v; want everyone", out, err)
	}
	g, err := openDB(t, home).Groups.ByFolder(ctx, "fam")
	if err != nil || len(g.Allow) != 0 || g.Others != store.OthersDrop {
		t.Errorf("stored %+v, %v; want everyone allowed, others still dropped", g, err)
	}
}

func openDB(t *testing.T, home string) *store.DB {
	t.Helper()
	return storetest.OpenHome(t, home)
}

// fakeDaemon serves the control API on home's socket with a real store and
// local channel. reply, if set, answers every posted message.
type fakeDaemon struct {
	mu    sync.Mutex
	media []channel.Media // of the messages posted, in order
	db    *store.DB
	loc   *local.Channel
	turns *turns.Hub
	syncs atomic.Int32
	wg    sync.WaitGroup
}

func (d *fakeDaemon) SyncGroups(context.Context) error { d.syncs.Add(1); return nil }

func startDaemon(t *testing.T, home string, reply func(text string) []string) *fakeDaemon {
	t.Helper()
	return startDaemonWithStatus(t, home, reply, nil)
}

// startDaemonWithStatus is startDaemon whose live status comes from live.
func startDaemonWithStatus(t *testing.T, home string, reply func(text string) []string, live control.StatusSource) *fakeDaemon {
	t.Helper()
	d := &fakeDaemon{db: openDB(t, home), turns: turns.New(nil, nil)}
	d.loc = local.New(d.db, "Andy", func(ctx context.Context, _ ingest.Changed, m channel.Message) (store.MessageID, error) {
		id, _, err := d.db.Messages.Insert(ctx, store.Message{Chat: store.ChatID(m.Chat), ExternalID: m.ExternalID,
			Sender: m.Sender, SenderName: m.SenderName, Text: m.Text, SentAt: m.SentAt})
		if err != nil {
			return 0, err
		}
		if m.Media != nil {
			d.mu.Lock()
			d.media = append(d.media, *m.Media)
			d.mu.Unlock()
		}
		if reply == nil {
			return id, nil
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			for _, r := range reply(m.Text) {
				if _, err := d.loc.Send(context.Background(), channel.Outgoing{Chat: m.Chat, Text: r, ID: store.NewExternalID()}); err != nil {
					t.Errorf("reply: %v", err)
				}
			}
			// The turn ends after its replies; a message starting with
			// "fail" fails once, is retried and fails for good.
			if strings.HasPrefix(m.Text, "fail") {
				d.turns.Ended(turns.End{Chat: m.Chat, Result: turns.Failed, Upto: int64(id), Reason: "claude crashed", Attempt: 1, Attempts: 2})
				d.turns.Ended(turns.End{Chat: m.Chat, Result: turns.GaveUp, Upto: int64(id), Reason: "claude crashed again", Attempt: 2, Attempts: 2})
				return
			}
			d.turns.Ended(turns.End{Chat: m.Chat, Result: turns.Done, Upto: int64(id)})
		}()
		return id, nil
	}, zerolog.Nop())
	hm, err := bhome.New(home, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	uploads := hm.Uploads()
	srv, err := control.Listen(control.Options{
		Uploads:  &uploads,
		Socket:   filepath.Join(home, "bridged.sock"),
		Admin:    &control.Admin{DB: d.db, AssistantName: "Andy", Timezone: time.UTC},
		Local:    d.loc,
		Turns:    d.turns,
		Channels: []channel.Channel{d.loc},
		Groups:   d,
		Status:   live,
		Version:  "test",
		Log:      zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("control server: %v", err)
		}
		d.wg.Wait()
	})
	return d
}

func TestGroupsWithDaemonRunning(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	d := startDaemon(t, home, nil)
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "main", "--main", "local:main", "--home", home); err != nil {
		t.Fatalf("groups add: %v", err)
	}
	if got := d.syncs.Load(); got != 1 {
		t.Errorf("daemon synced groups %d times; want 1 (the change must go through the daemon)", got)
	}
	if _, _, err := cli(t, ctx, nil, "", "groups", "set", "--home", home, "--name", "Main room", "main"); err != nil {
		t.Fatalf("groups set: %v", err)
	}
	if got := d.syncs.Load(); got != 2 {
		t.Errorf("daemon synced groups %d times; want 2", got)
	}
	out, _, err := cli(t, ctx, nil, "", "groups", "list", "--home", home)
	if err != nil || !strings.Contains(out, "Main room") {
		t.Errorf("groups list got %q, %v; want the renamed group", out, err)
	}
}

func TestChatOnce(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	startDaemon(t, home, func(text string) []string {
		return []string{"echo: " + text, "and one more thing"}
	})
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "main", "--main", "local:main", "--home", home); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "family", "120363@g.us", "--home", home); err != nil {
		t.Fatal(err)
	}
	// No quiet period: it returns when the turn ended, with both replies.
	began := time.Now()
	out, _, err := cli(t, ctx, nil, "", "chat", "--home", home, "-m", "hello there", "main")
	if err != nil {
		t.Fatalf("chat -m: %v", err)
	}
	if out != "echo: hello there\nand one more thing\n" {
		t.Errorf("chat -m printed %q; want both replies, one per line", out)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("chat -m took %s; want it to end with the turn, well under a second", took)
	}
	out, stderr, err := cli(t, ctx, nil, "", "chat", "--home", home, "-m", "fail please", "main")
	if !errors.Is(err, errTurnFailed) || !strings.Contains(err.Error(), "claude crashed again") || exitCode(err) != 1 {
		t.Errorf("failing turn: got %v; want the turn's failure with its reason, exit code 1", err)
	}
	if !strings.Contains(stderr, "attempt 1 of 2 failed (claude crashed)") {
		t.Errorf("failing turn: stderr %q does not tell the failed attempt", stderr)
	}
	if out != "echo: fail please\nand one more thing\n" {
		t.Errorf("failing turn printed %q; want what the agent said before failing", out)
	}
	_, _, err = cli(t, ctx, nil, "", "chat", "--home", home, "-m", "hi", "family")
	if err == nil || err.Error() != "group family is a WhatsApp chat; talk to it in WhatsApp" {
		t.Errorf("chat to a WhatsApp group got %v; want the WhatsApp error", err)
	}
	_, _, err = cli(t, ctx, nil, "", "chat", "--home", home, "-m", "hi", "nobody")
	if err == nil || !strings.Contains(err.Error(), `no group with folder, chat id or name "nobody"`) {
		t.Errorf("chat to an unknown group got %v", err)
	}
}

// chat --attach posts each file as a message of its own, the first with the
// text as its caption, and waits for the turn that takes the last.
func TestChatAttach(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	d := startDaemon(t, home, func(text string) []string { return []string{"echo: " + text} })
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "main", "--main", "local:main", "--home", home); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	png, pdf := filepath.Join(dir, "chart.png"), filepath.Join(dir, "report.pdf")
	for _, f := range []string{png, pdf} {
		if err := os.WriteFile(f, []byte("content of "+f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, err := cli(t, ctx, nil, "", "chat", "--home", home, "-m", "have a look", "--attach", png, "main", "--attach", pdf)
	if err != nil {
		t.Fatalf("chat --attach: %v (stderr %s)", err, stderr)
	}
	if !strings.Contains(out, `echo: [document "report.pdf": downloading]`) {
		t.Errorf("chat --attach printed %q; want the reply to the last file's message", out)
	}
	d.mu.Lock()
	got := d.media
	d.mu.Unlock()
	if len(got) != 2 || got[0].Label != "image" || got[0].Head != "have a look\n" || got[1].Label != `document "report.pdf"` || got[1].Head != "" {
		t.Errorf("daemon got media %+v; want the image captioned, then the document", got)
	}

	if _, _, err := cli(t, ctx, nil, "", "chat", "--home", home, "--attach", filepath.Join(dir, "missing.png"), "main"); err == nil || !strings.Contains(err.Error(), "missing.png") {
		t.Errorf("attaching a missing file: got %v; want an error naming it", err)
	}
	if _, _, err := cli(t, ctx, nil, "", "chat", "--home", home, "--attach", dir, "main"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("attaching a directory: got %v; want not a regular file", err)
	}
	d.mu.Lock()
	n := len(d.media)
	d.mu.Unlock()
	if n != 2 {
		t.Errorf("%d files posted after the refused attachments; want still 2", n)
	}
}

func TestChatOnceTimesOut(t *testing.T) {
	home := newHome(t)
	startDaemon(t, home, nil)
	ctx := context.Background()
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "main", "--main", "local:main", "--home", home); err != nil {
		t.Fatal(err)
	}
	_, _, err := cli(t, ctx, nil, "", "chat", "--home", home, "--timeout", "300ms", "-m", "anyone?", "main")
	if err == nil || !strings.Contains(err.Error(), "no reply from main within 300ms") {
		t.Errorf("got %v; want a timeout error", err)
	}
}

// In the interactive chat, a line "/attach FILE" sends the file alone; a
// file that cannot be read is told and nothing is sent.
func TestChatInteractiveAttach(t *testing.T) {
	home := newHome(t)
	d := startDaemon(t, home, func(text string) []string { return []string{"echo: " + text} })
	ctx := context.Background()
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "main", "--main", "local:main", "--home", home); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	png := filepath.Join(dir, "chart 1.png")
	if err := os.WriteFile(png, []byte("png"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := "/attach " + filepath.Join(dir, "missing.png") + "\n/attach " + png + "\n"
	out, stderr, err := cli(t, ctx, map[string]string{"USER": "bob"}, in, "chat", "--home", home)
	if err != nil {
		t.Fatalf("chat: %v (stderr %s)", err, stderr)
	}
	if !strings.Contains(stderr, "missing.png") {
		t.Errorf("stderr %q does not tell of the missing file", stderr)
	}
	if !strings.Contains(out, "Andy: echo: [image: downloading]") {
		t.Errorf("chat printed %q; want the reply to the image", out)
	}
	d.mu.Lock()
	got := d.media
	d.mu.Unlock()
	if len(got) != 1 || got[0].Label != "image" || got[0].Head != "" || !strings.HasSuffix(got[0].Name, "chart_1.png") {
		t.Errorf("daemon got media %+v; want the one image, uncaptioned", got)
	}
}

func TestChatInteractive(t *testing.T) {
	home := newHome(t)
	startDaemon(t, home, func(text string) []string { return []string{"echo: " + text} })
	ctx := context.Background()
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "main", "--main", "local:main", "--home", home); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := cli(t, ctx, map[string]string{"USER": "bob"}, "first\n\nsecond\n", "chat", "--home", home)
	if err != nil {
		t.Fatalf("chat: %v (stderr %s)", err, stderr)
	}
	if n := strings.Count(stderr, "thinking…\n"); n != 2 {
		t.Errorf("stderr %q shows %d thinking lines; want one for each message's turn", stderr, n)
	}
	if !strings.Contains(out, "Andy: echo: first\n") || !strings.Contains(out, "Andy: echo: second\n") {
		t.Errorf("chat printed %q; want both echoes", out)
	}
	if strings.Contains(out, "bob: first") {
		t.Errorf("chat echoed the user's own message: %q", out)
	}
	if !strings.Contains(stderr, "as bob") {
		t.Errorf("stderr %q does not name the sender from $USER", stderr)
	}
}

func TestChatNeedsDaemon(t *testing.T) {
	_, _, err := cli(t, context.Background(), nil, "", "chat", "--home", newHome(t), "-m", "hi", "main")
	if err == nil || !strings.Contains(err.Error(), "bridged is not running") {
		t.Errorf("got %v; want 'bridged is not running'", err)
	}
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	home := newEmptyHome(t)
	out, _, err := cli(t, ctx, nil, "", "status", "--home", home)
	if err != nil || !strings.Contains(out, "no database yet") {
		t.Errorf("status on an empty home got %q, %v", out, err)
	}
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "main", "--main", "local:main", "--home", home); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, home)
	it, err := db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: "local:main", Text: "lost", Origin: store.OriginReply})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Outbox.MarkFailed(ctx, it.ID, "chat vanished"); err != nil {
		t.Fatal(err)
	}
	if err := db.Usage.AddAPI(ctx, store.APIUsage{Folder: "main", CostUSD: 0.125}); err != nil {
		t.Fatal(err)
	}
	// The CLI's own figure is a cross-check, shown as it drifts from the meter.
	if err := db.Usage.Add(ctx, store.Usage{Folder: "main", CostUSD: 0.5}); err != nil {
		t.Fatal(err)
	}
	out, _, err = cli(t, ctx, nil, "", "status", "--home", home, "--timezone", "UTC")
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	for _, want := range []string{"bridged is not running", "not paired", "Groups: 1", "0 pending, 1 failed", "outbox", "chat vanished", "Cost today: $0.1250 (UTC), metered by the credential proxy", "CLI reported $0.5000 for today's turns: it differs from the meter",
		" KB (" + filepath.Join(home, "store", "bridged.db") + "), answered messages, sent outbox rows, task runs and raw usage pruned after 90d",
		"Claude API: NO CREDENTIAL", "set ANTHROPIC_API_KEY (an API key) or CLAUDE_CODE_OAUTH_TOKEN"} {
		if !strings.Contains(out, want) {
			t.Errorf("stopped status lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = cli(t, ctx, map[string]string{"ANTHROPIC_API_KEY": "sk-ant-status-secret-1"}, "", "status", "--home", home, "--timezone", "UTC")
	if !strings.Contains(out, "Claude API: https://api.anthropic.com through the daemon's credential proxy (ANTHROPIC_API_KEY is set") || strings.Contains(out, "sk-ant-status-secret-1") {
		t.Errorf("status with a key:\n%s", out)
	}
	startDaemon(t, home, nil)
	out, _, err = cli(t, ctx, nil, "", "status", "--home", home, "--timezone", "UTC")
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	for _, want := range []string{"bridged is running", "version test", "local", "connected", "Containers: 0 running", "chat vanished", "Database: "} {
		if !strings.Contains(out, want) {
			t.Errorf("running status lacks %q:\n%s", want, out)
		}
	}
}

func TestTasksWithDaemonStopped(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "main", "--main", "local:main", "--home", home); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, home)
	next := time.Now().Add(time.Hour)
	tk, err := db.Tasks.Create(ctx, store.Task{Folder: "main", Chat: "local:main", Prompt: "water the plants", Kind: "interval", Value: "2h", NextRun: &next})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := cli(t, ctx, nil, "", "tasks", "list", "--home", home)
	if err != nil || !strings.Contains(out, string(tk.ID)) || !strings.Contains(out, "water the plants") || !strings.Contains(out, "interval 2h") {
		t.Errorf("tasks list got %q, %v", out, err)
	}
	if _, _, err := cli(t, ctx, nil, "", "tasks", "pause", "--home", home, string(tk.ID)); err != nil {
		t.Fatalf("tasks pause: %v", err)
	}
	if got, _ := db.Tasks.Get(ctx, tk.ID); got.Status != store.TaskPaused {
		t.Errorf("got status %s after pause; want paused", got.Status)
	}
	if _, _, err := cli(t, ctx, nil, "", "tasks", "resume", "--home", home, string(tk.ID)); err != nil {
		t.Fatalf("tasks resume: %v", err)
	}
	out, _, err = cli(t, ctx, nil, "", "tasks", "runs", "--home", home, string(tk.ID))
	if err != nil || !strings.Contains(out, "has not run yet") {
		t.Errorf("tasks runs got %q, %v", out, err)
	}
	if _, _, err := cli(t, ctx, nil, "", "tasks", "cancel", "--home", home, string(tk.ID)); err != nil {
		t.Fatalf("tasks cancel: %v", err)
	}
	if _, _, err := cli(t, ctx, nil, "", "tasks", "pause", "--home", home, string(tk.ID)); err == nil || !strings.Contains(err.Error(), "no task") {
		t.Errorf("pause of a cancelled task got %v; want no task", err)
	}
}

func TestConfigMasksSecrets(t *testing.T) {
	secret := "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"
	out, _, err := cli(t, context.Background(), map[string]string{"ANTHROPIC_API_KEY": secret}, "", "config", "--home", newHome(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, secret) || !strings.Contains(out, "ANTHROPIC_API_KEY=sk-ant-") {
		t.Errorf("config output leaks or hides the key entirely:\n%s", out)
	}
	if !strings.Contains(out, "BRIDGED_CONTAINER_UID=61000\n") || !strings.Contains(out, "BRIDGED_CONTAINER_GID=61000\n") {
		t.Errorf("config output lacks the container uid and gid:\n%s", out)
	}
	_, _, err = cli(t, context.Background(), map[string]string{"BRIDGED_MAX_CONTAINERS": "zero"}, "", "config", "--home", newHome(t))
	if err == nil || !strings.Contains(err.Error(), "BRIDGED_MAX_CONTAINERS") {
		t.Errorf("invalid setting got %v; want an error naming BRIDGED_MAX_CONTAINERS", err)
	}
}

func TestVersion(t *testing.T) {
	out, _, err := cli(t, context.Background(), nil, "", "version")
	if err != nil || !strings.HasPrefix(out, "bridged ") || len(strings.TrimSpace(out)) <= len("bridged") {
		t.Errorf("version printed %q, %v", out, err)
	}
}

func TestGroupsListAvailable(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--name", "family", "120363111@g.us", "--home", home); err != nil {
		t.Fatal(err)
	}
	out, _, err := cli(t, ctx, nil, "", "groups", "list", "--available", "--home", home)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "120363111@g.us") {
		t.Errorf("--available lacks the registered chat:\n%s", out)
	}
	db := openDB(t, home)
	if err := db.Chats.Upsert(ctx, store.Chat{ID: "120363222@g.us", Name: "Book club", Channel: "whatsapp", IsGroup: true, LastActivity: time.Now()}); err != nil {
		t.Fatal(err)
	}
	out, _, err = cli(t, ctx, nil, "", "groups", "list", "--available", "--home", home)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || !strings.Contains(lines[1], "120363222@g.us") || !strings.Contains(lines[1], "Book club") || !strings.Contains(lines[1], "group") {
		t.Errorf("--available does not list the book club first (most recent):\n%s", out)
	}
	if !strings.Contains(out, "family") {
		t.Errorf("--available does not say which chat is registered as family:\n%s", out)
	}
}

func TestDoctor(t *testing.T) {
	home := newHome(t)
	out, _, err := cli(t, context.Background(), nil, "", "doctor", "--home", home, "--mount-allowlist", filepath.Join(newHome(t), "none.json"))
	if !errors.Is(err, errChecksFailed) {
		t.Errorf("doctor without credentials got %v; want errChecksFailed", err)
	}
	for _, want := range []string{"config", "home", "docker", "image", "credentials  FAIL", "api          FAIL", "ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN", "whatsapp     warn", "bridged login", "allowlist", "clock", "daemon       ok    not running"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	bad := filepath.Join(newHome(t), "allow.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages/count_tokens" || r.Header.Get("X-Api-Key") != "sk-ant-xxxxxxxxxxxxxxxxxxxx" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"input_tokens":1}`)
	}))
	defer up.Close()
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-xxxxxxxxxxxxxxxxxxxx", "BRIDGED_ANTHROPIC_URL": up.URL}
	out, _, _ = cli(t, context.Background(), env, "", "doctor", "--home", home, "--mount-allowlist", bad)
	if !strings.Contains(out, "allowlist    FAIL") || !strings.Contains(out, "credentials  ok") || !strings.Contains(out, "api          ok") {
		t.Errorf("doctor with a broken allowlist and a key:\n%s", out)
	}
	env["ANTHROPIC_API_KEY"] = "sk-ant-wrongwrongwrongwrong"
	out, _, _ = cli(t, context.Background(), env, "", "doctor", "--home", home, "--mount-allowlist", bad)
	if !strings.Contains(out, "api          FAIL") || !strings.Contains(out, "refused the credential") || strings.Contains(out, "wrongwrongwrong") {
		t.Errorf("doctor with a refused key:\n%s", out)
	}
}

// Off a terminal, every message posted gets its "thinking…" line, even when
// the one before is still waiting for its reply; on a terminal the one line
// stays until cleared.
func TestThinkingLinePerPost(t *testing.T) {
	var b strings.Builder
	th := &thinking{w: &b}
	th.posted()
	th.show() // a poll while the turn runs
	th.posted()
	if got := strings.Count(b.String(), "thinking…\n"); got != 2 {
		t.Errorf("off a terminal, two posts wrote %q; want two lines", b.String())
	}
	b.Reset()
	tty := &thinking{w: &b, tty: true}
	tty.posted()
	tty.posted()
	if got := strings.Count(b.String(), "thinking…"); got != 1 {
		t.Errorf("on a terminal, two posts wrote %q; want one line until cleared", b.String())
	}
}
