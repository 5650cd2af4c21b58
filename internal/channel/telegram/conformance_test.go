package telegram

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/channeltest"
	"github.com/bridged-app/bridged/internal/channel/telegram/telegramtest"
)

// The channel conformance suite against a fake Bot API.
func TestConformance(t *testing.T) {
	channeltest.Conform(t, ChannelName, func(t *testing.T, rig *channeltest.Rig) channeltest.Network {
		srv := telegramtest.New(t)
		c, err := New(Options{Token: telegramtest.Token, APIURL: srv.URL, Owner: owner, AssistantName: "Andy",
			Sink: StoreSink{In: rig.Ingest, DB: rig.DB}, Log: zerolog.Nop(), PollTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c.callTimeout, c.typingEvery = 2*time.Second, 50*time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(func() { cancel(); c.Wait() })
		if err := c.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		return &tgNetwork{srv: srv, c: c}
	})
}

type tgNetwork struct {
	srv *telegramtest.Server
	c   *Client
}

func (n *tgNetwork) Channel() channel.Channel { return n.c }
func (n *tgNetwork) Chat() string             { return ChatID(group) }
func (n *tgNetwork) MaxText() int             { return MaxMessageUnits }

func (n *tgNetwork) user(who channeltest.Who) telegramtest.User {
	if who == channeltest.Owner {
		return ownerUser
	}
	return bob
}

func (n *tgNetwork) SenderID(who channeltest.Who) string { return SenderID(n.user(who).ID) }

func (n *tgNetwork) Mentions() []string {
	return []string{"mention", "text_mention", "text_link", "command", "reply"}
}

func (n *tgNetwork) Deliver(who channeltest.Who, text, mention string) func() bool {
	m := telegramtest.Msg{Chat: groupChat, From: n.user(who), Text: text}
	at := len([]rune(text)) + 1
	switch mention {
	case "mention":
		m.Text += " @" + telegramtest.BotName
		m.Entities = []telegramtest.Entity{{Type: "mention", Offset: at, Length: len(telegramtest.BotName) + 1}}
	case "text_mention":
		m.Text += " Andy"
		m.Entities = []telegramtest.Entity{{Type: "text_mention", Offset: at, Length: 4, UserID: telegramtest.BotID}}
	case "text_link":
		m.Text += " bot"
		m.Entities = []telegramtest.Entity{{Type: "text_link", Offset: at, Length: 3, URL: "tg://user?id=" + strconv.FormatInt(telegramtest.BotID, 10)}}
	case "command":
		m.Text += " /ask@" + telegramtest.BotName
		m.Entities = []telegramtest.Entity{{Type: "bot_command", Offset: at, Length: len(telegramtest.BotName) + 5}}
	case "reply":
		m.ReplyTo, m.ReplyToBot = 1, true
	}
	upd, _ := n.srv.Message(m)
	return func() bool { return n.srv.Offset() > upd }
}

// Echo: a bot never receives its own messages; one that comes anyway
// (its id as sender) is delivered.
func (n *tgNetwork) Echo(sentID, text string) {
	n.srv.Message(telegramtest.Msg{Chat: groupChat, From: telegramtest.User{ID: telegramtest.BotID, Name: "Andy"}, Text: text})
}

func (n *tgNetwork) Received() []string {
	var out []string
	for _, s := range n.srv.Sent() {
		out = append(out, s.Text)
	}
	return out
}

func (n *tgNetwork) Typing() bool { return len(n.srv.Actions()) > 0 }

var _ channeltest.MediaNetwork = (*tgNetwork)(nil)

// Fetcher is the channel: it downloads a message's file with getFile.
func (n *tgNetwork) Fetcher() channeltest.Fetcher { return n.c }

func (n *tgNetwork) DeliverFile(who channeltest.Who, caption string, data []byte) func() bool {
	upd, _ := n.srv.Message(telegramtest.Msg{Chat: groupChat, From: n.user(who), Text: caption,
		File: &telegramtest.File{Kind: "photo", ID: fmt.Sprintf("img%d", time.Now().UnixNano()), Data: data}})
	return func() bool { return n.srv.Offset() > upd }
}

func (n *tgNetwork) ReceivedFiles() [][]byte {
	var out [][]byte
	for _, s := range n.srv.Sent() {
		if s.FileData != nil {
			out = append(out, s.FileData)
		}
	}
	return out
}
