package channeltest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/approvals"
	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// Who sends an inbound message in the conformance suite.
type Who int

// The senders of the conformance suite.
const (
	Member Who = iota // a member of the chat, not the owner
	Owner             // the owner (FromMe)
)

// Network is one chat network, faked at its edge, with a channel built on
// a Rig and connected. The conformance suite (Conform) drives it. Methods
// may call t.Fatal.
type Network interface {
	// Channel is the channel under test, connected.
	Channel() channel.Channel
	// Chat is a group chat of the network; the suite registers it as the
	// main group.
	Chat() string
	// SenderID is the stored sender id of who.
	SenderID(who Who) string
	// Deliver has the network deliver a message from who in Chat with
	// text, the bot mentioned in the form mention (one of Mentions; ""
	// for none), and returns at once with a function that reports whether
	// the network heard it acknowledged (it will not send it again).
	Deliver(who Who, text, mention string) (acked func() bool)
	// Mentions are the network's forms of mentioning the bot.
	Mentions() []string
	// Echo has the network deliver back a message the channel sent
	// (under sentID, with text) as the network shows the bot's own
	// messages; a network that never does so does nothing.
	Echo(sentID, text string)
	// Received returns the texts the network received from the bot, in
	// order.
	Received() []string
	// Typing reports whether the network showed the typing indicator in
	// Chat.
	Typing() bool
	// MaxText is the longest text of one message the network takes, in
	// UTF-16 code units (0: no limit).
	MaxText() int
}

// MediaNetwork is a Network that carries files both ways.
type MediaNetwork interface {
	Network
	// Fetcher is what the media pool fetches the network's inbound files
	// with: the channel itself for a network that holds the file (it
	// downloads it), the uploads spool for the terminal's.
	Fetcher() Fetcher
	// DeliverFile has the network deliver an image with caption from who
	// in Chat, and returns with a function that reports the ack.
	DeliverFile(who Who, caption string, data []byte) (acked func() bool)
	// ReceivedFiles returns the contents of the files the network received
	// from the bot, in order.
	ReceivedFiles() [][]byte
}

// Fetcher is what a MediaNetwork's channel is to the media pool
// (media.Fetcher).
type Fetcher interface {
	Fetch(ctx context.Context, m store.Media, dst *os.File, limit int64) error
}

// Rig is what a Network's channel delivers to: a real store, the ingest,
// and the approvals answering in the main chat.
type Rig struct {
	DB        *store.DB
	Ingest    *ingest.Ingest
	Approvals *approvals.Service
	// Media records the media the ingest hands the media pool.
	Media *MediaQueue
	// ChannelOf is the name the ingest stores chats under.
	ChannelOf string
	// gate, when set, runs before a message is stored (ingest's Answers).
	gate func(m channel.Message)
}

func newRig(t *testing.T, name string) *Rig {
	t.Helper()
	r := &Rig{DB: storetest.Open(t), ChannelOf: name, Media: &MediaQueue{}}
	r.Approvals = approvals.New(r.DB, poster{r.DB}, time.Minute, zerolog.Nop())
	var err error
	r.Ingest, err = ingest.New(ingest.Config{
		DB: r.DB, LateWindow: time.Hour, Log: zerolog.Nop(), ChannelOf: func(string) string { return name }, Media: r.Media,
		Answers: func(ctx context.Context, m channel.Message) bool {
			if r.gate != nil {
				r.gate(m)
			}
			return r.Approvals.Answer(ctx, m)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// MediaQueue records the media the ingest queues for fetching.
type MediaQueue struct {
	mu    sync.Mutex
	added []store.Media
}

// Add records m.
func (q *MediaQueue) Add(m store.Media) {
	q.mu.Lock()
	q.added = append(q.added, m)
	q.mu.Unlock()
}

// All returns the media queued so far.
func (q *MediaQueue) All() []store.Media {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]store.Media(nil), q.added...)
}

// poster commits the approvals' notices to the outbox (the suite sends
// nothing of them).
type poster struct{ db *store.DB }

func (p poster) SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	return p.db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: store.ChatID(chat), Text: text, Origin: origin, Group: store.Folder(folder)})
}

// NewNetwork builds a fresh network on rig; the suite calls it once per
// behaviour. The rig's chat is registered after it returns.
type NewNetwork func(t *testing.T, rig *Rig) Network

// Conform runs the behaviours every channel must have against the network
// newNetwork builds: ack after commit, own-message detection, the trigger
// and every mention form, allow lists, approvals from the owner only, long
// text, typing, and media in and out for a MediaNetwork.
func Conform(t *testing.T, name string, newNetwork NewNetwork) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, r *Rig, n Network)
	}{
		{"AckAfterCommit", ackAfterCommit},
		{"OwnMessages", ownMessages},
		{"TriggerAndMentions", triggerAndMentions},
		{"AllowLists", allowLists},
		{"ApprovalsFromTheOwnerOnly", approvalsOwnerOnly},
		{"LongText", longText},
		{"Typing", typing},
		{"MediaInAndOut", mediaInAndOut},
		{"OneGroupLookup", oneGroupLookup},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, name)
			n := newNetwork(t, r)
			if _, err := r.DB.Groups.Add(context.Background(), store.Group{Chat: store.ChatID(n.Chat()), Folder: "main", Name: "Main",
				Trigger: "@Andy", RequiresTrigger: true, IsMain: true}); err != nil {
				t.Fatal(err)
			}
			c.run(t, r, n)
		})
	}
}

// within waits up to 10 s for cond, looking every 5 ms.
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		<-tick.C
	}
}

// messages returns what is stored for the network's chat.
func messages(t *testing.T, r *Rig, n Network) []store.Message {
	t.Helper()
	ms, err := r.DB.Messages.Recent(context.Background(), store.ChatID(n.Chat()), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// withText returns the stored messages whose text starts with prefix.
func withText(t *testing.T, r *Rig, n Network, prefix string) []store.Message {
	var out []store.Message
	for _, m := range messages(t, r, n) {
		if strings.HasPrefix(m.Text, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// A message is acknowledged to the network only once it is committed:
// while its commit waits, the network has heard nothing; once it is
// stored, the network hears the ack.
func ackAfterCommit(t *testing.T, r *Rig, n Network) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	r.gate = func(m channel.Message) {
		if strings.HasPrefix(m.Text, "held") {
			entered <- struct{}{}
			<-release
		}
	}
	acked := n.Deliver(Member, "held until released", "")
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the message did not reach the ingest")
	}
	// The commit is held: give an ack that would wrongly come early a
	// moment to show.
	early := time.NewTimer(100 * time.Millisecond)
	<-early.C
	if acked() {
		close(release)
		t.Fatal("the network heard the ack before the message was committed")
	}
	close(release)
	within(t, "ack after the commit", acked)
	if got := withText(t, r, n, "held"); len(got) != 1 {
		t.Fatalf("%d stored after the ack; want 1", len(got))
	}
}

// The bot's own messages, as the network shows them, are stored as the
// bot's (IsBot), never as a prompt.
func ownMessages(t *testing.T, r *Rig, n Network) {
	ctx := context.Background()
	it, err := r.DB.Outbox.Enqueue(ctx, store.OutboxItem{Chat: store.ChatID(n.Chat()), Text: "own words", Origin: store.OriginReply})
	if err != nil {
		t.Fatal(err)
	}
	sent, err := n.Channel().Send(ctx, channel.Outgoing{Chat: n.Chat(), Text: "own words", ID: it.ExternalID})
	if err != nil {
		t.Fatal(err)
	}
	n.Echo(sent, "own words")
	acked := n.Deliver(Member, "after the own words", "")
	within(t, "the next message acked", acked)
	within(t, "own words stored", func() bool { return len(withText(t, r, n, "own words")) > 0 })
	for _, m := range withText(t, r, n, "own words") {
		if !m.IsBot {
			t.Errorf("own message stored as %+v; want IsBot", m)
		}
	}
}

// The trigger word and every mention form of the network wake the agent;
// a plain message does not.
func triggerAndMentions(t *testing.T, r *Rig, n Network) {
	wakes := func(m store.Message) bool { return m.Mentioned || prompt.MatchTrigger("@Andy", m.Text) }
	cases := []struct{ text, mention string }{{"@Andy trigger word", ""}, {"plain words", ""}}
	for _, f := range n.Mentions() {
		cases = append(cases, struct{ text, mention string }{"form " + f, f})
	}
	for _, c := range cases {
		acked := n.Deliver(Member, c.text, c.mention)
		within(t, c.text+" acked", acked)
	}
	for _, c := range cases {
		var got []store.Message
		for _, m := range messages(t, r, n) {
			if strings.Contains(m.Text, strings.TrimPrefix(c.text, "@Andy ")) {
				got = append(got, m)
			}
		}
		if len(got) != 1 {
			t.Errorf("%q: %d stored; want 1", c.text, len(got))
			continue
		}
		if want := c.text != "plain words"; wakes(got[0]) != want {
			t.Errorf("%q (stored %q, mentioned %v): wakes = %v; want %v", c.text, got[0].Text, got[0].Mentioned, !want, want)
		}
	}
}

// A group's allow list decides whose messages wake its agent; the owner's
// always do.
func allowLists(t *testing.T, r *Rig, n Network) {
	ctx := context.Background()
	setAllow := func(allow ...string) {
		g, err := r.DB.Groups.ByChat(ctx, store.ChatID(n.Chat()))
		if err != nil {
			t.Fatal(err)
		}
		g.Allow = allow
		if err := r.DB.Groups.Update(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	setAllow(store.AllowOwner)
	within(t, "member acked", n.Deliver(Member, "member while me only", ""))
	within(t, "owner acked", n.Deliver(Owner, "owner while me only", ""))
	member := n.SenderID(Member)
	norm, err := store.NormalizeSender(member)
	if err != nil {
		t.Fatalf("the member's sender id %q is no allow-list entry: %v", member, err)
	}
	setAllow(norm)
	within(t, "member acked", n.Deliver(Member, "member while allowed", ""))
	for text, notAllowed := range map[string]bool{"member while me only": true, "owner while me only": false, "member while allowed": false} {
		got := withText(t, r, n, text)
		if len(got) != 1 || got[0].NotAllowed != notAllowed {
			t.Errorf("%q stored as %+v; want one, not allowed = %v", text, got, notAllowed)
		}
	}
	if got := withText(t, r, n, "owner while me only"); len(got) == 1 && !got[0].FromMe {
		t.Errorf("the owner's message is not FromMe: %+v", got[0])
	}
}

// `yes ID` answers an approval request only from the owner; anyone
// else's is an ordinary message.
func approvalsOwnerOnly(t *testing.T, r *Rig, n Network) {
	ctx := context.Background()
	err := r.DB.Tx(ctx, func(tx *store.Tx) error {
		_, err := tx.Approvals.Add(ctx, store.Approval{ID: "wxyz", Folder: "main", RequestID: "r1", Tool: "Bash", Subject: "make deploy", AskedAt: time.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "member's answer acked", n.Deliver(Member, "yes wxyz", ""))
	if a, _ := r.DB.Approvals.Get(ctx, "wxyz"); a.State != store.ApprovalOpen {
		t.Fatalf("a member's yes decided the request: %+v", a)
	}
	if got := withText(t, r, n, "yes wxyz"); len(got) != 1 {
		t.Errorf("a member's yes stored %d times; want once, as an ordinary message", len(got))
	}
	within(t, "owner's answer acked", n.Deliver(Owner, "yes wxyz", ""))
	if a, _ := r.DB.Approvals.Get(ctx, "wxyz"); a.State != store.ApprovalAllowed {
		t.Fatalf("after the owner's yes the request is %+v; want allowed", a)
	}
	if got := withText(t, r, n, "yes wxyz"); len(got) != 1 {
		t.Errorf("the owner's answer was stored (%d messages); want it taken out", len(got))
	}
}

// A long text reaches the network whole, in messages the network takes.
func longText(t *testing.T, r *Rig, n Network) {
	para := strings.Repeat("a sentence of words. ", 200)
	text := strings.TrimSpace(strings.Repeat(para+"\n\n", 3)) + " " + strings.Repeat("😀", 100)
	if _, err := n.Channel().Send(context.Background(), channel.Outgoing{Chat: n.Chat(), Text: text, ID: store.NewExternalID()}); err != nil {
		t.Fatal(err)
	}
	got := n.Received()
	norm := func(s string) string { return strings.Join(strings.Fields(s), "") }
	var all strings.Builder
	for _, p := range got {
		if max := n.MaxText(); max > 0 && utf16Len(p) > max {
			t.Errorf("a part of %d UTF-16 units; the network takes %d", utf16Len(p), max)
		}
		all.WriteString(p)
	}
	if !strings.Contains(norm(all.String()), norm(text)) {
		t.Errorf("received %d messages that do not hold the text", len(got))
	}
}

// An image comes in with its caption first (a trigger in it counts) and
// its file fetched by the channel; the agent's file reaches the network.
func mediaInAndOut(t *testing.T, r *Rig, n Network) {
	mn, ok := n.(MediaNetwork)
	if !ok {
		t.Fatalf("%T carries no files: every channel's network must (MediaNetwork)", n)
	}
	in := []byte("\x89PNG an image")
	within(t, "image acked", mn.DeliverFile(Member, "@Andy what is this?", in))
	got := withText(t, r, n, "@Andy what is this?")
	if len(got) != 1 || !strings.Contains(got[0].Text, "[image") {
		t.Fatalf("stored %+v; want the caption, then the image's placeholder", got)
	}
	queued := r.Media.All()
	if len(queued) != 1 || queued[0].MessageID != got[0].ID {
		t.Fatalf("media queued %+v; want the image of message %d", queued, got[0].ID)
	}
	f := mn.Fetcher()
	dst, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if err := f.Fetch(context.Background(), queued[0], dst, 1<<20); err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if b, _ := os.ReadFile(dst.Name()); string(b) != string(in) {
		t.Errorf("fetched %q; want %q", b, in)
	}
	out := []byte("%PDF a report")
	path := filepath.Join(t.TempDir(), "report.pdf")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	a := channel.Attachment{Path: path, Name: "report.pdf", MIME: "application/pdf", Kind: channel.KindDocument, Size: int64(len(out))}
	if _, err := n.Channel().Send(context.Background(), channel.Outgoing{Chat: n.Chat(), Text: "the report", Attachment: &a, ID: store.NewExternalID()}); err != nil {
		t.Fatal(err)
	}
	files := mn.ReceivedFiles()
	if len(files) != 1 || string(files[0]) != string(out) {
		t.Errorf("the network received %d files; want the report", len(files))
	}
}

// A message's group is looked up once on its way in, on every channel:
// what the channel found is what the ingest stores it with.
func oneGroupLookup(t *testing.T, r *Rig, n Network) {
	before := r.DB.Groups.Lookups()
	within(t, "message acked", n.Deliver(Member, "@Andy one lookup", ""))
	if got := withText(t, r, n, "@Andy one lookup"); len(got) != 1 {
		t.Fatalf("stored %+v; want the message", got)
	}
	if got := r.DB.Groups.Lookups() - before; got != 1 {
		t.Errorf("%d group lookups for one message; want 1", got)
	}
}

// The typing indicator reaches the network.
func typing(t *testing.T, r *Rig, n Network) {
	if err := n.Channel().SetTyping(context.Background(), n.Chat(), true); err != nil {
		t.Fatal(err)
	}
	within(t, "typing shown", n.Typing)
	_ = n.Channel().SetTyping(context.Background(), n.Chat(), false)
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
