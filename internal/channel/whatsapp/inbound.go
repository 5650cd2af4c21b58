package whatsapp

import (
	"context"
	"fmt"
	"strings"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/ingest"
)

// inbound owns what is received: a message is put in its chat's stable
// form, converted for a registered chat, and handed to the sink (or only
// its chat recorded).
type inbound struct {
	*core
	ids    *identities
	groups *groupSync // a sender's admin status
	sent   *recentIDs // what the sender sent: an echo of one is the bot's
}

// chatSeen records chat's metadata through sink; false withholds the
// acknowledgement.
func (c *inbound) chatSeen(ctx context.Context, sink Sink, chat types.JID, name string, isGroup bool) bool {
	if err := sink.ChatSeen(ctx, chat.String(), name, isGroup); err != nil {
		c.log.Error().Err(err).Str("chat", chat.String()).Msg("cannot record chat; WhatsApp will redeliver")
		return false
	}
	return true
}

// handle stores a message of a registered chat through the sink's
// Inbound, which records its chat in the same commit; for any other message
// only the chat is recorded, through ChatSeen. Either way the chat is
// written once per message. It returns true once everything was committed
// (or there was nothing to store).
func (c *inbound) handle(ctx context.Context, sink Sink, evt *events.Message) bool {
	info := &evt.Info
	if isHousekeeping(evt.Message) {
		return true // key shares, history-sync notices, revokes: not chat activity
	}
	chat, ok := c.chatOf(ctx, info)
	if !ok {
		return true
	}
	chat, seen, err := c.registeredForm(ctx, sink, info, chat)
	if err != nil {
		c.log.Error().Err(err).Str("chat", chat.String()).Str("message_id", info.ID).
			Msg("cannot look up the chat of a WhatsApp message; not acknowledging, WhatsApp will redeliver")
		return false
	}
	isGroup := chat.Server == types.GroupServer
	name := ""
	if !isGroup && !info.IsFromMe {
		name = info.PushName
	}
	if !seen.Registered {
		return c.chatSeen(ctx, sink, chat, name, isGroup)
	}
	msg, ok := c.convert(ctx, sink, evt, chat)
	if !ok {
		return c.chatSeen(ctx, sink, chat, name, isGroup)
	}
	log := c.log.With().Str("chat", msg.Chat).Str("message_id", msg.ExternalID).Logger()
	id, err := sink.Inbound(ctx, seen, msg)
	if err != nil {
		log.Error().Err(err).Msg("cannot store WhatsApp message; not acknowledging, WhatsApp will redeliver")
		return false
	}
	log.Debug().Int64("id", int64(id)).Str("sender", msg.Sender).Bool("from_me", msg.FromMe).Bool("is_bot", msg.IsBot).
		Bool("mentioned", msg.Mentioned).Str("text", msg.Text).Msg("stored WhatsApp message")
	return true
}

// isHousekeeping reports messages that carry no content at all: protocol
// messages other than edits, and key distribution alone.
func isHousekeeping(m *waE2E.Message) bool {
	if m == nil {
		return true
	}
	if pm := m.GetProtocolMessage(); pm != nil {
		return pm.GetType() != waE2E.ProtocolMessage_MESSAGE_EDIT
	}
	content := false
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		switch fd.Name() {
		case "senderKeyDistributionMessage", "fastRatchetKeySenderKeyDistributionMessage", "messageContextInfo":
			return true
		}
		content = true
		return false
	})
	return !content
}

// convert builds the channel message for a registered chat, with a
// reference to its media, which the media worker fetches once the message
// is stored; a reaction becomes a message with Reaction set (owner.go). ok
// is false when the message is neither a prompt nor a reaction.
func (c *inbound) convert(ctx context.Context, sink Sink, evt *events.Message, chat types.JID) (channel.Message, bool) {
	info := &evt.Info
	if r := evt.Message.GetReactionMessage(); r != nil {
		return c.reaction(ctx, evt, chat, r), true
	}
	ct, ok := describe(evt.Message)
	if !ok {
		return channel.Message{}, false
	}
	ownPN, ownLID := c.wa.OwnIDs()
	msg := channel.Message{
		Chat:       chat.String(),
		IsGroup:    chat.Server == types.GroupServer,
		ExternalID: info.ID,
		SentAt:     info.Timestamp,
		FromMe:     c.fromOwner(ctx, info, ownPN, ownLID),
		QuotedID:   quotedID(ct.ctx),
	}
	c.setSender(ctx, &msg, info, ownPN)
	if msg.FromMe && (c.sent.has(info.ID) || sink.IsOwnMessage(ctx, msg.Chat, info.ID)) {
		msg.IsBot = true
		msg.SenderName = c.opts.AssistantName
	}
	if !msg.IsGroup {
		msg.ChatName = msg.SenderName
		if msg.FromMe {
			msg.ChatName = ""
		}
	}

	var tail string
	if q := c.quote(ctx, ct.ctx, ownPN, ownLID); q != "" {
		tail = "\n" + q // starts with channel.QuoteNote
	}
	if ct.media != nil {
		// The media is fetched after the message is stored (internal/media);
		// until then the text's placeholder says it is downloading.
		head, mentioned := c.rewriteMentions(ctx, strings.TrimSpace(ct.text), ct.ctx.GetMentionedJID(), ownPN, ownLID)
		if head != "" {
			head += "\n"
		}
		if msg.Media = mediaOf(info, ct, head, tail); msg.Media != nil {
			msg.Mentioned = mentioned
			msg.Text = msg.Media.Text(msg.Media.Pending())
			return msg, true
		}
	}
	text, mentioned := c.rewriteMentions(ctx, ct.render(""), ct.ctx.GetMentionedJID(), ownPN, ownLID)
	msg.Text, msg.Mentioned = text+tail, mentioned
	return msg, true
}

// chatOf is the chat a message belongs to, in its stable form. ok is false
// for chats bridged ignores (status updates, newsletters, bots).
func (c *inbound) chatOf(ctx context.Context, info *types.MessageInfo) (types.JID, bool) {
	chat := info.Chat.ToNonAD()
	switch chat.Server {
	case types.GroupServer:
		return chat, true // group ids are the same in LID and PN addressing
	case types.BroadcastServer:
		if chat == types.StatusBroadcastJID || info.IsFromMe {
			return types.EmptyJID, false
		}
		// A broadcast-list message shows up in the direct chat with its sender.
		return c.ids.stableUser(ctx, info.Sender, info.SenderAlt), true
	case types.DefaultUserServer:
		return chat, true
	case types.HiddenUserServer:
		switch {
		case !info.IsFromMe && info.Sender.ToNonAD() == chat:
			return c.ids.stableUser(ctx, chat, info.SenderAlt), true
		case info.IsFromMe:
			return c.ids.stableUser(ctx, chat, info.RecipientAlt), true
		}
		return c.ids.stableUser(ctx, chat, types.EmptyJID), true
	}
	return types.EmptyJID, false
}

// senderOf is the message's sender in its stable form: the account's
// number for the owner's own messages.
func (c *inbound) senderOf(ctx context.Context, info *types.MessageInfo, fromMe bool, ownPN types.JID) types.JID {
	if fromMe && !ownPN.IsEmpty() {
		return ownPN
	}
	return c.ids.stableUser(ctx, info.Sender, info.SenderAlt)
}

// isOwn reports whether jid is the account itself, as a number or a LID.
func isOwn(jid, ownPN, ownLID types.JID) bool {
	jid = jid.ToNonAD()
	return (!ownPN.IsEmpty() && jid.User == ownPN.User && jid.Server == ownPN.Server) ||
		(!ownLID.IsEmpty() && jid.User == ownLID.User && jid.Server == ownLID.Server)
}

// rewriteMentions makes WhatsApp's "@<number>" mentions readable: the bot's
// own number or LID becomes "@<assistant name>" (and sets mentioned), other
// people their name or phone number.
func (c *inbound) rewriteMentions(ctx context.Context, text string, jids []string, ownPN, ownLID types.JID) (string, bool) {
	mentioned := false
	for _, raw := range jids {
		jid, err := types.ParseJID(raw)
		if err != nil || jid.User == "" {
			continue
		}
		var name string
		if c.ids.isBot(ctx, jid, ownPN, ownLID) {
			mentioned = true
			name = c.opts.AssistantName
		} else {
			name = c.ids.displayName(ctx, jid)
		}
		if name != "" && name != jid.User {
			text = replaceMention(text, jid.User, name)
		}
	}
	return text, mentioned
}

// quote renders the message a reply refers to, or "".
func (c *inbound) quote(ctx context.Context, ci *waE2E.ContextInfo, ownPN, ownLID types.JID) string {
	if ci.GetQuotedMessage() == nil && ci.GetStanzaID() == "" {
		return ""
	}
	who := "a message"
	if p, err := types.ParseJID(ci.GetParticipant()); err == nil && p.User != "" {
		if c.ids.isBot(ctx, p, ownPN, ownLID) {
			who = c.opts.AssistantName
		} else {
			who = c.ids.displayName(ctx, p)
		}
	}
	s := snippet(ci.GetQuotedMessage())
	if s == "" {
		return fmt.Sprintf("%s%s]", channel.QuoteNote[1:], who)
	}
	return fmt.Sprintf("%s%s: \"%s\"]", channel.QuoteNote[1:], who, s)
}

// replaceMention replaces "@<user>" (not followed by another digit) with
// "@<name>".
func replaceMention(text, user, name string) string {
	needle := "@" + user
	var b strings.Builder
	for {
		i := strings.Index(text, needle)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		end := i + len(needle)
		b.WriteString(text[:i])
		if end < len(text) && text[end] >= '0' && text[end] <= '9' {
			b.WriteString(needle)
		} else {
			b.WriteString("@" + name)
		}
		text = text[end:]
	}
}

// registeredForm looks the chat of a message up, once: it returns chat
// itself (its stable form) as the sink's Lookup found it, unless chat is a
// direct chat that is not registered but its LID is (a second lookup, only
// then).
func (c *inbound) registeredForm(ctx context.Context, sink Sink, info *types.MessageInfo, chat types.JID) (types.JID, ingest.Changed, error) {
	seen, err := sink.Lookup(ctx, chat.String())
	if err != nil || seen.Registered || chat.Server != types.DefaultUserServer {
		return chat, seen, err
	}
	lid := c.ids.lidOf(ctx, info, chat)
	if lid.IsEmpty() {
		return chat, seen, nil
	}
	if byLID, err := sink.Lookup(ctx, lid.String()); err != nil || byLID.Registered {
		return lid, byLID, err
	}
	return chat, seen, nil
}
