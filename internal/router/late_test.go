package router

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/google/uuid"
)

// A backlog delivered long after it was sent (WhatsApp's history sync or
// offline queue after a long disconnect) is stored as context, its trigger
// starts no turn, the chat is told once, and a fresh trigger in the same
// chat starts a turn that reads the late messages too.
func TestLateBacklogDoesNotWakeTheAgent(t *testing.T) {
	tests := []struct {
		name   string
		chat   store.ChatID
		folder string
		late   []string // sent an hour ago, delivered now
	}{
		{name: "trigger group", chat: famChat, folder: "fam", late: []string{"anyone home?", "@" + testName + " what's the weather?"}},
		{name: "main group", chat: mainChat, folder: "main", late: []string{"@" + testName + " remind me at 9", "never mind"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.start()
			ctx := context.Background()
			sent := time.Now().Add(-time.Hour)
			for i, text := range tt.late {
				if _, err := h.r.in.Inbound(ctx, channel.Message{Chat: string(tt.chat), ExternalID: "late-" + string(rune('a'+i)),
					Sender: "alice@x", SenderName: "Alice", Text: text, SentAt: sent.Add(time.Duration(i) * time.Second)}); err != nil {
					t.Fatalf("inbound: %v", err)
				}
			}
			notice := h.nextSend()
			if notice.Chat != string(tt.chat) || !strings.Contains(notice.Text, "received messages sent more than 10 minutes ago") {
				t.Fatalf("notice: got %q in %s; want one line in %s saying messages were seen late", notice.Text, notice.Chat, tt.chat)
			}
			stored, err := h.db.Messages.After(ctx, tt.chat, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range stored {
				if !m.IsBot && !m.Late {
					t.Fatalf("stored %q without the late flag", m.Text)
				}
			}
			if n := h.rt.starts(); n != 0 {
				t.Fatalf("containers started for a late backlog: %d; want 0", n)
			}

			h.post(tt.chat, "@"+testName+" are you there?")
			run := h.nextRun()
			for _, want := range append(tt.late, "are you there?") {
				if !strings.Contains(run.spec.Input.Prompt, strings.ReplaceAll(want, "'", "&apos;")) {
					t.Fatalf("prompt %q; want the late message %q as context", run.spec.Input.Prompt, want)
				}
			}
			run.result("here")
			if got := h.nextSend(); got.Text != "here" {
				t.Fatalf("reply: got %q; want %q (the late notice is told once)", got.Text, "here")
			}
			run.exit(0)
			h.waitIdle(tt.folder)
			if n := h.rt.starts(); n != 1 {
				t.Fatalf("containers started: %d; want 1, for the fresh trigger", n)
			}
		})
	}
}

func TestLateWindowIsConfigurable(t *testing.T) {
	// late stores a message sent age ago through h's ingest and reports
	// whether it was stored late.
	late := func(h *harness, age time.Duration) bool {
		t.Helper()
		ctx := context.Background()
		ext := uuid.NewString()
		if _, err := h.r.in.Inbound(ctx, channel.Message{Chat: string(mainChat), ExternalID: ext, Sender: "alice@x",
			Text: "old news", SentAt: time.Now().Add(-age)}); err != nil {
			t.Fatal(err)
		}
		msgs, err := h.db.Messages.Recent(ctx, mainChat, 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.ExternalID == ext {
				return m.Late
			}
		}
		t.Fatalf("message sent %s ago not stored", age)
		return false
	}
	h := newHarness(t, func(c *Config) { c.LateWindow = 2 * time.Hour })
	if late(h, time.Hour) {
		t.Fatalf("an hour-old message is late with a 2h window")
	}
	if !late(h, 3*time.Hour) {
		t.Fatalf("a 3h-old message is not late with a 2h window")
	}
	d := newHarness(t, nil)
	if d.r.cfg.LateWindow != DefaultLateWindow || late(d, 9*time.Minute) || !late(d, 11*time.Minute) {
		t.Fatalf("default window: got %s; want %s", d.r.cfg.LateWindow, DefaultLateWindow)
	}
}
