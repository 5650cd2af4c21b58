package channeltest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/bridged-app/bridged/internal/channel"
)

func TestFakeRecordsAttemptsAndSends(t *testing.T) {
	f := New("fake")
	if !f.Owns("fake:a") || f.Owns("other:a") {
		t.Error("Owns: want fake:… only")
	}
	if st := f.Status().State; st != channel.StateConnected {
		t.Errorf("status at first = %s; want connected", st)
	}
	ctx := context.Background()
	down := errors.New("down")
	f.FailWith(func(m channel.Outgoing) error {
		if m.Text == "bad" {
			return down
		}
		return nil
	})
	if _, err := f.Send(ctx, channel.Outgoing{Chat: "fake:a", Text: "bad", ID: "1"}); !errors.Is(err, down) {
		t.Errorf("Send(bad) = %v; want the failure", err)
	}
	id, err := f.Send(ctx, channel.Outgoing{Chat: "fake:a", Text: "good", ID: "2"})
	if err != nil || id != SentID("2") {
		t.Errorf("Send(good) = %q, %v; want %q", id, err, SentID("2"))
	}
	if got := <-f.Sends(); got.Text != "good" {
		t.Errorf("Sends delivered %q; want good", got.Text)
	}
	if f.TriesOf("bad") != 1 || !slices.Equal(f.SentTexts(), []string{"good"}) || len(f.Tries()) != 2 {
		t.Errorf("tries %v, sent %q", f.Tries(), f.SentTexts())
	}
	_ = f.SetTyping(ctx, "fake:a", true)
	if got := <-f.Typings(); got != (Typing{"fake:a", true}) || len(f.Typing()) != 1 {
		t.Errorf("typing %+v, %+v", got, f.Typing())
	}
	f.SetStatus(channel.StateLoggedOut, "run `bridged login`")
	if st := f.Status(); st.State != channel.StateLoggedOut || st.Detail == "" {
		t.Errorf("status = %+v; want the one set", st)
	}
}
