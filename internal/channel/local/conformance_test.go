package local

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/channeltest"
	"github.com/bridged-app/bridged/internal/store"
)

// The channel conformance suite against the local channel.
func TestConformance(t *testing.T) {
	channeltest.Conform(t, Name, func(t *testing.T, rig *channeltest.Rig) channeltest.Network {
		return &localNetwork{t: t, db: rig.DB, c: New(rig.DB, "Andy", rig.Ingest.Inbound, zerolog.Nop())}
	})
}

type localNetwork struct {
	t  *testing.T
	db *store.DB
	c  *Channel
}

func (n *localNetwork) Channel() channel.Channel { return n.c }
func (n *localNetwork) Chat() string             { return "local:main" }
func (n *localNetwork) Mentions() []string       { return nil } // the trigger word only
func (n *localNetwork) MaxText() int             { return 0 }
func (n *localNetwork) Echo(string, string)      {} // Send stores the bot's message itself
func (n *localNetwork) Typing() bool             { return n.c.Typing(n.Chat()) }

func (n *localNetwork) SenderID(who channeltest.Who) string {
	if who == channeltest.Owner {
		return "you"
	}
	return Prefix + "bob"
}

// Deliver posts as the terminal does; the ack is Post's return, after the
// commit.
func (n *localNetwork) Deliver(who channeltest.Who, text, _ string) func() bool {
	var done atomic.Bool
	go func() {
		var err error
		if who == channeltest.Owner {
			_, err = n.c.Post(context.Background(), n.Chat(), "", text)
		} else {
			_, err = n.c.PostAs(context.Background(), n.Chat(), "bob", text)
		}
		if err != nil {
			n.t.Errorf("post %q: %v", text, err)
			return
		}
		done.Store(true)
	}()
	return done.Load
}

func (n *localNetwork) Received() []string {
	ms, err := n.db.Messages.Recent(context.Background(), store.ChatID(n.Chat()), 1000)
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		if m.IsBot {
			out = append(out, m.Text)
		}
	}
	return out
}
