package whatsapp

import (
	"context"
	"fmt"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/bridged-app/bridged/internal/channel"
)

// Phone liveness. WhatsApp drops a linked device when the phone has not
// been online for about 14 days. bridged records when it last saw the
// phone (a receipt or a message sent from the phone itself, a media retry
// answer), keeps it in the device store across restarts, and:
//   - from PhonePingAfter on, pings the phone (an app-state key request to
//     the account's own devices, which wakes the phone's WhatsApp) at most
//     once per PhonePingInterval, after the offline backlog and every
//     phoneCheckInterval while connected;
//   - from PhoneWarnAfter on, Status shows the condition "phone-offline"
//     (health phone-offline), which the owner is told once, like every
//     condition, until the phone is seen again.
//
// A phone never seen since bridged started tracking counts as seen: the
// clock starts at the first connection.
const (
	PhoneWarnAfter     = 12 * 24 * time.Hour
	PhonePingAfter     = 10 * 24 * time.Hour
	PhonePingInterval  = 24 * time.Hour
	phoneSeenPrecision = time.Hour // a newer sighting is written at most this often
	kvPhoneSeen        = "phone_last_seen"
	kvPhonePinged      = "phone_last_pinged"
	// phoneCheckInterval is how often a connected client checks whether
	// the phone is due a ping.
	phoneCheckInterval = time.Hour
)

// handleLivenessEvent notes the phone's sightings and pings it after the
// offline backlog.
func (c *Client) handleLivenessEvent(evt any) {
	switch e := evt.(type) {
	case *events.Receipt:
		if e.IsFromMe && e.Sender.Device == 0 {
			c.phoneSeen(e.Timestamp)
		}
	case *events.MediaRetry:
		c.phoneSeen(e.Timestamp)
	case *events.Message:
		if e.Info.IsFromMe && e.Info.Sender.Device == 0 && e.SourceWebMsg == nil {
			c.phoneSeen(e.Info.Timestamp)
		}
	case *events.Connected:
		c.loadLiveness(c.base)
		c.startPhoneClock()
	case *events.OfflineSyncCompleted:
		c.maybePingPhone()
	}
}

// loadLiveness reads the last sighting and ping once.
func (c *Client) loadLiveness(ctx context.Context) {
	u := c.upkeep
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.loaded {
		return
	}
	seen, err := readTime(ctx, u.kv, kvPhoneSeen)
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot read when the phone was last seen")
	}
	pinged, err := readTime(ctx, u.kv, kvPhonePinged)
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot read when the phone was last pinged")
	}
	u.phoneSeen = later(u.phoneSeen, seen)
	u.phoneSaved = seen
	u.pingAt = later(u.pingAt, pinged)
	u.loaded = true
}

// startPhoneClock counts a phone never seen as seen now, so that an old
// pairing without a record starts its count at the first connection.
func (c *Client) startPhoneClock() {
	u := c.upkeep
	u.mu.Lock()
	unknown := u.phoneSeen.IsZero()
	u.mu.Unlock()
	if unknown {
		c.phoneSeen(c.now())
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// phoneSeen records that the phone was online at ts.
func (c *Client) phoneSeen(ts time.Time) {
	if ts.IsZero() {
		ts = c.now()
	}
	c.loadLiveness(c.base)
	u := c.upkeep
	u.mu.Lock()
	if !ts.After(u.phoneSeen) {
		u.mu.Unlock()
		return
	}
	wasOffline := !u.phoneSeen.IsZero() && c.now().Sub(u.phoneSeen) >= PhoneWarnAfter
	u.phoneSeen = ts
	save := ts.Sub(u.phoneSaved) >= phoneSeenPrecision
	if save {
		u.phoneSaved = ts
	}
	u.mu.Unlock()
	if wasOffline {
		c.log.Info().Time("seen_at", ts).Msg("the phone is online again")
	}
	if save {
		if err := writeTime(c.base, u.kv, kvPhoneSeen, ts); err != nil {
			c.log.Warn().Err(err).Msg("cannot record when the phone was last seen")
		}
	}
}

// PhoneLastSeen is when the phone was last seen online, zero when unknown.
func (c *Client) PhoneLastSeen() time.Time {
	c.upkeep.mu.Lock()
	defer c.upkeep.mu.Unlock()
	return c.upkeep.phoneSeen
}

// phoneOffline reports how long the phone has not been seen, 0 when it was
// never seen.
func (c *Client) phoneOffline() time.Duration {
	seen := c.PhoneLastSeen()
	if seen.IsZero() {
		return 0
	}
	return max(0, c.now().Sub(seen))
}

// maybePingPhone pings the phone when it has not been seen for
// PhonePingAfter and was not pinged in the last PhonePingInterval. The
// ping runs on its own goroutine.
func (c *Client) maybePingPhone() {
	u := c.upkeep
	now := c.now()
	u.mu.Lock()
	due := !u.phoneSeen.IsZero() && now.Sub(u.phoneSeen) >= PhonePingAfter &&
		(u.pingAt.IsZero() || now.Sub(u.pingAt) >= PhonePingInterval)
	if due {
		u.pingAt = now // claimed: one ping at a time, one a day
	}
	u.mu.Unlock()
	if !due {
		return
	}
	c.background(func() { c.pingPhone(c.base, now) })
}

// pingPhone sends the account's own devices an app-state key request for
// the newest key, which the phone answers when its WhatsApp runs.
func (c *Client) pingPhone(ctx context.Context, now time.Time) {
	pn, _ := c.wa.OwnIDs()
	if pn.IsEmpty() {
		return
	}
	keyIDs := []*waE2E.AppStateSyncKeyId{}
	if id, err := c.upkeepWA().LatestAppStateKeyID(ctx); err != nil {
		c.log.Warn().Err(err).Msg("cannot read the newest app state key; pinging the phone without it")
	} else if id != nil {
		keyIDs = append(keyIDs, &waE2E.AppStateSyncKeyId{KeyID: id})
	}
	msg := &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{
		Type:                   waE2E.ProtocolMessage_APP_STATE_SYNC_KEY_REQUEST.Enum(),
		AppStateSyncKeyRequest: &waE2E.AppStateSyncKeyRequest{KeyIDs: keyIDs},
	}}
	if _, err := c.wa.SendMessage(ctx, pn.ToNonAD(), msg, whatsmeow.SendRequestExtra{Peer: true, ID: NewMessageID()}); err != nil {
		c.log.Warn().Err(err).Msg("cannot ping the phone")
		return
	}
	if err := writeTime(ctx, c.upkeep.kv, kvPhonePinged, now); err != nil {
		c.log.Warn().Err(err).Msg("cannot record the phone ping")
	}
	c.log.Info().Time("phone_last_seen", c.PhoneLastSeen()).Msg("pinged the phone: it has not been seen for over 10 days")
}

// phoneCondition is the phone-offline condition of Status; ok is false
// while the phone was seen in the last PhoneWarnAfter.
func (c *Client) phoneCondition() (cond channel.Condition, ok bool) {
	seen := c.PhoneLastSeen()
	off := c.phoneOffline()
	if off < PhoneWarnAfter {
		return channel.Condition{}, false
	}
	return channel.Condition{
		Key: condPhoneOffline, Health: channel.HealthPhoneOffline, Since: seen.Add(PhoneWarnAfter),
		Text: fmt.Sprintf("The phone of this WhatsApp account has not been online for %d days (last seen %s): open WhatsApp on it, "+
			"or WhatsApp unlinks bridged after about 14 days.", int(off/(24*time.Hour)), seen.UTC().Format("2006-01-02 15:04 UTC")),
	}, true
}
