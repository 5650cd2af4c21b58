package telegram

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/bridged-app/bridged/internal/approvals"
	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/telegram/telegramtest"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/media"
	"github.com/bridged-app/bridged/internal/outbox"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// TestMain fails the package's tests when a goroutine one of them started
// still runs after the last.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	owner int64 = 777
	group int64 = -100200
)

var (
	groupChat = telegramtest.Chat{ID: group, Title: "Family"}
	ownerUser = telegramtest.User{ID: owner, Name: "Owner"}
	bob       = telegramtest.User{ID: 55, Name: "Bob"}
)

// rig is a client polling a fake Bot API into a real store through the
// ingest, with the approvals answering in the main chat.
type rig struct {
	t    *testing.T
	srv  *telegramtest.Server
	db   *store.DB
	in   *ingest.Ingest
	ap   *approvals.Service
	c    *Client
	stop context.CancelFunc
	// callTimeout is the client's (2 s when zero).
	callTimeout time.Duration
	sink        Sink
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{t: t, srv: telegramtest.New(t), db: storetest.Open(t)}
	ctx := context.Background()
	if _, err := r.db.Groups.Add(ctx, store.Group{Chat: store.ChatID(ChatID(group)), Folder: "family", Trigger: "@Andy", RequiresTrigger: true, IsMain: true}); err != nil {
		t.Fatal(err)
	}
	r.ap = approvals.New(r.db, outbox.NewPoster(r.db, outbox.NewSignal()), time.Minute, zerolog.Nop())
	var err error
	r.in, err = ingest.New(ingest.Config{DB: r.db, LateWindow: time.Hour, Log: zerolog.Nop(),
		ChannelOf: func(string) string { return ChannelName },
		Answers:   func(ctx context.Context, m channel.Message) bool { return r.ap.Answer(ctx, m) }})
	if err != nil {
		t.Fatal(err)
	}
	r.sink = StoreSink{In: r.in, DB: r.db}
	return r
}

// start connects a new client (a restart, when one ran before).
func (r *rig) start(sink Sink) *Client {
	r.t.Helper()
	if sink == nil {
		sink = r.sink
	}
	c, err := New(Options{Token: telegramtest.Token, APIURL: r.srv.URL, Owner: owner, AssistantName: "Andy", Sink: sink,
		Log: zerolog.Nop(), PollTimeout: time.Second})
	if err != nil {
		r.t.Fatal(err)
	}
	c.callTimeout, c.typingEvery, c.firstBackoff = 2*time.Second, 50*time.Millisecond, 20*time.Millisecond
	if r.callTimeout > 0 {
		c.callTimeout = r.callTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Connect(ctx); err != nil {
		r.t.Fatal(err)
	}
	r.c, r.stop = c, cancel
	r.t.Cleanup(func() { cancel(); c.Wait() })
	return c
}

// stored returns the messages stored for the group's chat.
func (r *rig) stored() []store.Message {
	r.t.Helper()
	ms, err := r.db.Messages.Recent(context.Background(), store.ChatID(ChatID(group)), 100)
	if err != nil {
		r.t.Fatal(err)
	}
	return ms
}

// waitStored waits until n messages are stored and the offset is past upd.
func (r *rig) waitCommitted(upd int64) {
	r.t.Helper()
	ok := r.srv.WaitFor(20*time.Second, func() bool {
		n, _ := r.db.Polls.Next(context.Background(), ChannelName)
		return n > upd
	})
	if !ok {
		r.t.Fatalf("update %d not committed within 20s", upd)
	}
}

// A message is committed with its update, and Telegram hears the offset
// past it only in a poll after the commit.
func TestInboundCommittedBeforeConfirmed(t *testing.T) {
	r := newRig(t)
	r.start(nil)
	upd, id := r.srv.Message(telegramtest.Msg{Chat: groupChat, From: bob, Text: "hello @" + telegramtest.BotName + " how are you",
		Entities: []telegramtest.Entity{{Type: "mention", Offset: 6, Length: len(telegramtest.BotName) + 1}}})
	r.waitCommitted(upd)
	if !r.srv.WaitFor(5*time.Second, func() bool { return r.srv.Offset() == upd+1 }) {
		t.Fatalf("offset confirmed to Telegram = %d; want %d", r.srv.Offset(), upd+1)
	}
	ms := r.stored()
	if len(ms) != 1 {
		t.Fatalf("%d messages stored; want 1", len(ms))
	}
	m := ms[0]
	if m.ExternalID != strconv.Itoa(id) || !m.Mentioned || m.Text != "hello @Andy how are you" || m.Sender != SenderID(bob.ID) || m.FromMe || m.IsBot {
		t.Errorf("stored %+v; want the mention rewritten to @Andy, Mentioned, from Bob", m)
	}
	chat, err := r.db.Chats.Get(context.Background(), store.ChatID(ChatID(group)))
	if err != nil || chat.Channel != ChannelName || !chat.IsGroup || chat.Name != "Family" {
		t.Errorf("chat = %+v, %v; want the Telegram group Family", chat, err)
	}
}

// Every mention form of the bot, and a reply to it, sets Mentioned; an
// other bot's command or an ordinary message does not.
func TestMentionForms(t *testing.T) {
	name := telegramtest.BotName
	cases := []struct {
		what string
		msg  telegramtest.Msg
		want bool
	}{
		{"mention", telegramtest.Msg{Text: "@" + strings.ToUpper(name) + " hi", Entities: []telegramtest.Entity{{Type: "mention", Length: len(name) + 1}}}, true},
		{"text_mention", telegramtest.Msg{Text: "Andy hi", Entities: []telegramtest.Entity{{Type: "text_mention", Length: 4, UserID: telegramtest.BotID}}}, true},
		{"text_link", telegramtest.Msg{Text: "bot hi", Entities: []telegramtest.Entity{{Type: "text_link", Length: 3, URL: "tg://user?id=" + strconv.FormatInt(telegramtest.BotID, 10)}}}, true},
		{"command", telegramtest.Msg{Text: "/status@" + name, Entities: []telegramtest.Entity{{Type: "bot_command", Length: len(name) + 8}}}, true},
		{"reply to the bot", telegramtest.Msg{Text: "and then?", ReplyTo: 99, ReplyToBot: true}, true},
		{"emoji before the mention", telegramtest.Msg{Text: "👋 @" + name, Entities: []telegramtest.Entity{{Type: "mention", Offset: 3, Length: len(name) + 1}}}, true},
		{"another bot's command", telegramtest.Msg{Text: "/status@other_bot", Entities: []telegramtest.Entity{{Type: "bot_command", Length: 17}}}, false},
		{"someone else's mention", telegramtest.Msg{Text: "@bob hi", Entities: []telegramtest.Entity{{Type: "mention", Length: 4}}}, false},
		{"a reply to someone else", telegramtest.Msg{Text: "yes", ReplyTo: 98}, false},
		{"plain", telegramtest.Msg{Text: "hello all"}, false},
	}
	r := newRig(t)
	r.start(nil)
	var last int64
	for _, tc := range cases {
		tc.msg.Chat, tc.msg.From = groupChat, bob
		last, _ = r.srv.Message(tc.msg)
	}
	r.waitCommitted(last)
	ms := r.stored()
	if len(ms) != len(cases) {
		t.Fatalf("%d stored; want %d", len(ms), len(cases))
	}
	for i, tc := range cases {
		if ms[i].Mentioned != tc.want {
			t.Errorf("%s: Mentioned = %v; want %v (text %q)", tc.what, ms[i].Mentioned, tc.want, ms[i].Text)
		}
	}
	if ms[5].Text != "👋 @Andy" {
		t.Errorf("mention after an emoji (two UTF-16 units) rewritten to %q; want %q", ms[5].Text, "👋 @Andy")
	}
}

// crashSink stops the client when it is handed update `at`, before
// anything of it is committed: a kill between the poll and the commit.
type crashSink struct {
	Sink
	at   int64
	stop context.CancelFunc
}

func (s crashSink) Inbound(ctx context.Context, m channel.Message, ack store.PollAck) (store.MessageID, error) {
	if ack.UpdateID == s.at {
		s.stop()
		return 0, context.Canceled
	}
	return s.Sink.Inbound(ctx, m, ack)
}

// A restart between the poll and the commit loses nothing and doubles
// nothing: the update comes again from the committed offset; duplicate
// updates in one answer are stored once.
func TestRestartBetweenPollAndCommit(t *testing.T) {
	r := newRig(t)
	u1, _ := r.srv.Message(telegramtest.Msg{Chat: groupChat, From: bob, Text: "one"})
	u2, _ := r.srv.Message(telegramtest.Msg{Chat: groupChat, From: bob, Text: "two"})
	ctx, cancel := context.WithCancel(context.Background())
	c, err := New(Options{Token: telegramtest.Token, APIURL: r.srv.URL, Owner: owner, Sink: crashSink{Sink: r.sink, at: u2, stop: cancel},
		Log: zerolog.Nop(), PollTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.callTimeout = 2 * time.Second
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	c.Wait()
	if n, _ := r.db.Polls.Next(context.Background(), ChannelName); n != u1+1 {
		t.Fatalf("offset after the crash = %d; want %d (update one committed, two not)", n, u1+1)
	}
	if r.srv.Offset() > u1+1 {
		t.Fatalf("Telegram heard offset %d before update %d was committed", r.srv.Offset(), u2)
	}
	r.srv.Inject("getUpdates", telegramtest.Fault{Duplicate: true})
	r.start(nil)
	r.waitCommitted(u2)
	var texts []string
	for _, m := range r.stored() {
		texts = append(texts, m.Text)
	}
	if strings.Join(texts, ",") != "one,two" {
		t.Errorf("stored %q; want one, two once each", texts)
	}
}

// Faults of getUpdates (429 with retry_after, 409, 5xx, a timeout) delay
// the message but lose and double nothing; 409 is a condition while it
// lasts.
func TestPollFaults(t *testing.T) {
	r := newRig(t)
	for _, f := range []telegramtest.Fault{{Code: 429, RetryAfter: 1}, {Code: 409, Description: "Conflict: terminated by other getUpdates request"}, {Code: 502}, {Hang: true}} {
		r.srv.Inject("getUpdates", f)
	}
	start := time.Now()
	upd, _ := r.srv.Message(telegramtest.Msg{Chat: groupChat, From: bob, Text: "through it all"})
	r.callTimeout = 500 * time.Millisecond // the hang costs the poll's 1 s and this
	c := r.start(nil)
	sawConflict := r.srv.WaitFor(10*time.Second, func() bool {
		for _, cd := range c.Status().Conditions {
			if cd.Key == "conflict" {
				return true
			}
		}
		return false
	})
	if !sawConflict {
		t.Error("409 was not a condition")
	}
	r.waitCommitted(upd)
	if d := time.Since(start); d < time.Second {
		t.Errorf("delivered after %v; want the 429's retry_after (1s) waited out", d)
	}
	if ms := r.stored(); len(ms) != 1 {
		t.Errorf("%d stored; want 1", len(ms))
	}
	r.srv.WaitFor(5*time.Second, func() bool { return len(c.Status().Conditions) <= 1 })
	for _, cd := range c.Status().Conditions {
		if cd.Key == "conflict" {
			t.Error("the conflict condition outlived a poll that answered")
		}
	}
	if st := c.Status(); st.State != channel.StateConnected || st.Polled.IsZero() {
		t.Errorf("status %+v; want connected, with the last poll", st)
	}
}

// The owner's messages are FromMe; the bot's own (a bot's id as sender)
// are IsBot.
func TestOwnerAndOwnMessages(t *testing.T) {
	r := newRig(t)
	r.start(nil)
	r.srv.Message(telegramtest.Msg{Chat: groupChat, From: ownerUser, Text: "mine"})
	upd, _ := r.srv.Message(telegramtest.Msg{Chat: groupChat, From: telegramtest.User{ID: telegramtest.BotID, Name: "bot"}, Text: "the bot's"})
	r.waitCommitted(upd)
	ms := r.stored()
	if len(ms) != 2 || !ms[0].FromMe || ms[0].IsBot || !ms[1].IsBot {
		t.Fatalf("stored %+v; want the owner's FromMe and the bot's IsBot", ms)
	}
}

// request commits an approval request with id, sends it as bridged's own
// notice through c, and records its outbox row sent under the message id
// Send returned, as the approvals and the outbox do; it returns that id.
func (r *rig) request(c *Client, id string) int {
	r.t.Helper()
	ctx := context.Background()
	var a store.Approval
	err := r.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if a, err = tx.Approvals.Add(ctx, store.Approval{ID: id, Folder: "family", RequestID: "r-" + id, Tool: "Bash", Subject: "rm -rf /tmp/x", AskedAt: time.Now()}); err != nil {
			return err
		}
		it, err := tx.Outbox.Enqueue(ctx, store.OutboxItem{Chat: store.ChatID(ChatID(group)), Text: approvals.RequestText(a, time.Minute), Origin: store.OriginNotice})
		if err != nil {
			return err
		}
		return tx.Approvals.SetOutbox(ctx, a.ID, it.ID)
	})
	if err != nil {
		r.t.Fatal(err)
	}
	a, _ = r.db.Approvals.Get(ctx, id)
	sent, err := c.Send(ctx, channel.Outgoing{Chat: ChatID(group), Text: approvals.RequestText(a, time.Minute), ID: "o-" + id, Notice: true})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.db.Outbox.MarkSent(ctx, a.OutboxID, sent, time.Now()); err != nil {
		r.t.Fatal(err)
	}
	n, _ := strconv.Atoi(sent)
	return n
}

// An approval request gets two buttons; a press or a reaction by anyone
// but the owner decides nothing, the owner's does, once; every press is
// answered. An agent's text that looks like a request gets no buttons.
func TestApprovalButtonsOwnerOnly(t *testing.T) {
	r := newRig(t)
	c := r.start(nil)
	ctx := context.Background()
	state := func(id string) store.ApprovalState {
		a, _ := r.db.Approvals.Get(ctx, id)
		return a.State
	}
	msgID := r.request(c, "abcd")
	got := r.srv.Sent()
	if len(got) != 1 || !strings.Contains(got[0].Markup, `"callback_data":"yes abcd"`) || !strings.Contains(got[0].Markup, `"callback_data":"no abcd"`) {
		t.Fatalf("sent %+v; want the request with yes/no buttons", got)
	}
	if _, err := c.Send(ctx, channel.Outgoing{Chat: ChatID(group), Text: got[0].Text, ID: "agent"}); err != nil {
		t.Fatal(err)
	}
	if m := r.srv.Sent()[1].Markup; m != "" {
		t.Errorf("an agent's text that looks like a request got buttons %s", m)
	}
	r.waitCommitted(r.srv.Press(groupChat, bob, msgID, "yes abcd"))
	r.waitCommitted(r.srv.React(groupChat, bob, msgID, "👍"))
	if s := state("abcd"); s != store.ApprovalOpen {
		t.Fatalf("Bob's press and reaction left the request %s; want open", s)
	}
	r.waitCommitted(r.srv.Press(groupChat, ownerUser, msgID, "no abcd"))
	if s := state("abcd"); s != store.ApprovalDenied {
		t.Fatalf("after the owner's 👎 button the request is %s; want denied", s)
	}
	r.waitCommitted(r.srv.Press(groupChat, ownerUser, msgID, "yes abcd"))
	if s := state("abcd"); s != store.ApprovalDenied {
		t.Fatalf("a second answer changed the decision to %s", s)
	}
	other := r.request(c, "efgh")
	r.waitCommitted(r.srv.React(groupChat, ownerUser, other, "👍"))
	if s := state("efgh"); s != store.ApprovalAllowed {
		t.Fatalf("after the owner's 👍 reaction the request is %s; want allowed", s)
	}
	if !r.srv.WaitFor(5*time.Second, func() bool { return len(r.srv.Answered()) == 3 }) {
		t.Errorf("answered presses %v; want all three", r.srv.Answered())
	}
	for _, m := range r.stored() {
		if !m.IsBot {
			t.Errorf("a press or reaction stored as a message: %+v", m)
		}
	}
}

// Long text goes as several plain-text messages, each within 4,096 UTF-16
// units, cut at paragraph or word boundaries, none lost; markup characters
// reach the chat as they were written.
func TestSendSplitsPlainText(t *testing.T) {
	r := newRig(t)
	c := r.start(nil)
	para := strings.Repeat("word *bold* _x_ [link](y) ", 100) // 2,600 characters
	text := para + "\n\n" + para + "\n\n" + strings.Repeat("😀", 3000)
	if _, err := c.Send(context.Background(), channel.Outgoing{Chat: ChatID(group), Text: text, ID: "long"}); err != nil {
		t.Fatal(err)
	}
	sent := r.srv.Sent()
	if len(sent) < 3 {
		t.Fatalf("sent %d parts; want at least 3", len(sent))
	}
	var joined strings.Builder
	for i, s := range sent {
		if u := units(s.Text); u > MaxMessageUnits {
			t.Errorf("part %d has %d UTF-16 units; want at most %d", i, u, MaxMessageUnits)
		}
		if s.ParseMod != "" {
			t.Errorf("part %d sent with parse_mode %q; want plain text", i, s.ParseMod)
		}
		joined.WriteString(s.Text)
	}
	norm := func(s string) string { return strings.Join(strings.Fields(s), "") }
	if norm(joined.String()) != norm(text) {
		t.Error("the parts do not add up to the text")
	}
	if !strings.HasSuffix(sent[0].Text, "(y)") {
		t.Errorf("the first part ends %q; want a cut at a paragraph", sent[0].Text[len(sent[0].Text)-10:])
	}
}

func TestSplitNeverCutsARune(t *testing.T) {
	for _, text := range []string{strings.Repeat("a", 10000), strings.Repeat("é😀", 3000), ""} {
		var back strings.Builder
		for _, p := range Split(text, 100) {
			if units(p) > 100 {
				t.Errorf("part of %d units", units(p))
			}
			back.WriteString(p)
		}
		if back.String() != text {
			t.Errorf("Split lost or broke characters of a %d-byte text", len(text))
		}
	}
}

// 429's retry_after is waited out and the message sent once; 403, a
// group's migration and 401 are permanent, the first two conditions told
// to the owner, the last the state.
func TestSendErrors(t *testing.T) {
	r := newRig(t)
	c := r.start(nil)
	ctx := context.Background()
	r.srv.Inject("sendMessage", telegramtest.Fault{Code: 429, RetryAfter: 1})
	start := time.Now()
	if _, err := c.Send(ctx, channel.Outgoing{Chat: ChatID(group), Text: "slow", ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second || len(r.srv.Sent()) != 1 {
		t.Errorf("after a 429 sent %d in %v; want once, after retry_after (1s)", len(r.srv.Sent()), d)
	}
	r.srv.Inject("sendMessage", telegramtest.Fault{Code: 403, Description: "Forbidden: bot was kicked from the supergroup chat"})
	_, err := c.Send(ctx, channel.Outgoing{Chat: ChatID(group), Text: "kicked", ID: "b"})
	if !errors.Is(err, channel.ErrPermanent) {
		t.Errorf("403: %v; want permanent", err)
	}
	if cs := c.Status().Conditions; len(cs) == 0 || cs[len(cs)-1].Key != "removed/"+ChatID(group) {
		t.Errorf("conditions after 403: %+v; want removed/%s", cs, ChatID(group))
	}
	r.srv.Inject("sendMessage", telegramtest.Fault{Code: 400, Description: "Bad Request: group chat was upgraded to a supergroup chat", MigrateTo: -1009})
	if _, err := c.Send(ctx, channel.Outgoing{Chat: ChatID(group), Text: "migrated", ID: "m"}); !errors.Is(err, channel.ErrPermanent) {
		t.Errorf("a migrated group: %v; want permanent", err)
	}
	found := false
	for _, cd := range c.Status().Conditions {
		found = found || cd.Key == "migrated/"+ChatID(group) && strings.Contains(cd.Text, "tg:-1009")
	}
	if !found {
		t.Errorf("conditions %+v; want the migration told with the new id", c.Status().Conditions)
	}
	r.srv.Inject("sendMessage", telegramtest.Fault{Code: 401})
	if _, err := c.Send(ctx, channel.Outgoing{Chat: ChatID(group), Text: "revoked", ID: "c"}); !errors.Is(err, channel.ErrPermanent) {
		t.Errorf("401: %v; want permanent", err)
	}
	if st := c.Status(); st.State != channel.StateLoggedOut || !strings.Contains(st.Detail, "BotFather") {
		t.Errorf("state after 401: %+v; want logged-out saying what to do", st)
	}
	if strings.Contains(c.Status().Detail, telegramtest.Token) {
		t.Error("the status shows the token")
	}
}

// A send whose request was written but never answered is ambiguous:
// permanent, not sent again, the message delivered once.
func TestSendAmbiguous(t *testing.T) {
	r := newRig(t)
	c := r.start(nil)
	r.srv.Inject("sendMessage", telegramtest.Fault{Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := c.Send(ctx, channel.Outgoing{Chat: ChatID(group), Text: "maybe", ID: "m"})
	if !errors.Is(err, channel.ErrAmbiguous) || !errors.Is(err, channel.ErrPermanent) {
		t.Fatalf("Send = %v; want ambiguous and permanent", err)
	}
	if strings.Contains(err.Error(), telegramtest.Token) {
		t.Error("the error shows the token")
	}
	if n := len(r.srv.Sent()); n != 1 {
		t.Errorf("delivered %d; want 1", n)
	}
}

// Typing is kept alive while on, and stops when turned off.
func TestTypingKeptAlive(t *testing.T) {
	r := newRig(t)
	c := r.start(nil)
	if err := c.SetTyping(context.Background(), ChatID(group), true); err != nil {
		t.Fatal(err)
	}
	if !r.srv.WaitFor(5*time.Second, func() bool { return len(r.srv.Actions()) >= 3 }) {
		t.Fatalf("chat actions %v; want the indicator refreshed", r.srv.Actions())
	}
	_ = c.SetTyping(context.Background(), ChatID(group), false)
	n := len(r.srv.Actions())
	if r.srv.WaitFor(300*time.Millisecond, func() bool { return len(r.srv.Actions()) > n+1 }) {
		t.Error("typing kept refreshing after it was turned off")
	}
}

// A photo, a document and a voice note are stored with their media (the
// caption first, so a trigger in it still counts) and Fetch downloads each;
// a file over the 20 MB a bot may download is said so, not fetched.
func TestInboundMediaAndFetch(t *testing.T) {
	r := newRig(t)
	q := &mediaQueue{}
	in, err := ingest.New(ingest.Config{DB: r.db, LateWindow: time.Hour, Log: zerolog.Nop(), Media: q,
		ChannelOf: func(string) string { return ChannelName }})
	if err != nil {
		t.Fatal(err)
	}
	r.sink = StoreSink{In: in, DB: r.db}
	c := r.start(nil)
	files := []*telegramtest.File{
		{Kind: "photo", ID: "p1", Data: []byte("jpeg bytes")},
		{Kind: "document", ID: "d1", Name: "../../etc/report.pdf", MIME: "application/pdf", Data: []byte("%PDF")},
		{Kind: "voice", ID: "v1", Data: []byte("ogg")},
		{Kind: "document", ID: "big", Name: "huge.iso", Data: []byte("x"), Size: MaxDownload + 1},
	}
	var last int64
	for i, f := range files {
		text := ""
		if i == 0 {
			text = "@Andy what is this?"
		}
		last, _ = r.srv.Message(telegramtest.Msg{Chat: groupChat, From: bob, Text: text, File: f})
	}
	r.waitCommitted(last)
	ms := r.stored()
	if len(ms) != 4 {
		t.Fatalf("stored %d; want 4", len(ms))
	}
	if want := "@Andy what is this?\n[image: downloading]"; ms[0].Text != want {
		t.Errorf("photo stored as %q; want %q", ms[0].Text, want)
	}
	if !strings.Contains(ms[3].Text, "not downloaded: over the 20 MB") {
		t.Errorf("a file over 20 MB stored as %q; want it said", ms[3].Text)
	}
	got := q.all()
	if len(got) != 3 || got[1].Name != fmt.Sprintf("%s-%s-report.pdf", time.Now().UTC().Format("2006-01-02"), ms[1].ExternalID) || !got[2].Voice {
		t.Fatalf("media queued %+v; want the photo, the document (a safe name) and the voice note", got)
	}
	for i, m := range got {
		dst, err := os.Create(filepath.Join(t.TempDir(), "f"))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Fetch(context.Background(), m, dst, 1<<20); err != nil {
			t.Fatalf("Fetch %s: %v", m.Name, err)
		}
		dst.Close()
		if b, _ := os.ReadFile(dst.Name()); string(b) != string(files[i].Data) {
			t.Errorf("fetched %q; want %q", b, files[i].Data)
		}
	}
	dst, _ := os.Create(filepath.Join(t.TempDir(), "small"))
	defer dst.Close()
	if err := c.Fetch(context.Background(), got[0], dst, 3); !errors.Is(err, media.ErrTooLarge) {
		t.Errorf("Fetch over the limit = %v; want ErrTooLarge", err)
	}
}

type mediaQueue struct {
	mu    sync.Mutex
	added []store.Media
}

func (q *mediaQueue) Add(m store.Media) {
	q.mu.Lock()
	q.added = append(q.added, m)
	q.mu.Unlock()
}

func (q *mediaQueue) all() []store.Media {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]store.Media(nil), q.added...)
}

// The agent's files go as a photo (an image) or a document, captioned with
// the message's text when it fits a caption, else followed by it; a file
// over the 50 MB a bot may send is refused for good.
func TestSendFiles(t *testing.T) {
	r := newRig(t)
	c := r.start(nil)
	dir := t.TempDir()
	file := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	img := channel.Attachment{Path: file("chart.png", "png"), Name: "chart.png", MIME: "image/png", Kind: channel.KindImage, Size: 3}
	if _, err := c.Send(ctx, channel.Outgoing{Chat: ChatID(group), Text: "the chart", Attachment: &img, ID: "f1"}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", MaxCaption+1)
	doc := channel.Attachment{Path: file("notes.txt", "notes"), Name: "notes.txt", MIME: "text/plain", Kind: channel.KindDocument, Size: 5}
	if _, err := c.Send(ctx, channel.Outgoing{Chat: ChatID(group), Text: long, Attachment: &doc, ID: "f2"}); err != nil {
		t.Fatal(err)
	}
	sent := r.srv.Sent()
	if len(sent) != 3 {
		t.Fatalf("sent %+v; want a photo, a document and the long text", sent)
	}
	if sent[0].Method != "sendPhoto" || sent[0].File != "chart.png" || string(sent[0].FileData) != "png" || sent[0].Text != "the chart" {
		t.Errorf("first %+v; want the photo captioned", sent[0])
	}
	if sent[1].Method != "sendDocument" || sent[1].Text != "" || string(sent[1].FileData) != "notes" || sent[2].Text != long {
		t.Errorf("then %+v, %+v; want the document, then the text too long for a caption", sent[1], sent[2])
	}
	big := channel.Attachment{Path: doc.Path, Name: "big.iso", Kind: channel.KindDocument, Size: MaxUpload + 1}
	if _, err := c.Send(ctx, channel.Outgoing{Chat: ChatID(group), Text: "big", Attachment: &big, ID: "f3"}); !errors.Is(err, channel.ErrPermanent) {
		t.Errorf("a file over 50 MB: %v; want permanent", err)
	}
}

// A chat the bot is added to is seen (groups list --available) before
// anyone writes there, with its update committed.
func TestAddedToAChatIsSeen(t *testing.T) {
	r := newRig(t)
	r.start(nil)
	friends := telegramtest.Chat{ID: -100999, Title: "Friends"}
	upd := r.srv.Added(friends, bob)
	r.waitCommitted(upd)
	c, err := r.db.Chats.Get(context.Background(), store.ChatID(ChatID(friends.ID)))
	if err != nil || c.Name != "Friends" || !c.IsGroup || c.Channel != ChannelName {
		t.Errorf("chat = %+v, %v; want the group the bot was added to", c, err)
	}
}

// A long message whose second part fails is retried from that part: the
// first is not sent twice.
func TestSendRetryResumesParts(t *testing.T) {
	r := newRig(t)
	c := r.start(nil)
	text := strings.Repeat("a", 4000) + "\n\n" + strings.Repeat("b", 4000)
	r.srv.Inject("sendMessage", telegramtest.Fault{})          // the first part goes
	r.srv.Inject("sendMessage", telegramtest.Fault{Code: 502}) // the second fails
	out := channel.Outgoing{Chat: ChatID(group), Text: text, ID: "two-parts"}
	if _, err := c.Send(context.Background(), out); err == nil || errors.Is(err, channel.ErrPermanent) {
		t.Fatalf("Send with a 502 = %v; want a retryable error", err)
	}
	if _, err := c.Send(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	sent := r.srv.Sent()
	if len(sent) != 2 || !strings.HasPrefix(sent[0].Text, "a") || !strings.HasPrefix(sent[1].Text, "b") {
		t.Errorf("sent %d parts; want a's once, then b's", len(sent))
	}
}

// Through the outbox: a reply whose sendMessage was written but never
// answered is failed once as ambiguous, with the reason `bridged why`
// shows, and never sent again.
func TestOutboxRecordsAnAmbiguousSend(t *testing.T) {
	r := newRig(t)
	r.callTimeout = 300 * time.Millisecond
	c := r.start(nil)
	out, err := outbox.New(outbox.Config{Store: r.db, Channels: []channel.Channel{c}, Log: zerolog.Nop(), Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); out.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	r.srv.Inject("sendMessage", telegramtest.Fault{Hang: true})
	it, err := r.db.Outbox.Enqueue(context.Background(), store.OutboxItem{Chat: store.ChatID(ChatID(group)), Group: "family", Text: "did it arrive?", Origin: store.OriginReply})
	if err != nil {
		t.Fatal(err)
	}
	out.Wake()
	var row store.OutboxItem
	if !r.srv.WaitFor(20*time.Second, func() bool {
		row, _ = r.db.Outbox.Get(context.Background(), it.ID)
		return row.State != store.OutboxPending
	}) {
		t.Fatalf("the row is still %+v", row)
	}
	if row.State != store.OutboxFailed || row.Attempts != 1 || !strings.Contains(row.LastError, "ambiguous send") || !strings.Contains(row.LastError, "may have arrived") {
		t.Errorf("row %+v; want failed after one attempt, as ambiguous", row)
	}
	flush, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	out.Flush(flush)
	if n := len(r.srv.Sent()); n != 1 {
		t.Errorf("delivered %d times; want once", n)
	}
}

// `--allow admins` admits the group's admins as getChatAdministrators
// names them, and nobody else but the owner.
func TestAllowAdmins(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	g, err := r.db.Groups.ByChat(ctx, store.ChatID(ChatID(group)))
	if err != nil {
		t.Fatal(err)
	}
	g.Allow = []string{store.AllowAdmins}
	if err := r.db.Groups.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	r.srv.SetAdmins(group, bob.ID)
	r.start(nil)
	r.srv.Message(telegramtest.Msg{Chat: groupChat, From: bob, Text: "from an admin"})
	upd, _ := r.srv.Message(telegramtest.Msg{Chat: groupChat, From: telegramtest.User{ID: 66, Name: "Eve"}, Text: "from a member"})
	r.waitCommitted(upd)
	ms := r.stored()
	if len(ms) != 2 || ms[0].NotAllowed || !ms[1].NotAllowed {
		t.Errorf("stored %+v; want the admin's allowed, the member's not", ms)
	}
}
