package whatsapp

import (
	"context"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/bridged-app/bridged/internal/channel"
)

// The owner's answers. bridged runs as the owner's own account, so the
// owner's messages are the account's own: FromMe is true for a message
// whose sender (as the server addressed it) is the account, in its
// phone-number or its LID form, with device parts stripped, also when only
// whatsmeow's LID map links the LID to the account's number. Nothing a
// message says about itself counts: a quote that names the owner as the
// quoted message's participant (ContextInfo.Participant) says nothing about
// who sent the message. A reply carries the id of the message it quotes
// (QuotedID); a reaction reaches the sink as a message with Reaction set
// and no text, which is never a prompt.

// fromOwner reports whether the message with info was sent by the account
// itself.
func (c *inbound) fromOwner(ctx context.Context, info *types.MessageInfo, ownPN, ownLID types.JID) bool {
	if ownPN.IsEmpty() && ownLID.IsEmpty() {
		return info.IsFromMe // not logged in: only whatsmeow can tell
	}
	for _, j := range []types.JID{info.Sender, info.SenderAlt} {
		if !j.IsEmpty() && c.ids.isBot(ctx, j, ownPN, ownLID) {
			return true
		}
	}
	return false
}

// quotedID is the id of the message ci quotes, "" when none.
func quotedID(ci *waE2E.ContextInfo) string {
	return ci.GetStanzaID()
}

// reaction builds the channel message for a reaction in a registered chat:
// no text, the reacted message's id and the emoji ("" when the reaction is
// removed).
func (c *inbound) reaction(ctx context.Context, evt *events.Message, chat types.JID, r *waE2E.ReactionMessage) channel.Message {
	info := &evt.Info
	ownPN, ownLID := c.wa.OwnIDs()
	msg := channel.Message{
		Chat:       chat.String(),
		IsGroup:    chat.Server == types.GroupServer,
		ExternalID: info.ID,
		SentAt:     info.Timestamp,
		FromMe:     c.fromOwner(ctx, info, ownPN, ownLID),
		Reaction:   &channel.Reaction{TargetID: r.GetKey().GetID(), Emoji: r.GetText()},
	}
	c.setSender(ctx, &msg, info, ownPN)
	return msg
}

// setSender fills in who sent msg: its stable id, its other ids, its name
// and whether it is an admin of the group.
func (c *inbound) setSender(ctx context.Context, msg *channel.Message, info *types.MessageInfo, ownPN types.JID) {
	sender := c.senderOf(ctx, info, msg.FromMe, ownPN)
	msg.Sender = sender.String()
	msg.SenderName = info.PushName
	if msg.SenderName == "" {
		msg.SenderName = sender.User
	}
	if msg.FromMe {
		return
	}
	forms := c.ids.forms(ctx, sender, info.Sender, info.SenderAlt)
	for _, f := range forms {
		if f != sender {
			msg.SenderAlt = append(msg.SenderAlt, f.String())
		}
	}
	if msg.IsGroup {
		msg.SenderAdmin = c.groups.isAdmin(ctx, info.Chat.ToNonAD(), forms)
	}
}
