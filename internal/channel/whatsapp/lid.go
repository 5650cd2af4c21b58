package whatsapp

import (
	"context"
	"fmt"
	"slices"

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

// identities knows a person by every form: the phone number whatsmeow's
// LID map gives a LID and the other way round, a user's display name, and
// whether an id is the account itself. It keeps no state: every lookup
// asks whatsmeow's store.
type identities struct {
	*core
}

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

// lidOf is the LID of the direct chat pn, from the message's own addressing
// or else whatsmeow's LID map; empty when unknown.
func (c *identities) lidOf(ctx context.Context, info *types.MessageInfo, pn types.JID) types.JID {
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

func (c *identities) ownLID() types.JID {
	_, lid := c.wa.OwnIDs()
	return lid
}

// isBot reports whether jid is the account itself, by number or LID, also
// when only whatsmeow's LID map links a LID to the account's number.
func (c *identities) isBot(ctx context.Context, jid, ownPN, ownLID types.JID) bool {
	if isOwn(jid, ownPN, ownLID) {
		return true
	}
	if jid.Server != types.HiddenUserServer || ownPN.IsEmpty() {
		return false
	}
	pn, err := c.wa.PNForLID(ctx, jid.ToNonAD())
	return err == nil && !pn.IsEmpty() && isOwn(pn, ownPN, ownLID)
}

// stableUser returns the phone-number form of a user seen as id (and maybe
// alt), resolving LIDs through whatsmeow's LID map; the LID when no phone
// number is known.
func (c *identities) stableUser(ctx context.Context, id, alt types.JID) types.JID {
	id = id.ToNonAD()
	if id.Server != types.HiddenUserServer {
		return id
	}
	if !alt.IsEmpty() && alt.Server == types.DefaultUserServer {
		return alt.ToNonAD()
	}
	pn, err := c.wa.PNForLID(ctx, id)
	if err != nil {
		c.log.Warn().Err(err).Str("lid", id.String()).Msg("cannot resolve LID; keeping it")
		return id
	}
	if pn.IsEmpty() {
		return id
	}
	return pn.ToNonAD()
}

// displayName is how a user is named for the agent: their contact or push
// name, else their phone number, else their LID.
func (c *identities) displayName(ctx context.Context, jid types.JID) string {
	stable := c.stableUser(ctx, jid, types.EmptyJID)
	for _, j := range []types.JID{stable, jid.ToNonAD()} {
		if name := c.wa.ContactName(ctx, j); name != "" {
			return name
		}
	}
	return stable.User
}

// forms are every known form of a user given as ids (phone number and LID,
// without device parts, in the order given): a form none of ids has is
// completed through whatsmeow's LID map.
func (c *identities) forms(ctx context.Context, ids ...types.JID) []types.JID {
	var out []types.JID
	var pn, lid types.JID
	add := func(j types.JID) {
		if j.IsEmpty() || j.User == "" {
			return
		}
		j = j.ToNonAD()
		if slices.Contains(out, j) {
			return
		}
		out = append(out, j)
		switch {
		case j.Server == types.HiddenUserServer && lid.IsEmpty():
			lid = j
		case j.Server == types.DefaultUserServer && pn.IsEmpty():
			pn = j
		}
	}
	for _, j := range ids {
		add(j)
	}
	switch {
	case pn.IsEmpty() && !lid.IsEmpty():
		if p, err := c.wa.PNForLID(ctx, lid); err == nil {
			add(p)
		}
	case lid.IsEmpty() && !pn.IsEmpty():
		if lc, ok := c.wa.(lidClient); ok {
			if l, err := lc.LIDForPN(ctx, pn); err == nil {
				add(l)
			}
		}
	}
	return out
}
