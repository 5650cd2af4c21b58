package whatsapp

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/types"
)

// waitFor is how long a test waits for something that should happen at
// once, generous for a loaded machine.
const waitFor = 20 * time.Second

// holdPresence makes every chat presence sent to chat wait until release is
// closed; entered gets a value as each such send starts.
func holdPresence(tc *testClient, chat types.JID, release <-chan struct{}) (entered <-chan struct{}) {
	in := make(chan struct{}, 16)
	tc.wa.mu.Lock()
	tc.wa.chatPresence = func(ctx context.Context, jid types.JID, _ types.ChatPresence) error {
		if jid != chat {
			return nil
		}
		in <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tc.wa.mu.Unlock()
	return in
}

func TestTypingInOneChatDoesNotWaitForAnother(t *testing.T) {
	tc := connectedClient(t, nil)
	release := make(chan struct{})
	entered := holdPresence(tc, familyChat, release)
	slow := make(chan error, 1)
	go func() { slow <- tc.SetTyping(context.Background(), familyChat.String(), true) }()
	defer func() {
		close(release)
		if err := <-slow; err != nil {
			t.Errorf("SetTyping(family) once WhatsApp answered: %v", err)
		}
	}()
	select {
	case <-entered:
	case <-time.After(waitFor):
		t.Fatal("SetTyping(family) never sent its presence")
	}

	other := make(chan error, 1)
	go func() { other <- tc.SetTyping(context.Background(), otherChat.String(), true) }()
	select {
	case err := <-other:
		if err != nil {
			t.Errorf("SetTyping(other): %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("SetTyping(other) waited for the family chat's presence, still in flight")
	}

	// A change for the busy chat itself waits its turn, but no longer than
	// its caller does.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	same := make(chan error, 1)
	go func() { same <- tc.SetTyping(ctx, familyChat.String(), false) }()
	select {
	case err := <-same:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("SetTyping(family) behind one in flight, its context ended: err = %v; want the deadline", err)
		}
	case <-time.After(waitFor):
		t.Fatal("SetTyping(family) behind one in flight outlived its own context")
	}
}

func TestTypingStartedWhileClosingLeavesNoLoop(t *testing.T) {
	tc := connectedClient(t, nil)
	entered := holdPresence(tc, familyChat, tc.base.Done()) // WhatsApp answers as Close begins
	done := make(chan error, 1)
	go func() { done <- tc.SetTyping(context.Background(), familyChat.String(), true) }()
	select {
	case <-entered:
	case <-time.After(waitFor):
		t.Fatal("SetTyping never sent its presence")
	}
	if err := tc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("SetTyping across Close: %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("SetTyping did not return after Close")
	}
	tc.pres.mu.Lock()
	loop := tc.pres.typing[familyChat.String()]
	tc.pres.mu.Unlock()
	if loop != nil {
		t.Error("a typing loop was started after Close returned; Close must wait for every goroutine the client starts")
	}
}
