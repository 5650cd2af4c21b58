package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"go.mau.fi/whatsmeow"

	"github.com/bridged-app/bridged/internal/channel"
)

func connectedClient(t *testing.T, edit func(*Options)) *testClient {
	t.Helper()
	tc := newTestClient(t, edit)
	tc.conn.setState(channel.StateConnected, "")
	return tc
}

func TestSendIDStableAcrossRetry(t *testing.T) {
	tc := connectedClient(t, nil)
	tc.wa.sendErrs = []error{whatsmeow.ErrMessageTimedOut}
	out := channel.Outgoing{Chat: familyChat.String(), Text: "It is sunny.", ID: "3EB0123456789ABCDEF0"}

	_, err := tc.Send(context.Background(), out)
	if err == nil {
		t.Fatal("first Send: err = nil; want the timeout")
	}
	if errors.Is(err, channel.ErrPermanent) {
		t.Fatalf("first Send: err = %v; a timeout must be retryable", err)
	}
	id, err := tc.Send(context.Background(), out)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	sent := tc.wa.sentMessages()
	if len(sent) != 2 {
		t.Fatalf("SendMessage called %d times; want 2", len(sent))
	}
	if sent[0].id != out.ID || sent[1].id != out.ID || id != out.ID {
		t.Errorf("ids = %q, %q, returned %q; want %q every time", sent[0].id, sent[1].id, id, out.ID)
	}
}

func TestSendDerivesIDFromNonWhatsAppID(t *testing.T) {
	tc := connectedClient(t, nil)
	out := channel.Outgoing{Chat: familyChat.String(), Text: "hi", ID: "outbox-42"}
	id1, err := tc.Send(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	if !isWAID(id1) || id1 != MessageID("outbox-42") {
		t.Errorf("id = %q; want MessageID(outbox-42) = %q in WhatsApp's format", id1, MessageID("outbox-42"))
	}
	if sent := tc.wa.sentMessages(); sent[0].id != id1 {
		t.Errorf("sent with id %q; want %q", sent[0].id, id1)
	}
}

// longReply is about 3,000 characters in paragraphs of about 400.
func longReply() (string, []string) {
	var paras []string
	for i := 1; len(strings.Join(paras, "\n\n")) < 3000; i++ {
		paras = append(paras, strings.TrimSpace(fmt.Sprintf("Paragraph %d. %s", i, strings.Repeat("Some words about the plan. ", 14))))
	}
	return strings.Join(paras, "\n\n"), paras
}

func TestLongReplySplitAtParagraphs(t *testing.T) {
	tc := connectedClient(t, nil)
	text, paras := longReply()
	id := NewMessageID()
	if _, err := tc.Send(context.Background(), channel.Outgoing{Chat: familyChat.String(), Text: text, ID: id}); err != nil {
		t.Fatal(err)
	}
	sent := tc.wa.sentMessages()
	if len(sent) < 2 {
		t.Fatalf("sent %d messages for %d characters; want several", len(sent), len(text))
	}
	var joined []string
	seen := map[string]bool{}
	for i, s := range sent {
		if n := utf8.RuneCountInString(s.text); n > MaxMessageRunes {
			t.Errorf("part %d has %d characters; want at most %d", i+1, n, MaxMessageRunes)
		}
		if !strings.HasPrefix(s.text, "Paragraph ") || !strings.HasSuffix(s.text, "plan.") {
			t.Errorf("part %d = %.30q…%q; want whole paragraphs", i+1, s.text, s.text[len(s.text)-10:])
		}
		if seen[s.id] {
			t.Errorf("part %d reuses id %s", i+1, s.id)
		}
		seen[s.id] = true
		if s.id != PartID(id, i) {
			t.Errorf("part %d id = %s; want %s", i+1, s.id, PartID(id, i))
		}
		joined = append(joined, s.text)
	}
	if got := strings.Join(joined, "\n\n"); got != strings.Join(paras, "\n\n") {
		t.Errorf("parts joined differ from the reply (order or content lost)")
	}
	if sent[0].id != id {
		t.Errorf("first part id = %s; want the outbox id %s", sent[0].id, id)
	}
}

func TestRetryAfterPartialSendResendsOnlyTheRest(t *testing.T) {
	tc := connectedClient(t, nil)
	text, _ := longReply()
	tc.wa.sendErrs = []error{nil, whatsmeow.ErrNotConnected}
	out := channel.Outgoing{Chat: familyChat.String(), Text: text, ID: NewMessageID()}
	if _, err := tc.Send(context.Background(), out); err == nil {
		t.Fatal("Send: err = nil; want the failure of part 2")
	}
	if _, err := tc.Send(context.Background(), out); err != nil {
		t.Fatalf("retry: %v", err)
	}
	sent := tc.wa.sentMessages()
	if sent[0].id != PartID(out.ID, 0) || sent[1].id != PartID(out.ID, 1) || sent[2].id != PartID(out.ID, 1) {
		t.Errorf("ids = %s, %s, %s; want part 1, part 2, part 2 again", sent[0].id, sent[1].id, sent[2].id)
	}
	for _, s := range sent[2:] {
		if s.id == out.ID {
			t.Errorf("retry resent part 1")
		}
	}
}

func TestSharedNumberPrefixOncePerMessage(t *testing.T) {
	text, _ := longReply()
	tests := []struct {
		name   string
		shared bool
		text   string
	}{
		{name: "long reply", shared: true, text: text},
		{name: "already prefixed", shared: true, text: "Andy: hello"},
		{name: "own number", shared: false, text: "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := connectedClient(t, func(o *Options) { o.SharedNumber = tt.shared })
			if _, err := tc.Send(context.Background(), channel.Outgoing{Chat: familyChat.String(), Text: tt.text, ID: NewMessageID()}); err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.wa.sentMessages() {
				n := strings.Count(s.text, "Andy: ")
				want := 0
				if tt.shared {
					want = 1
				}
				if n != want || (want == 1 && !strings.HasPrefix(s.text, "Andy: ")) {
					t.Errorf("part %d = %.40q…; want the prefix exactly %d time(s) at the start", i+1, s.text, want)
				}
				if utf8.RuneCountInString(s.text) > MaxMessageRunes {
					t.Errorf("part %d is %d characters with the prefix; want at most %d", i+1, utf8.RuneCountInString(s.text), MaxMessageRunes)
				}
			}
		})
	}
}

func TestSendPermanentFailures(t *testing.T) {
	tests := []struct {
		name     string
		chat     string
		text     string
		state    channel.ConnState
		sendErr  error
		wantPerm bool
	}{
		{name: "invalid chat", chat: "not a jid", text: "hi", state: channel.StateConnected, wantPerm: true},
		{name: "newsletter", chat: "123@newsletter", text: "hi", state: channel.StateConnected, wantPerm: true},
		{name: "empty text", chat: familyChat.String(), text: "  ", state: channel.StateConnected, wantPerm: true},
		{name: "not paired", chat: familyChat.String(), text: "hi", state: channel.StateNotPaired, wantPerm: true},
		{name: "logged out", chat: familyChat.String(), text: "hi", state: channel.StateLoggedOut, wantPerm: true},
		{name: "not in group", chat: familyChat.String(), text: "hi", state: channel.StateConnected,
			sendErr: fmt.Errorf("failed to get group members: %w", whatsmeow.ErrNotInGroup), wantPerm: true},
		{name: "server error", chat: familyChat.String(), text: "hi", state: channel.StateConnected,
			sendErr: fmt.Errorf("%w 479", whatsmeow.ErrServerReturnedError), wantPerm: true},
		{name: "not connected", chat: familyChat.String(), text: "hi", state: channel.StateReconnecting,
			sendErr: whatsmeow.ErrNotConnected, wantPerm: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestClient(t, nil)
			tc.conn.setState(tt.state, "")
			if tt.sendErr != nil {
				tc.wa.sendErrs = []error{tt.sendErr}
			}
			_, err := tc.Send(context.Background(), channel.Outgoing{Chat: tt.chat, Text: tt.text, ID: NewMessageID()})
			if err == nil {
				t.Fatal("Send: err = nil; want an error")
			}
			if got := errors.Is(err, channel.ErrPermanent); got != tt.wantPerm {
				t.Errorf("permanent = %v (%v); want %v", got, err, tt.wantPerm)
			}
			if tt.sendErr != nil && !errors.Is(err, tt.sendErr) && !strings.Contains(err.Error(), tt.sendErr.Error()) {
				t.Errorf("err = %v; want the reason %v kept", err, tt.sendErr)
			}
		})
	}
}

func TestSplitText(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		limit int
		want  []string
	}{
		{name: "short", text: "hello", limit: 10, want: []string{"hello"}},
		{name: "paragraphs packed", text: "aaa\n\nbbb\n\ncccc", limit: 8, want: []string{"aaa\n\nbbb", "cccc"}},
		{name: "lines", text: "line one\nline two\nline three", limit: 18, want: []string{"line one\nline two", "line three"}},
		{name: "sentences", text: "First one. Second one! Third one?", limit: 12, want: []string{"First one.", "Second one!", "Third one?"}},
		{name: "words", text: "alpha beta gamma delta", limit: 11, want: []string{"alpha beta", "gamma delta"}},
		{name: "long word cut", text: "abcdefghij", limit: 4, want: []string{"abcd", "efgh", "ij"}},
		{name: "runes not bytes", text: "äöü äöü", limit: 3, want: []string{"äöü", "äöü"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitText(tt.text, tt.limit)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("splitText(%q, %d) = %q; want %q", tt.text, tt.limit, got, tt.want)
			}
		})
	}
}

func TestMessageIDs(t *testing.T) {
	id := NewMessageID()
	if !isWAID(id) || len(id) != 20 || !strings.HasPrefix(id, "3EB0") {
		t.Errorf("NewMessageID() = %q; want 3EB0 and 16 hex digits", id)
	}
	if MessageID(id) != id {
		t.Errorf("MessageID(%q) = %q; want it unchanged", id, MessageID(id))
	}
	if first, again := PartID(id, 1), PartID(id, 1); first == PartID(id, 2) || first != again || !isWAID(first) {
		t.Errorf("part ids %q, %q: want distinct, stable, WhatsApp-shaped", PartID(id, 1), PartID(id, 2))
	}
}

func TestTypingComposingThenPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tc := connectedClient(t, nil)
		ctx := context.Background()
		if err := tc.SetTyping(ctx, familyChat.String(), true); err != nil {
			t.Fatal(err)
		}
		time.Sleep(typingRefresh + time.Second) // fake time: the indicator is refreshed
		synctest.Wait()
		if err := tc.SetTyping(ctx, familyChat.String(), false); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * typingRefresh) // nothing after paused
		synctest.Wait()
		composing, paused := "composing "+familyChat.String(), "paused "+familyChat.String()
		want := []string{composing, composing, paused}
		if got := chatPresences(tc.wa.presenceLog()); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("presences = %q; want %q", got, want)
		}
		_ = tc.Close()
	})
}

// chatPresences is the chats' typing states in log, without the account's.
func chatPresences(log []string) []string {
	var out []string
	for _, p := range log {
		if strings.Contains(p, " ") {
			out = append(out, p)
		}
	}
	return out
}

func TestTypingWhileDisconnectedSendsNothing(t *testing.T) {
	tc := newTestClient(t, nil)
	tc.conn.setState(channel.StateReconnecting, detailReconnecting)
	if err := tc.SetTyping(context.Background(), familyChat.String(), true); err != nil {
		t.Fatalf("SetTyping: %v", err)
	}
	if got := tc.wa.presenceLog(); len(got) != 0 {
		t.Errorf("presences = %q; want none while disconnected", got)
	}
}
