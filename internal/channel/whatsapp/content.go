package whatsapp

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
)

// quoteMaxRunes bounds the quoted text shown with a reply.
const quoteMaxRunes = 200

// content is what a WhatsApp message says, before media are fetched.
type content struct {
	text   string // the text or caption, as typed
	label  string // placeholder label ("image", `document "a.pdf"`); "" for plain text
	detail string // placeholder detail (coordinates, names)
	media  *media // downloadable attachment, when bridged saves this kind
	ctx    *waE2E.ContextInfo
}

// media is an attachment bridged may save into the group's inbox/.
type media struct {
	msg      whatsmeow.DownloadableMessage
	size     uint64
	mime     string
	fileName string
	voice    bool // a voice note, to transcribe
	seconds  int  // announced length of audio
}

// describe turns a (whatsmeow-unwrapped) message into content. ok is false
// for messages that are not prompts: reactions (handed on as reactions by
// convert), revokes, poll votes, protocol and empty messages.
func describe(m *waE2E.Message) (c content, ok bool) {
	if m == nil {
		return content{}, false
	}
	if pm := m.GetProtocolMessage(); pm != nil {
		if pm.GetType() == waE2E.ProtocolMessage_MESSAGE_EDIT && pm.GetEditedMessage() != nil {
			return describe(pm.GetEditedMessage())
		}
		return content{}, false
	}
	switch {
	case strings.TrimSpace(m.GetConversation()) != "":
		return content{text: m.GetConversation()}, true
	case m.GetExtendedTextMessage() != nil:
		x := m.GetExtendedTextMessage()
		if strings.TrimSpace(x.GetText()) == "" {
			return content{}, false
		}
		return content{text: x.GetText(), ctx: x.GetContextInfo()}, true
	case m.GetImageMessage() != nil:
		x := m.GetImageMessage()
		return content{text: x.GetCaption(), label: "image", ctx: x.GetContextInfo(),
			media: &media{msg: x, size: x.GetFileLength(), mime: x.GetMimetype()}}, true
	case m.GetVideoMessage() != nil:
		x := m.GetVideoMessage()
		return content{text: x.GetCaption(), label: "video", ctx: x.GetContextInfo()}, true
	case m.GetPtvMessage() != nil:
		return content{label: "video note", ctx: m.GetPtvMessage().GetContextInfo()}, true
	case m.GetAudioMessage() != nil:
		x := m.GetAudioMessage()
		if !x.GetPTT() {
			return content{label: "audio", ctx: x.GetContextInfo()}, true
		}
		return content{label: "voice note", ctx: x.GetContextInfo(),
			media: &media{msg: x, size: x.GetFileLength(), mime: x.GetMimetype(), voice: true, seconds: int(x.GetSeconds())}}, true
	case m.GetDocumentMessage() != nil:
		x := m.GetDocumentMessage()
		name := oneLine(x.GetFileName())
		if name == "" {
			name = oneLine(x.GetTitle())
		}
		label := "document"
		if name != "" {
			label = fmt.Sprintf("document %q", name)
		}
		return content{text: x.GetCaption(), label: label, ctx: x.GetContextInfo(),
			media: &media{msg: x, size: x.GetFileLength(), mime: x.GetMimetype(), fileName: name}}, true
	case m.GetStickerMessage() != nil:
		return content{label: "sticker", ctx: m.GetStickerMessage().GetContextInfo()}, true
	case m.GetLocationMessage() != nil:
		x := m.GetLocationMessage()
		return content{label: "location", ctx: x.GetContextInfo(),
			detail: place(x.GetDegreesLatitude(), x.GetDegreesLongitude(), x.GetName(), x.GetAddress())}, true
	case m.GetLiveLocationMessage() != nil:
		x := m.GetLiveLocationMessage()
		return content{text: x.GetCaption(), label: "live location", ctx: x.GetContextInfo(),
			detail: place(x.GetDegreesLatitude(), x.GetDegreesLongitude(), "", "")}, true
	case m.GetContactMessage() != nil:
		x := m.GetContactMessage()
		return content{label: "contact", detail: oneLine(x.GetDisplayName()), ctx: x.GetContextInfo()}, true
	case m.GetContactsArrayMessage() != nil:
		x := m.GetContactsArrayMessage()
		names := make([]string, 0, len(x.GetContacts()))
		for _, ct := range x.GetContacts() {
			if n := oneLine(ct.GetDisplayName()); n != "" {
				names = append(names, n)
			}
		}
		return content{label: "contacts", detail: strings.Join(names, ", "), ctx: x.GetContextInfo()}, true
	case pollOf(m) != nil:
		x := pollOf(m)
		opts := make([]string, 0, len(x.GetOptions()))
		for _, o := range x.GetOptions() {
			opts = append(opts, oneLine(o.GetOptionName()))
		}
		detail := oneLine(x.GetName())
		if len(opts) > 0 {
			detail += " (options: " + strings.Join(opts, " / ") + ")"
		}
		return content{label: "poll", detail: detail, ctx: x.GetContextInfo()}, true
	case m.GetEventMessage() != nil:
		x := m.GetEventMessage()
		return content{label: "event", detail: oneLine(x.GetName()), ctx: x.GetContextInfo()}, true
	case m.GetGroupInviteMessage() != nil:
		x := m.GetGroupInviteMessage()
		return content{text: x.GetCaption(), label: "group invite", detail: oneLine(x.GetGroupName()), ctx: x.GetContextInfo()}, true
	}
	// Reactions, poll votes, pins, keep-in-chat, key distribution and
	// anything unknown: not a prompt.
	return content{}, false
}

func pollOf(m *waE2E.Message) *waE2E.PollCreationMessage {
	for _, p := range []*waE2E.PollCreationMessage{m.GetPollCreationMessage(), m.GetPollCreationMessageV2(),
		m.GetPollCreationMessageV3(), m.GetPollCreationMessageV5(), m.GetPollCreationMessageV6()} {
		if p != nil {
			return p
		}
	}
	if inner := m.GetPollCreationMessageV4().GetMessage(); inner != nil {
		return pollOf(inner)
	}
	return nil
}

func place(lat, lon float64, name, address string) string {
	s := fmt.Sprintf("%.5f, %.5f", lat, lon)
	var extra []string
	for _, v := range []string{oneLine(name), oneLine(address)} {
		if v != "" {
			extra = append(extra, v)
		}
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	return s
}

// placeholder renders "[label]" or "[label: detail]".
func placeholder(label, detail string) string {
	if detail == "" {
		return "[" + label + "]"
	}
	return "[" + label + ": " + detail + "]"
}

// render joins the text and the placeholder: the text first, so a caption
// that starts with the trigger still triggers.
func (c content) render(detail string) string {
	if detail == "" {
		detail = c.detail
	}
	text := strings.TrimSpace(c.text)
	if c.label == "" {
		return text
	}
	ph := placeholder(c.label, detail)
	if text == "" {
		return ph
	}
	return text + "\n" + ph
}

// snippet is a one-line, bounded rendering of a quoted message.
func snippet(m *waE2E.Message) string {
	c, ok := describe(m)
	if !ok {
		return ""
	}
	return truncate(oneLine(c.render("")), quoteMaxRunes)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}
