package local

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/channeltest"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/media"
	"github.com/bridged-app/bridged/internal/store"
)

// The channel conformance suite against the local channel.
func TestConformance(t *testing.T) {
	channeltest.Conform(t, Name, func(t *testing.T, rig *channeltest.Rig) channeltest.Network {
		hm, err := home.New(t.TempDir(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		files := t.TempDir()
		return &localNetwork{t: t, db: rig.DB, files: files, uploads: media.Uploads{Spool: hm.Uploads(), Log: zerolog.Nop()},
			c: New(rig.DB, "Andy", rig.Ingest.InboundSeen, zerolog.Nop()).KeepFiles(files, KeepLimits{})}
	})
}

type localNetwork struct {
	t       *testing.T
	db      *store.DB
	c       *Channel
	files   string        // where the channel delivers the agent's files
	uploads media.Uploads // the control API's spool of posted files
}

var _ channeltest.MediaNetwork = (*localNetwork)(nil)

// Fetcher is the uploads spool: the terminal posts a file through the
// control API, which keeps it there until the media pool copies it.
func (n *localNetwork) Fetcher() channeltest.Fetcher { return n.uploads }

// DeliverFile posts an image as `bridged chat --file` does: the file kept
// in the uploads spool, then the message with its media; the ack is the
// post's return, after the commit.
func (n *localNetwork) DeliverFile(who channeltest.Who, caption string, data []byte) func() bool {
	st, err := n.uploads.Spool.Stage("image.png", "image/png", "image", bytes.NewReader(data), 1<<20)
	if err != nil {
		n.t.Fatal(err)
	}
	key := home.UploadKey()
	if err := st.Keep(key); err != nil {
		n.t.Fatal(err)
	}
	ref, _ := json.Marshal(media.UploadRef{Key: key})
	m := channel.Media{Source: media.SourceUpload, Ref: ref, Label: "image", Name: "image.png", MIME: "image/png", Size: int64(len(data))}
	var done atomic.Bool
	go func() {
		var err error
		if who == channeltest.Owner {
			_, err = n.c.Post(context.Background(), n.Chat(), "", caption, m)
		} else {
			_, err = n.c.PostAs(context.Background(), n.Chat(), "bob", caption, m)
		}
		if err != nil {
			n.t.Errorf("post %q with an image: %v", caption, err)
			return
		}
		done.Store(true)
	}()
	return done.Load
}

// ReceivedFiles reads the files the channel delivered, in the order of
// their messages.
func (n *localNetwork) ReceivedFiles() [][]byte {
	ms, err := n.db.Messages.Recent(context.Background(), store.ChatID(n.Chat()), 1000)
	if err != nil {
		n.t.Fatal(err)
	}
	var out [][]byte
	for _, m := range ms {
		if !m.IsBot {
			continue
		}
		paths, _ := filepath.Glob(filepath.Join(n.files, "main"+keepSep+m.ExternalID, "*"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				n.t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	return out
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
