// Package prompt writes what bridged says: the agent's prompts (DESIGN §6:
// messages as escaped XML under a context line, capped to the IPC limit; a
// scheduled task's prompt), the short notices a chat gets from bridged
// itself, and the trigger match that decides whether a message wakes an
// agent. It holds text only: no state, no I/O.
package prompt

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// MatchTrigger reports whether text starts with trigger, ignoring case and
// surrounding white space, and the trigger ends there as a word: "@Andy hi",
// "@andy", "@Andy's" and "@Andy, hi" match "@Andy"; "@Andyx" and "hi @Andy" do
// not. A trigger that ends in a non-word character ("!bot!") needs no
// boundary after it. An empty trigger never matches.
func MatchTrigger(trigger, text string) bool {
	trig := strings.TrimSpace(trigger)
	if trig == "" {
		return false
	}
	rest := strings.TrimSpace(text)
	var last rune
	for _, want := range trig {
		got, size := utf8.DecodeRuneInString(rest)
		if size == 0 || !equalFoldRune(got, want) {
			return false
		}
		rest = rest[size:]
		last = want
	}
	if !isWordRune(last) || rest == "" {
		return true
	}
	next, _ := utf8.DecodeRuneInString(rest)
	return !isWordRune(next)
}

func equalFoldRune(a, b rune) bool {
	if a == b {
		return true
	}
	for f := unicode.SimpleFold(a); f != a; f = unicode.SimpleFold(f) {
		if f == b {
			return true
		}
	}
	return false
}

// isWordRune says whether r continues a word. An apostrophe does not, so
// "@Andy's" starts with the trigger "@Andy".
func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

var (
	internalBlock = regexp.MustCompile(`(?is)<internal>.*?</internal>`)
	internalOpen  = regexp.MustCompile(`(?is)<internal>.*$`)
)

// StripInternal removes every <internal>…</internal> block (across lines, any
// number of them) from an agent's outbound text, and an unclosed <internal>
// up to the end, then trims white space. An empty result means nothing is
// sent.
func StripInternal(text string) string {
	text = internalBlock.ReplaceAllString(text, "")
	text = internalOpen.ReplaceAllString(text, "")
	return strings.TrimSpace(text)
}

var xmlEscaper = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;", `"`, "&quot;", `'`, "&apos;")

// escapeXML escapes text for an XML attribute or element and replaces
// characters XML cannot carry (control characters, invalid UTF-8) with U+FFFD.
func escapeXML(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == utf8.RuneError:
			return unicode.ReplacementChar
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20 || r == 0xFFFE || r == 0xFFFF || (r >= 0xD800 && r <= 0xDFFF):
			return unicode.ReplacementChar
		}
		return r
	}, strings.ToValidUTF8(s, string(unicode.ReplacementChar)))
	return xmlEscaper.Replace(s)
}

// contextLine is the first line of every prompt: the configured timezone and
// the current time in it.
func contextLine(loc *time.Location, now time.Time) string {
	return fmt.Sprintf(`<context timezone="%s" now="%s"/>`, escapeXML(loc.String()), now.In(loc).Format(time.RFC3339))
}

// messageLine renders one message. A message from a sender the group's
// allow list did not admit says so (allowed="no"): context, not a request
// the owner let that sender make.
func messageLine(loc *time.Location, m store.Message) string {
	sender := m.SenderName
	if strings.TrimSpace(sender) == "" {
		sender = m.Sender
	}
	allowed := ""
	if m.NotAllowed {
		allowed = ` allowed="no"`
	}
	return fmt.Sprintf(`<message sender="%s" time="%s"%s>%s</message>`,
		escapeXML(sender), m.SentAt.In(loc).Format(time.RFC3339), allowed, escapeXML(m.Text))
}

func omittedNote(n int) string {
	if n == 1 {
		return "<note>1 earlier message was left out</note>"
	}
	return fmt.Sprintf("<note>%d earlier messages were left out</note>", n)
}

// LeftOutNotice is the one line the chat gets when older messages were left
// out of what its agent read (DESIGN §6: the prompt is capped): the people
// learn it, not only the agent.
func LeftOutNotice(n int) string {
	if n == 1 {
		return "Note: 1 older message was left out of what I read."
	}
	return fmt.Sprintf("Note: %d older messages were left out of what I read.", n)
}

// ActedNotice is the line the chat gets when the agent failed (why) during a
// turn in which it had already acted (scheduled or changed a task, registered
// a group): the turn is not run again, so the agent does not act twice.
func ActedNotice(why error) string {
	return fmt.Sprintf("Sorry, I could not finish my answer: the agent failed (%s) after it had already acted on your message (a task or group change, which was kept). I did not run your message again, so nothing is done twice.",
		Clip(OneLine(why.Error()), 200))
}

// UnfinishedNotice is the line the chat gets when the agent failed (why)
// during a turn after it had already sent a message of its own: the turn is
// not run again, so that message is not sent twice.
func UnfinishedNotice(why error) string {
	return fmt.Sprintf("Sorry, I could not finish my answer: the agent failed (%s) after the message above. I did not run your message again, so nothing is sent twice.",
		Clip(OneLine(why.Error()), 200))
}

// Format renders messages as the agent's prompt (DESIGN §6): a context
// line with the timezone and the current time, then the messages, sender and
// text XML-escaped, times RFC 3339 in loc. omitted earlier messages are
// announced in a note before the first message.
func Format(loc *time.Location, now time.Time, msgs []store.Message, omitted int) string {
	var b strings.Builder
	b.WriteString(contextLine(loc, now))
	b.WriteString("\n<messages>\n")
	if omitted > 0 {
		b.WriteString(omittedNote(omitted))
		b.WriteByte('\n')
	}
	for _, m := range msgs {
		b.WriteString(messageLine(loc, m))
		b.WriteByte('\n')
	}
	b.WriteString("</messages>")
	return b.String()
}

// Fit formats msgs so that the prompt fits in limit bytes (the IPC limit
// on one text): the oldest messages are dropped (and counted in the note)
// until it fits; a single message too long on its own is cut, with a mark
// saying so. It returns the prompt and how many messages it holds.
func Fit(loc *time.Location, now time.Time, msgs []store.Message, omitted, limit int) (string, int) {
	prompt := Format(loc, now, msgs, omitted)
	if len(prompt) <= limit {
		return prompt, len(msgs)
	}
	// Drop the oldest messages until the rest fits; reserve room for the
	// note (at most this long).
	overhead := len(Format(loc, now, nil, omitted+len(msgs))) + 1
	sizes := make([]int, len(msgs))
	total := overhead
	for i, m := range msgs {
		sizes[i] = len(messageLine(loc, m)) + 1
		total += sizes[i]
	}
	first := 0
	for first < len(msgs)-1 && total > limit {
		total -= sizes[first]
		first++
	}
	kept := msgs[first:]
	omitted += first
	prompt = Format(loc, now, kept, omitted)
	if len(prompt) <= limit {
		return prompt, len(kept)
	}
	// One message, still too long: cut its text.
	m := kept[len(kept)-1]
	const mark = "\n[the rest of this message was cut: it is too long]"
	cut := m
	cut.Text = mark
	room := limit - len(Format(loc, now, []store.Message{cut}, omitted))
	keep := len(m.Text)
	for keep > 0 && room > 0 {
		head := TruncateUTF8(m.Text, keep)
		size := len(escapeXML(head))
		if size <= room {
			cut.Text = head + mark
			break
		}
		keep = min(keep*room/size, len(head)-1)
	}
	return Format(loc, now, []store.Message{cut}, omitted), 1
}

// TruncateUTF8 returns the longest prefix of s of at most n bytes that does
// not split a rune.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Task renders a scheduled task's prompt: the context line, then
// the task's prompt (XML-escaped) in a <scheduled_task> element, so the agent
// knows the text was scheduled earlier and is not a new message.
func Task(loc *time.Location, now time.Time, t store.Task) string {
	head := contextLine(loc, now) + "\n" +
		fmt.Sprintf(`<scheduled_task id="%s" schedule="%s %s">`, escapeXML(string(t.ID)), escapeXML(string(t.Kind)), escapeXML(t.Value)) + "\n"
	const tail = "\n</scheduled_task>"
	body := escapeXML(t.Prompt)
	if room := ipc.MaxTextBytes - len(head) - len(tail); len(body) > room {
		body = TruncateUTF8(body, max(room, 0))
		// Never end inside an entity.
		if i := strings.LastIndexByte(body, '&'); i >= 0 && !strings.Contains(body[i:], ";") {
			body = body[:i]
		}
	}
	return head + body + tail
}

// GaveUpNotice is the line the chat gets when its agent failed attempts
// times in a row (why: the last error) and bridged waits for the next
// message.
func GaveUpNotice(attempts int, why string) string {
	return fmt.Sprintf("Sorry, I could not answer: the agent failed %d times in a row (%s). I will try again with your next message.", attempts, Clip(OneLine(why), 200))
}

// TaskFailedNotice is the line a task's chat gets when its run failed.
func TaskFailedNotice(id string, why error) string {
	return fmt.Sprintf("Scheduled task %s failed: %s", id, Clip(OneLine(why.Error()), 200))
}

// Clip shortens s to at most n bytes without splitting a rune, marking the
// cut with an ellipsis.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return TruncateUTF8(s, n) + "…"
}

// OneLine joins s's words with single spaces.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// NewSessionNotice tells a chat that its session ended (the owner's /new);
// atTurnEnd: the turn in progress finishes first, in the old session.
func NewSessionNotice(atTurnEnd bool) string {
	const text = "New session: the next message starts a fresh conversation; files and memory stay."
	if atTurnEnd {
		return text + " The turn in progress finishes first."
	}
	return text
}
