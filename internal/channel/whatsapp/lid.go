package whatsapp

import (
	"context"
	"fmt"

	"go.mau.fi/whatsmeow/types"
)

// LIDs first. WhatsApp now addresses people by LID (…@lid) and sends direct
// messages to the LID; bridged keys a person and a direct chat by the phone
// number whenever whatsmeow's LID map knows it (stableUser), so a chat
// registered by phone number keeps receiving when WhatsApp switches to the
// LID. A direct chat registered by its LID before its number was known
// keeps that id: a message whose stable form is not registered goes to the
// registered LID form instead, so no stored id needs migrating. Every lookup
// asks whatsmeow's store, which keeps the LID map current; bridged caches
// none of it. A mention of the bot counts by number or LID, also when only
// the LID map links the mentioned LID to the bot's number.

// lidClient is the reverse lookup of whatsmeow's LID map.
type lidClient interface {
	// LIDForPN looks up the LID of a phone number; an empty JID and a nil
	// error mean no mapping is known.
	LIDForPN(ctx context.Context, pn types.JID) (types.JID, error)
}

var _ lidClient = realClient{}

func (r realClient) LIDForPN(ctx context.Context, pn types.JID) (types.JID, error) {
	if r.Store == nil || r.Store.LIDs == nil {
		return types.EmptyJID, nil // not paired: no LID map
	}
	lid, err := r.Store.LIDs.GetLIDForPN(ctx, pn)
	if err != nil {
		return types.EmptyJID, fmt.Errorf("look up LID of %s: %w", pn, err)
	}
	return lid, nil
}

// registeredForm returns the form of a direct chat that is registered: chat
// itself (its stable form) unless only its LID is registered.
func (c *Client) registeredForm(ctx context.Context, sink Sink, info *types.MessageInfo, chat types.JID) types.JID {
	if chat.Server != types.DefaultUserServer || sink.IsRegistered(ctx, chat.String()) {
		return chat
	}
	lid := c.lidOf(ctx, info, chat)
	if !lid.IsEmpty() && sink.IsRegistered(ctx, lid.String()) {
		return lid
	}
	return chat
}

// lidOf is the LID of the direct chat pn, from the message's own addressing
// or else whatsmeow's LID map; empty when unknown.
func (c *Client) lidOf(ctx context.Context, info *types.MessageInfo, pn types.JID) types.JID {
	for _, j := range []types.JID{info.Chat, info.Sender, info.SenderAlt, info.RecipientAlt} {
		if j.Server == types.HiddenUserServer {
			if j = j.ToNonAD(); j != c.ownLID() {
				return j
			}
		}
	}
	lc, ok := c.wa.(lidClient)
	if !ok {
		return types.EmptyJID
	}
	lid, err := lc.LIDForPN(ctx, pn)
	if err != nil {
		c.log.Warn().Err(err).Str("pn", pn.String()).Msg("cannot look up LID")
		return types.EmptyJID
	}
	return lid.ToNonAD()
}

func (c *Client) ownLID() types.JID {
	_, lid := c.wa.OwnIDs()
	return lid
}

// isBot reports whether jid is the account itself, by number or LID, also
// when only whatsmeow's LID map links a LID to the account's number.
func (c *Client) isBot(ctx context.Context, jid, ownPN, ownLID types.JID) bool {
	if isOwn(jid, ownPN, ownLID) {
		return true
	}
	if jid.Server != types.HiddenUserServer || ownPN.IsEmpty() {
		return false
	}
	pn, err := c.wa.PNForLID(ctx, jid.ToNonAD())
	return err == nil && !pn.IsEmpty() && isOwn(pn, ownPN, ownLID)
}
