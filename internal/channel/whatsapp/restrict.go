package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/bridged-app/bridged/internal/channel"
)

// ContactHistory is an optional ability of a Sink: whether a direct chat
// ever wrote to this account (a message of it is stored). While WhatsApp
// restricts messaging new contacts, a message to a chat without history is
// refused before it is sent. A sink without it lets every message through
// (WhatsApp then refuses it itself).
type ContactHistory interface {
	// HasHistory reports whether chat has a stored message. It does not
	// block for long; when it cannot tell, it says yes.
	HasHistory(ctx context.Context, chat string) bool
}

// handleReachout applies WhatsApp's reachout timelock: while it is active
// the account may not start conversations with new contacts. It is kept
// across restarts; its end (IsActive false, or the end time passing)
// lifts it.
func (c *restrictions) handleReachout(ctx context.Context, e *events.NotifyAccountReachoutTimelock) {
	now := c.now()
	until := e.TimeEnforcementEnds.Time
	if !e.IsActive || (!until.IsZero() && !until.After(now)) {
		if _, ok := c.cond.get(condTimelock, now); ok {
			c.log.Info().Str("enforcement", e.EnforcementType).Msg("WhatsApp lifted the restriction on messaging new contacts")
		}
		c.drop(ctx, condTimelock)
		return
	}
	c.log.Error().Str("enforcement", e.EnforcementType).Time("until", until).
		Msg("WhatsApp restricts this account from messaging new contacts; messages to chats that never wrote are refused")
	c.keep(ctx, channel.Condition{
		Key: condTimelock, Health: channel.HealthRestricted, Since: now, Until: until,
		Text: timelockText(e.EnforcementType, until),
	})
}

func timelockText(enforcement string, until time.Time) string {
	when := "until WhatsApp lifts it"
	if !until.IsZero() {
		when = "until " + until.UTC().Format("2006-01-02 15:04 UTC")
	}
	why := ""
	if enforcement != "" {
		why = " (" + enforcement + ")"
	}
	return fmt.Sprintf("WhatsApp restricts this account from messaging new contacts %s%s. "+
		"Chats that wrote to this account before keep working; a message to a chat that never wrote is refused "+
		"until then. Nothing to do but wait; sending to new contacts meanwhile can make it longer.", when, why)
}

// noteSuspension applies a group's suspension or its end. A registered
// group's agent is told through a stored message (context for its next
// turn), and the owner through the condition's alert. It reports false
// when the agent's message could not be stored (WhatsApp redelivers).
func (c *restrictions) noteSuspension(ctx context.Context, sink Sink, e *events.GroupInfo) bool {
	if !e.Suspended && !e.Unsuspended {
		return true
	}
	chat := e.JID.ToNonAD()
	key := condSuspend + chat.String()
	log := c.log.With().Str("chat", chat.String()).Logger()
	seen, err := sink.Lookup(ctx, chat.String())
	if err != nil {
		log.Error().Err(err).Msg("cannot look up a group WhatsApp suspended or restored; not acknowledging, WhatsApp will redeliver")
		return false
	}
	if !seen.Registered {
		log.Info().Bool("suspended", e.Suspended).Msg("WhatsApp changed the suspension of a group that is not registered")
		return true
	}
	at := e.Timestamp
	if at.IsZero() {
		at = c.now()
	}
	text := "[WhatsApp lifted this group's suspension: messages to it are sent again.]"
	if e.Suspended {
		text = "[WhatsApp suspended this group: bridged cannot send to it until WhatsApp lifts the suspension, " +
			"so replies written meanwhile are not delivered.]"
	}
	msg := channel.Message{
		Chat: chat.String(), IsGroup: true, ExternalID: "bridged-suspension-" + strconv.FormatInt(at.UnixNano(), 36),
		Sender: types.ServerJID.String(), SenderName: "WhatsApp", Text: text, SentAt: at,
	}
	if _, err := sink.Inbound(ctx, seen, msg); err != nil {
		log.Error().Err(err).Msg("cannot store the suspension notice; not acknowledging, WhatsApp will redeliver")
		return false
	}
	if e.Unsuspended {
		log.Info().Msg("WhatsApp lifted a group's suspension")
		c.drop(ctx, key)
		return true
	}
	log.Error().Msg("WhatsApp suspended a group; messages to it are refused")
	c.keep(ctx, suspensionCondition(chat.String(), at))
	return true
}

// refuse refuses a send that WhatsApp's restrictions forbid: to
// a suspended group, or, under a reachout timelock, to a direct chat that
// never wrote to this account. The error wraps channel.ErrPermanent and
// says why.
func (c *restrictions) refuse(ctx context.Context, chat string, to types.JID) error {
	now := c.now()
	if to.Server == types.GroupServer {
		if _, ok := c.cond.get(condSuspend+to.String(), now); ok {
			return fmt.Errorf("send to %s: WhatsApp suspended this group; nothing is sent to it until WhatsApp lifts the suspension: %w",
				chat, channel.ErrPermanent)
		}
		return nil
	}
	lock, ok := c.cond.get(condTimelock, now)
	if !ok || c.hasHistory(ctx, to) {
		return nil
	}
	until := "until WhatsApp lifts it"
	if !lock.Until.IsZero() {
		until = "until " + lock.Until.UTC().Format("2006-01-02 15:04 UTC")
	}
	return fmt.Errorf("send to %s: WhatsApp restricts this account from messaging new contacts %s, and this chat never wrote to it: %w",
		chat, until, channel.ErrPermanent)
}

// hasHistory asks the sink whether a direct chat wrote before, under its
// phone number and its LID. A sink that cannot tell lets it through.
func (c *restrictions) hasHistory(ctx context.Context, to types.JID) bool {
	h, ok := c.sink.(ContactHistory)
	if !ok {
		return true
	}
	if h.HasHistory(ctx, to.String()) {
		return true
	}
	if to.Server == types.HiddenUserServer {
		if pn, err := c.wa.PNForLID(ctx, to); err == nil && !pn.IsEmpty() {
			return h.HasHistory(ctx, pn.ToNonAD().String())
		}
	}
	return false
}

// banUntil is " until <time>" for a temporary ban with a known expiry.
func banUntil(e *events.TemporaryBan, now time.Time) string {
	if e.Expire <= 0 {
		return ""
	}
	return " until " + now.Add(e.Expire).UTC().Format("2006-01-02 15:04 UTC")
}

// syncSuspension corrects a registered group's suspension from the group
// list (a notification missed while offline): the condition is set or
// cleared to match what WhatsApp says now.
func (c *restrictions) syncSuspension(ctx context.Context, sink Sink, g GroupInfo) {
	key := condSuspend + g.ID
	_, kept := c.cond.get(key, c.now())
	if kept == g.Suspended {
		return
	}
	// When the registry cannot tell, the group counts as registered: a
	// condition too many is told, none is missed.
	if seen, err := sink.Lookup(ctx, g.ID); err == nil && !seen.Registered {
		return
	}
	if !g.Suspended {
		c.log.Info().Str("chat", g.ID).Msg("WhatsApp no longer lists the group as suspended")
		c.drop(ctx, key)
		return
	}
	c.log.Error().Str("chat", g.ID).Msg("WhatsApp lists a group as suspended; messages to it are refused")
	c.keep(ctx, suspensionCondition(g.ID, c.now()))
}

func suspensionCondition(chat string, since time.Time) channel.Condition {
	return channel.Condition{
		Key: condSuspend + chat, Health: channel.HealthRestricted, Since: since,
		Text: fmt.Sprintf("WhatsApp suspended the group %s: bridged cannot send to it. "+
			"Messages to it are refused until WhatsApp lifts the suspension (a group admin can appeal in WhatsApp).", chat),
	}
}

// A send WhatsApp refuses with error 463 (the account may not reach out to
// new contacts) is the timelock told by the send itself, not by
// events.NotifyAccountReachoutTimelock: WhatsApp gives no end, so bridged
// assumes one of reachoutAssumed (a later 463 or the event tells it again;
// the event's IsActive false lifts it at once).
const (
	errCodeReachout = 463
	reachoutAssumed = 24 * time.Hour
)

// isReachoutRefusal reports whether err is WhatsApp's answer 463 to a send
// (whatsmeow: "server returned error 463").
func isReachoutRefusal(err error) bool {
	return errors.Is(err, whatsmeow.ErrServerReturnedError) &&
		strings.HasSuffix(err.Error(), " "+strconv.Itoa(errCodeReachout))
}

// sendError classifies a failed send to to; a reachout refusal of a
// direct chat also starts the timelock (kept, shown in status, told to the
// owner once), unless one is in force already, and says so.
func (c *restrictions) sendError(ctx context.Context, to types.JID, err error) error {
	if !isReachoutRefusal(err) || to.Server == types.GroupServer {
		return classifySendError(err)
	}
	now := c.now()
	if _, ok := c.cond.get(condTimelock, now); !ok {
		until := now.Add(reachoutAssumed)
		c.log.Error().Str("chat", to.String()).Time("until", until).
			Msg("WhatsApp refused a message to a new contact (463): this account may not message new contacts; messages to chats that never wrote are refused")
		c.keep(ctx, channel.Condition{
			Key: condTimelock, Health: channel.HealthRestricted, Since: now, Until: until,
			Text: timelockText("refused a message with error 463; bridged assumes 24 hours", until),
		})
	}
	return permanentError{fmt.Errorf("WhatsApp refuses messages from this account to new contacts for now (error %d, reachout timelock): %w",
		errCodeReachout, err)}
}
