package router

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// Someone else's /new is a message for the agent; the owner's ends the
// group's session: the idle container is closed, the chat is told, the
// command never reaches an agent and the next turn starts without a
// session to resume.
func TestOwnersNewEndsTheSession(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	ctx := context.Background()
	if err := h.db.Sessions.Set(ctx, store.Session{Folder: "main", SessionID: "old-session"}); err != nil {
		t.Fatal(err)
	}
	h.post(mainChat, "/new")
	run := h.nextRun()
	if !strings.Contains(run.spec.Input.Prompt, ">/new</message>") || run.spec.Input.SessionID != "old-session" {
		t.Fatalf("Alice's /new: prompt %q, session %q; want it handed to the agent in the old session", run.spec.Input.Prompt, run.spec.Input.SessionID)
	}
	run.result("fine")
	h.nextSend()

	if _, err := h.r.in.Inbound(ctx, channel.Message{Chat: string(mainChat), ExternalID: uuid.NewString(), Sender: "owner@x",
		SenderName: "Owner", Text: " /NEW ", SentAt: time.Now(), FromMe: true}); err != nil {
		t.Fatal(err)
	}
	if got := h.nextSend().Text; !strings.HasPrefix(got, "New session") {
		t.Errorf("the owner's /new was answered %q; want the new session told", got)
	}
	waitFile(t, filepath.Join(h.inputDir("main"), ipc.CloseName))
	run.exit(0)
	if s, err := h.db.Sessions.Get(ctx, "main"); err != nil || s.SessionID != "" {
		t.Errorf("session after the owner's /new: %+v, %v; want none", s, err)
	}

	h.post(mainChat, "hello again")
	next := h.nextRun()
	if next.spec.Input.SessionID != "" || strings.Contains(strings.ToLower(next.spec.Input.Prompt), "/new") {
		t.Errorf("the turn after /new: session %q, prompt %q; want a new session, without the command", next.spec.Input.SessionID, next.spec.Input.Prompt)
	}
	next.result("hi")
	h.nextSend()
	next.exit(0)
}
