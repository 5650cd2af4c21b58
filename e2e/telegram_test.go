package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel/telegram/telegramtest"
	"github.com/bridged-app/bridged/internal/store"
)

// The Telegram channel against a fake Bot API on a loopback port: the
// daemon polls it (BRIDGED_TELEGRAM_API_URL) as it would Telegram.

const tgOwner = 777

var (
	tgGroup = telegramtest.Chat{ID: -100200, Title: "Family"}
	tgBob   = telegramtest.User{ID: 55, Name: "Bob"}
)

// telegramEnv is an env whose daemon polls srv as its Telegram bot.
func telegramEnv(t *testing.T, srv *telegramtest.Server) *env {
	e := newEnv(t, "--idle-timeout", "2s")
	e.extraEnv = append(e.extraEnv, "BRIDGED_TELEGRAM_TOKEN="+telegramtest.Token, "BRIDGED_TELEGRAM_API_URL="+srv.URL,
		fmt.Sprintf("BRIDGED_TELEGRAM_OWNER=%d", tgOwner))
	return e
}

// A group message that mentions the bot (@botname) wakes the group's agent,
// and its reply reaches the group through sendMessage, as plain text; a bot
// whose privacy mode is on is a warning in `bridged status`.
func TestE2ETelegramMentionGetsItsReply(t *testing.T) {
	parallel(t, light)
	srv := telegramtest.New(t)
	srv.SetPrivacy(true)
	e := telegramEnv(t, srv)
	e.mustCLI("groups", "add", "--name", "family", fmt.Sprintf("tg:%d", tgGroup.ID))
	e.start()
	text := "@" + telegramtest.BotName + " hello there"
	srv.Message(telegramtest.Msg{Chat: tgGroup, From: tgBob, Text: text,
		Entities: []telegramtest.Entity{{Type: "mention", Length: len(telegramtest.BotName) + 1}}})
	var reply telegramtest.Sent
	ok := srv.WaitFor(2*time.Minute, func() bool {
		for _, s := range srv.Sent() {
			if s.Chat == tgGroup.ID && strings.Contains(s.Text, "hello there") {
				reply = s
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no reply in the group within 2m; sent %+v", srv.Sent())
	}
	if !strings.HasPrefix(reply.Text, "echo: ") || !strings.Contains(reply.Text, "@Andy hello there") || reply.ParseMod != "" {
		t.Errorf("reply %+v; want the agent's echo of the message, the mention as the trigger, as plain text", reply)
	}
	if out := e.mustCLI("groups", "list", "--available"); !strings.Contains(out, fmt.Sprintf("tg:%d", tgGroup.ID)) {
		t.Errorf("groups list --available:\n%s\nwant the Telegram group", out)
	}
	if out := e.mustCLI("status"); !strings.Contains(out, "telegram") || !strings.Contains(out, "last poll") || !strings.Contains(out, "privacy mode on") {
		t.Errorf("status:\n%s\nwant the Telegram channel, its last poll and the privacy mode warning", out)
	}
}

// kill -9 between a poll and its commit, at random points, loses and
// doubles nothing: each message is stored once, whichever side of its
// commit the kill fell.
func TestE2ETelegramKill9BetweenPollAndCommit(t *testing.T) {
	parallel(t, light)
	srv := telegramtest.New(t)
	e := telegramEnv(t, srv)
	// Two groups a round, one message each: a group's first message in a
	// daemon's life asks for its admins, a point inside the update's
	// handling. A trigger is required: no message here starts a turn.
	const rounds = 10 // the ten kills
	var groups []telegramtest.Chat
	for i := range 2 * rounds {
		g := telegramtest.Chat{ID: int64(-100300 - i), Title: fmt.Sprintf("g%d", i)}
		groups = append(groups, g)
		e.mustCLI("groups", "add", "--name", g.Title, fmt.Sprintf("tg:%d", g.ID))
	}
	var last int64
	var want []string
	for i := range rounds {
		d := e.start()
		// Where this round's kill falls: as the poll's answer is written;
		// while the first or the second update is handled (its message
		// built, its group's admins asked), before its commit; or after
		// both commits, as the next poll would tell Telegram.
		var once sync.Once
		var roundLast atomic.Int64
		kill := func() { once.Do(func() { d.cmd.Process.Signal(syscall.SIGKILL) }) }
		point := rand.IntN(4)
		if point == 0 {
			srv.AfterUpdates(kill)
		} else {
			srv.OnCall(func(method string, p map[string]string) {
				offset, _ := strconv.ParseInt(p["offset"], 10, 64)
				switch {
				case point < 3 && method == "getChatAdministrators" && p["chat_id"] == strconv.FormatInt(groups[2*i+point-1].ID, 10):
					kill()
				case point == 3 && method == "getUpdates" && roundLast.Load() > 0 && offset > roundLast.Load():
					kill()
				}
			})
		}
		for j := range 2 {
			text := fmt.Sprintf("round %d message %d", i, j)
			want = append(want, text)
			last, _ = srv.Message(telegramtest.Msg{Chat: groups[2*i+j], From: tgBob, Text: text})
		}
		roundLast.Store(last)
		select {
		case <-d.done:
		case <-time.After(time.Minute):
			t.Fatalf("round %d: the daemon was not killed after a poll", i)
		}
		srv.AfterUpdates(nil)
		srv.OnCall(nil)
	}
	d := e.start()
	if !srv.WaitFor(time.Minute, func() bool { return srv.Offset() > last }) {
		t.Fatalf("the updates were not all committed within 1m (offset %d, last update %d)", srv.Offset(), last)
	}
	d.stop(t)
	db, err := store.Open(context.Background(), filepath.Join(e.home, "store", "bridged.db"), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ms []store.Message
	for _, g := range groups {
		got, err := db.Messages.Recent(context.Background(), store.ChatID(fmt.Sprintf("tg:%d", g.ID)), 1000)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, got...)
	}
	count := map[string]int{}
	for _, m := range ms {
		count[m.Text]++
	}
	for _, w := range want {
		if count[w] != 1 {
			t.Errorf("%q stored %d times; want once", w, count[w])
		}
	}
	if len(ms) != len(want) {
		t.Errorf("%d messages stored; want %d", len(ms), len(want))
	}
}
