package router

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/store"
)

// fakeMedia records the media the router hands over.
type fakeMedia struct {
	mu    sync.Mutex
	added []store.Media
}

func (f *fakeMedia) Add(m store.Media) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.added = append(f.added, m)
}

// A message with media waits for it: no container starts, and messages
// after it wait too, until the media settled; then one run takes them all,
// with the final placeholder in the prompt.
func TestMessageWaitsForItsMedia(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil)
		fm := &fakeMedia{}
		in, err := ingest.New(ingest.Config{DB: h.r.db, Media: fm, LateWindow: h.r.cfg.LateWindow, Log: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		h.r.in = in
		h.start()
		ctx := context.Background()
		h.post(mainChat, "before")
		id, err := h.r.in.Inbound(ctx, channel.Message{
			Chat: string(mainChat), ExternalID: uuid.NewString(), Sender: "alice@x", SenderName: "Alice", SentAt: time.Now(),
			Text: "ignored while media is pending",
			Media: &channel.Media{Source: "upload", Ref: []byte(`{"key":"up-1"}`), Label: "image", Name: "a.jpg",
				MIME: "image/jpeg", Size: 3, Head: "look at this\n"},
		})
		if err != nil || id == 0 {
			t.Fatalf("Inbound with media = %d, %v", id, err)
		}
		h.post(mainChat, "after")
		synctest.Wait()

		fm.mu.Lock()
		added := append([]store.Media(nil), fm.added...)
		fm.mu.Unlock()
		if len(added) != 1 || added[0].MessageID != id || added[0].Head != "look at this\n" || string(added[0].Ref) != `{"key":"up-1"}` {
			t.Fatalf("media handed to the queue = %+v; want the image of message %d", added, id)
		}
		var first *fakeRun
		select {
		case first = <-h.rt.started:
		default:
			t.Fatalf("no run for the message before the media; want one")
		}
		if p := first.spec.Input.Prompt; !strings.Contains(p, ">before</message>") || strings.Contains(p, "after") || strings.Contains(p, "look at this") {
			t.Fatalf("first prompt = %q; want only the message before the media", p)
		}
		first.result("ok")
		h.nextSend()
		first.exit(0)
		synctest.Wait()
		if n := h.rt.starts(); n != 1 {
			t.Fatalf("containers started while the media is pending = %d; want 1", n)
		}

		if ok, err := h.db.Media.Settle(ctx, id, store.MediaSaved, "[image: inbox/a.jpg]"); err != nil || !ok {
			t.Fatalf("SettleMedia = %v, %v", ok, err)
		}
		h.r.in.MediaSettled(mainChat)
		run := h.nextRun()
		p := run.spec.Input.Prompt
		if !strings.Contains(p, "look at this\n[image: inbox/a.jpg]</message>") || !strings.Contains(p, ">after</message>") || strings.Contains(p, ">before</message>") {
			t.Fatalf("prompt after the media settled = %q; want the image's placeholder and the later message", p)
		}
		run.result("done")
		h.nextSend()
		run.exit(0)
		synctest.Wait()
	})
}

// Without a media queue a message's media is not fetched, and its
// placeholder says so; the message is not held.
func TestMediaWithoutAQueueIsNotHeld(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	if _, err := h.r.in.Inbound(context.Background(), channel.Message{
		Chat: string(mainChat), ExternalID: uuid.NewString(), Sender: "alice@x", SentAt: time.Now(),
		Media: &channel.Media{Source: "upload", Label: "image", Name: "a.jpg"},
	}); err != nil {
		t.Fatal(err)
	}
	run := h.nextRun()
	if p := run.spec.Input.Prompt; !strings.Contains(p, "[image: not downloaded]") {
		t.Fatalf("prompt = %q; want the not-downloaded placeholder", p)
	}
	run.result("ok")
	h.nextSend()
	run.exit(0)
	h.waitIdle("main")
}
