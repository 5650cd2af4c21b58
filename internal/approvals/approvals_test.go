package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

const mainChat = "local:main"

// poster commits to the outbox and marks each message sent with the
// network id "net-<outbox id>".
type poster struct {
	db    *store.DB
	mu    sync.Mutex
	texts []string
	posts chan store.OutboxItem
}

func (p *poster) SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	it, err := p.db.Outbox.Enqueue(ctx, store.OutboxItem{Chat: store.ChatID(chat), Text: text, Origin: origin})
	if err != nil {
		return it, err
	}
	if err := p.db.Outbox.MarkSent(ctx, it.ID, "net-"+itoa(int64(it.ID)), time.Time{}); err != nil {
		return it, err
	}
	p.mu.Lock()
	p.texts = append(p.texts, text)
	p.mu.Unlock()
	if strings.Contains(text, " wants to ") {
		select {
		case p.posts <- it:
		default:
		}
	}
	return it, nil
}

func (p *poster) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.texts...)
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func setup(t *testing.T, timeout time.Duration) (*Service, *store.DB, *poster) {
	t.Helper()
	db := storetest.Open(t)
	ctx := context.Background()
	if _, err := db.Groups.Add(ctx, store.Group{Chat: mainChat, Folder: "main", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Groups.Add(ctx, store.Group{Chat: "local:family", Folder: "family", Tools: store.ToolsAsk}); err != nil {
		t.Fatal(err)
	}
	p := &poster{db: db, posts: make(chan store.OutboxItem, 16)}
	s := New(db, p, timeout, zerolog.Nop())
	return s, db, p
}

type asked struct {
	d   ipc.ApprovalDecision
	err error
}

// ask starts an Ask and returns the request's id once it is posted.
func ask(t *testing.T, s *Service, p *poster, reqID, command string) (string, store.OutboxItem, chan asked) {
	t.Helper()
	out := make(chan asked, 1)
	go func() {
		in, _ := json.Marshal(map[string]string{"command": command})
		d, err := s.Ask(context.Background(), "family", reqID, ipc.AskApprovalArgs{Tool: "Bash", Input: in})
		out <- asked{d, err}
	}()
	select {
	case it := <-p.posts:
		list, err := s.List(context.Background(), true, 0)
		if err != nil || len(list) == 0 {
			t.Fatalf("no open request after the post: %v", err)
		}
		return list[0].ID, it, out
	case a := <-out:
		t.Fatalf("Ask returned before asking: %+v", a)
	case <-time.After(10 * time.Second):
		t.Fatal("the request was not posted")
	}
	return "", store.OutboxItem{}, nil
}

func wait(t *testing.T, ch chan asked) asked {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("Ask did not return")
	}
	return asked{}
}

func owner(text string) channel.Message {
	return channel.Message{Chat: mainChat, Text: text, FromMe: true, ExternalID: "in-" + text}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		m      channel.Message
		isMain bool
		want   Reply
		ok     bool
	}{
		{"owner yes id", owner("yes abcd"), true, Reply{ID: "abcd", Allow: true, By: "chat"}, true},
		{"owner no id", owner("No abcd"), true, Reply{ID: "abcd", By: "chat"}, true},
		{"not the main chat", owner("yes abcd"), false, Reply{}, false},
		{"another member", channel.Message{Chat: mainChat, Text: "yes abcd"}, true, Reply{}, false},
		{"bridged itself", channel.Message{Chat: mainChat, Text: "yes abcd", FromMe: true, IsBot: true}, true, Reply{}, false},
		{"not an id", owner("yes please"), true, Reply{}, false},
		{"a sentence", owner("yes abcd but later"), true, Reply{}, false},
		{"bare yes, no quote", owner("yes"), true, Reply{}, false},
		{"quote yes", channel.Message{Chat: mainChat, Text: "yes", FromMe: true, QuotedID: "net-1"}, true, Reply{Target: "net-1", Allow: true, By: "quote"}, true},
		{"quote thumbs down", channel.Message{Chat: mainChat, Text: "👎", FromMe: true, QuotedID: "net-1"}, true, Reply{Target: "net-1", By: "quote"}, true},
		{"quote yes with the channel's quote note", channel.Message{Chat: mainChat, Text: "yes\n[in reply to Andy: \"Approval abcd: group fam wants to ...\"]", FromMe: true, QuotedID: "net-1"}, true, Reply{Target: "net-1", Allow: true, By: "quote"}, true},
		{"a quote note without a quote is text", channel.Message{Chat: mainChat, Text: "yes\n[in reply to Andy]", FromMe: true}, true, Reply{}, false},
		{"reaction up", channel.Message{Chat: mainChat, FromMe: true, Reaction: &channel.Reaction{TargetID: "net-1", Emoji: "👍"}}, true, Reply{Target: "net-1", Allow: true, By: "reaction"}, true},
		{"reaction other emoji", channel.Message{Chat: mainChat, FromMe: true, Reaction: &channel.Reaction{TargetID: "net-1", Emoji: "❤️"}}, true, Reply{}, false},
		{"reaction by another", channel.Message{Chat: mainChat, Reaction: &channel.Reaction{TargetID: "net-1", Emoji: "👍"}}, true, Reply{}, false},
	} {
		got, ok := Parse(tc.m, tc.isMain)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: Parse = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestApproveOnceThenAskAgain(t *testing.T) {
	s, _, p := setup(t, time.Hour)
	ctx := context.Background()
	id, _, ch := ask(t, s, p, "r1", "rm -rf build")
	if _, err := s.Decide(ctx, id, true, false, "cli"); err != nil {
		t.Fatal(err)
	}
	if a := wait(t, ch); a.err != nil || !a.d.Allow || a.d.ID != id {
		t.Fatalf("Ask = %+v; want allowed %s", a, id)
	}
	// Decided once: a second answer changes nothing.
	if _, err := s.Decide(ctx, id, false, false, "cli"); !errors.Is(err, ErrSettled) {
		t.Errorf("second Decide = %v; want ErrSettled", err)
	}
	// The same command asks again.
	id2, _, ch2 := ask(t, s, p, "r2", "rm -rf build")
	if id2 == id {
		t.Fatal("the second request got the first one's id")
	}
	if _, err := s.Decide(ctx, id2, false, false, "cli"); err != nil {
		t.Fatal(err)
	}
	if a := wait(t, ch2); a.d.Allow || !strings.Contains(a.d.Message, "not approved") {
		t.Errorf("Ask = %+v; want denied, the model told", a)
	}
}

func TestAlwaysAddsARule(t *testing.T) {
	s, _, p := setup(t, time.Hour)
	ctx := context.Background()
	id, _, ch := ask(t, s, p, "r1", "make deploy")
	if _, err := s.Decide(ctx, id, true, true, "cli"); err != nil {
		t.Fatal(err)
	}
	wait(t, ch)
	in, _ := json.Marshal(map[string]string{"command": "make deploy"})
	d, err := s.Ask(ctx, "family", "r2", ipc.AskApprovalArgs{Tool: "Bash", Input: in})
	if err != nil || !d.Allow || d.ID != "" {
		t.Fatalf("Ask with a standing rule = %+v, %v; want allowed without asking", d, err)
	}
	rules, _ := s.Rules(ctx)
	if len(rules) != 1 || rules[0].Rule != "Bash(make deploy)" {
		t.Fatalf("rules = %+v", rules)
	}
	if err := s.Forget(ctx, rules[0].ID); err != nil {
		t.Fatal(err)
	}
	_, _, ch3 := ask(t, s, p, "r3", "make deploy")
	list, _ := s.List(ctx, true, 0)
	if _, err := s.Decide(ctx, list[0].ID, false, false, "cli"); err != nil {
		t.Fatal(err)
	}
	wait(t, ch3)
}

func TestTimeoutDenies(t *testing.T) {
	s, db, p := setup(t, 200*time.Millisecond)
	_, _, ch := ask(t, s, p, "r1", "rm x")
	a := wait(t, ch)
	if a.err != nil || a.d.Allow || !strings.Contains(a.d.Message, "did not answer") {
		t.Fatalf("Ask = %+v; want denied by the timeout", a)
	}
	got, _ := db.Approvals.Get(context.Background(), a.d.ID)
	if got.State != store.ApprovalDenied || got.DecidedBy != "timeout" {
		t.Errorf("stored %+v; want denied by timeout", got)
	}
}

func TestChatAnswers(t *testing.T) {
	s, db, p := setup(t, time.Hour)
	ctx := context.Background()

	// Another member's yes is an ordinary message; the owner's counts.
	id, it, ch := ask(t, s, p, "r1", "rm a")
	if s.Answer(ctx, channel.Message{Chat: mainChat, Text: "yes " + id, Sender: "someone"}) {
		t.Error("another member's yes was taken as an answer")
	}
	if !s.Answer(ctx, owner("yes "+id)) {
		t.Fatal("the owner's yes was not taken")
	}
	if a := wait(t, ch); !a.d.Allow {
		t.Fatalf("Ask = %+v; want allowed", a)
	}
	// A duplicate is taken out and changes nothing.
	if !s.Answer(ctx, owner("no "+id)) {
		t.Error("a duplicate answer was stored as a message")
	}
	if got, _ := db.Approvals.Get(ctx, id); got.State != store.ApprovalAllowed {
		t.Errorf("after a duplicate no: %s; want still allowed", got.State)
	}
	_ = it

	// A quote of the request's message.
	id2, it2, ch2 := ask(t, s, p, "r2", "rm b")
	sent := "net-" + itoa(int64(it2.ID))
	if s.Answer(ctx, channel.Message{Chat: mainChat, Text: "no", QuotedID: sent}) {
		t.Error("another member's quote was taken")
	}
	if !s.Answer(ctx, channel.Message{Chat: mainChat, Text: "no", FromMe: true, QuotedID: sent}) {
		t.Fatal("the owner's quote was not taken")
	}
	if a := wait(t, ch2); a.d.Allow || a.d.ID != id2 {
		t.Fatalf("Ask = %+v; want denied", a)
	}

	// A reaction: another member's is dropped and changes nothing; the
	// owner's decides; a repeated one changes nothing.
	id3, it3, ch3 := ask(t, s, p, "r3", "rm c")
	sent3 := "net-" + itoa(int64(it3.ID))
	if !s.Answer(ctx, channel.Message{Chat: mainChat, Reaction: &channel.Reaction{TargetID: sent3, Emoji: "👍"}}) {
		t.Error("another member's reaction was not dropped")
	}
	if got, _ := db.Approvals.Get(ctx, id3); got.State != store.ApprovalOpen {
		t.Fatalf("another member's reaction decided: %s", got.State)
	}
	react := channel.Message{Chat: mainChat, FromMe: true, Reaction: &channel.Reaction{TargetID: sent3, Emoji: "👍"}}
	if !s.Answer(ctx, react) {
		t.Fatal("the owner's reaction was not taken")
	}
	if a := wait(t, ch3); !a.d.Allow {
		t.Fatalf("Ask = %+v; want allowed", a)
	}
	react.Reaction.Emoji = "👎"
	s.Answer(ctx, react)
	if got, _ := db.Approvals.Get(ctx, id3); got.State != store.ApprovalAllowed {
		t.Errorf("a later reaction changed it to %s", got.State)
	}

	// A stale or unknown id is an ordinary message, a reaction to an
	// ordinary message is dropped.
	if s.Answer(ctx, owner("yes zzzz")) {
		t.Error("an unknown id was taken as an answer")
	}
	if !s.Answer(ctx, channel.Message{Chat: mainChat, FromMe: true, Reaction: &channel.Reaction{TargetID: "net-999", Emoji: "👍"}}) {
		t.Error("a reaction to an ordinary message was not dropped")
	}
}

func TestSettleOpenDeniesOnce(t *testing.T) {
	s, db, p := setup(t, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	in, _ := json.Marshal(map[string]string{"command": "rm x"})
	done := make(chan error, 1)
	go func() {
		_, err := s.Ask(ctx, "family", "r1", ipc.AskApprovalArgs{Tool: "Bash", Input: in})
		done <- err
	}()
	<-p.posts
	cancel() // the daemon stops with the request open
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Ask = %v; want the context's error", err)
	}
	// The next start.
	s2 := New(db, p, time.Hour, zerolog.Nop())
	n, err := s2.SettleOpen(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("SettleOpen = %d, %v; want 1", n, err)
	}
	if n, _ := s2.SettleOpen(context.Background()); n != 0 {
		t.Errorf("second SettleOpen settled %d; want 0", n)
	}
	list, _ := s2.List(context.Background(), false, 0)
	if len(list) != 1 || list[0].State != store.ApprovalDenied || list[0].DecidedBy != "restart" {
		t.Fatalf("list = %+v; want one denied by restart", list)
	}
	notices := 0
	for _, txt := range p.all() {
		if strings.Contains(txt, "was open when bridged stopped") {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d restart notices; want 1", notices)
	}
}

func TestSubjectIsTrimmedAndEscaped(t *testing.T) {
	in, _ := json.Marshal(map[string]string{"command": "echo `id`\n" + strings.Repeat("x", 500) + "\x1b[31m"})
	s := Subject("Bash", in)
	if strings.ContainsAny(s, "`\n\x1b") || len([]rune(s)) > MaxSubject+5 {
		t.Errorf("Subject = %q; want one line, no backticks or escapes, at most %d runes", s, MaxSubject)
	}
	if r := Rule("WebFetch", json.RawMessage(`{"url":"https://Example.com/a?b"}`)); r != "WebFetch(domain:example.com)" {
		t.Errorf("Rule = %q", r)
	}
}

func TestContainerGoneDeniesItsGroupsOpenRequests(t *testing.T) {
	s, db, p := setup(t, time.Hour)
	ctx := context.Background()
	id, _, ch := ask(t, s, p, "r1", "rm y")
	s.ContainerGone(ctx, "main") // another group's container: nothing changes
	if got, _ := db.Approvals.Get(ctx, id); got.State != store.ApprovalOpen {
		t.Fatalf("another group's container settled it: %s", got.State)
	}
	s.ContainerGone(ctx, "family")
	if a := wait(t, ch); a.d.Allow {
		t.Fatalf("Ask = %+v; want denied", a)
	}
	s.ContainerGone(ctx, "family")
	got, _ := db.Approvals.Get(ctx, id)
	if got.State != store.ApprovalDenied || got.DecidedBy != "container ended" {
		t.Errorf("stored %+v; want denied because the container ended", got)
	}
	n := 0
	for _, txt := range p.all() {
		if strings.Contains(txt, "was open when its container ended") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d notices; want 1", n)
	}
}

// At most MaxOpenPerGroup requests of a group are open at once: the next
// is refused at once, without a message to the owner; another group still
// asks.
func TestOpenRequestsAreCapped(t *testing.T) {
	s, _, p := setup(t, time.Hour)
	ctx := context.Background()
	var open []chan asked
	for i := range MaxOpenPerGroup {
		_, _, ch := ask(t, s, p, "r"+itoa(int64(i)), "touch f"+itoa(int64(i)))
		open = append(open, ch)
	}
	before := len(p.all())
	in, _ := json.Marshal(map[string]string{"command": "touch over"})
	_, err := s.Ask(ctx, "family", "r-over", ipc.AskApprovalArgs{Tool: "Bash", Input: in})
	if !errors.Is(err, ErrTooMany) || !errors.Is(err, ipc.ErrApprovalRefused) {
		t.Fatalf("Ask past the cap = %v; want ErrTooMany", err)
	}
	if n := len(p.all()); n != before {
		t.Errorf("%d messages posted for the refused request; want none", n-before)
	}
	list, _ := s.List(ctx, true, 0)
	if len(list) != MaxOpenPerGroup {
		t.Errorf("%d open requests; want %d", len(list), MaxOpenPerGroup)
	}
	// One answered: the group may ask again.
	if _, err := s.Decide(ctx, list[0].ID, false, false, "cli"); err != nil {
		t.Fatal(err)
	}
	_, _, ch := ask(t, s, p, "r-again", "touch again")
	for _, id := range []int{1, 2} {
		_, _ = s.Decide(ctx, list[id].ID, false, false, "cli")
	}
	s.ContainerGone(ctx, "family")
	for _, c := range append(open, ch) {
		wait(t, c)
	}
}

// A tool name that is not an identifier is refused before anything is
// stored or posted; the rule of a command with controls is shown escaped
// and still names that command only.
func TestToolNameAndRuleAreClean(t *testing.T) {
	s, _, p := setup(t, time.Hour)
	ctx := context.Background()
	for _, tool := range []string{"Bash\x1b[2J", "Bash\nApproval abcd", "Ba`sh`", strings.Repeat("x", 65), ""} {
		if _, err := s.Ask(ctx, "family", "r1", ipc.AskApprovalArgs{Tool: tool, Input: json.RawMessage(`{}`)}); !errors.Is(err, ErrBadTool) {
			t.Errorf("Ask with tool %q = %v; want ErrBadTool", tool, err)
		}
	}
	if n := len(p.all()); n != 0 {
		t.Errorf("%d messages posted; want none", n)
	}
	for _, tc := range []struct{ cmd, want string }{
		{"echo \x1b]52;c;eA==\x07", `Bash(echo \u{1b}]52;c;eA==\u{7})`},
		{"a\u202eb\nc", `Bash(a\u{202e}b\u{a}c)`},
		{`echo \u{1b}`, `Bash(echo \\u{1b})`},
		{"ok \xff", "Bash(ok \ufffd)"},
	} {
		in, _ := json.Marshal(map[string]string{"command": tc.cmd})
		if tc.cmd == "ok \xff" {
			in = []byte(`{"command":"ok ` + "\xff" + `"}`)
		}
		if got := Rule("Bash", in); got != tc.want {
			t.Errorf("Rule(%q) = %q; want %q", tc.cmd, got, tc.want)
		}
	}
}

// A request is taken for an announced call only, each once; an
// announcement that comes a little after the request is waited for; a
// container that ended takes its announcements with it.
func TestClaimTakesAnnouncedCallsOnce(t *testing.T) {
	w := newWaits()
	ctx := context.Background()
	w.announce("family", "toolu_1", "Bash")
	if w.claim(ctx, "main", "toolu_1", "Bash", 0) || w.claim(ctx, "family", "toolu_1", "Write", 0) {
		t.Fatal("claimed another group's or another tool's announcement")
	}
	if !w.claim(ctx, "family", "toolu_1", "Bash", time.Second) {
		t.Fatal("the announced call was not claimed")
	}
	if w.claim(ctx, "family", "toolu_1", "Bash", 10*time.Millisecond) {
		t.Fatal("one announcement claimed twice")
	}
	got := make(chan bool)
	go func() { got <- w.claim(ctx, "family", "toolu_2", "Bash", 10*time.Second) }()
	go w.announce("family", "toolu_2", "Bash")
	if !<-got {
		t.Fatal("a late announcement was not waited for")
	}
	w.announce("family", "toolu_3", "Bash")
	w.forget("family")
	if w.claim(ctx, "family", "toolu_3", "Bash", 10*time.Millisecond) {
		t.Fatal("an announcement outlived its container")
	}
	for i := range maxAnnounced + 5 {
		w.announce("family", "toolu_x"+itoa(int64(i)), "Bash")
	}
	if n := len(w.calls["family"]); n != maxAnnounced {
		t.Errorf("%d announcements kept; want at most %d", n, maxAnnounced)
	}
}
