package whatsapp

import (
	"context"
	"fmt"
	"sync"
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

// liveness owns when the phone was last seen and last pinged, as read from
// and kept in bridged_kv.
type liveness struct {
	*core

	mu         sync.Mutex
	phoneSeen  time.Time // zero: never seen (or unknown)
	phoneSaved time.Time // phoneSeen as last written to kv
	pingAt     time.Time // last liveness ping
	loaded     bool      // phoneSeen and pingAt read from kv
}

// handleEvent notes the phone's sightings and pings it after the
// offline backlog.
func (c *liveness) handleEvent(evt any) {
	switch e := evt.(type) {
	case *events.Receipt:
		if e.IsFromMe && e.Sender.Device == 0 {
			c.seen(e.Timestamp)
		}
	case *events.MediaRetry:
		c.seen(e.Timestamp)
	case *events.Message:
		if e.Info.IsFromMe && e.Info.Sender.Device == 0 && e.SourceWebMsg == nil {
			c.seen(e.Info.Timestamp)
		}
	case *events.Connected:
		c.load(c.base)
		c.startClock()
	case *events.OfflineSyncCompleted:
		c.maybePing()
	}
}

// load reads the last sighting and ping once.
func (c *liveness) load(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded {
		return
	}
	seen, err := readTime(ctx, c.kv, kvPhoneSeen)
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot read when the phone was last seen")
	}
	pinged, err := readTime(ctx, c.kv, kvPhonePinged)
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot read when the phone was last pinged")
	}
	c.phoneSeen = later(c.phoneSeen, seen)
	c.phoneSaved = seen
	c.pingAt = later(c.pingAt, pinged)
	c.loaded = true
}

// startClock counts a phone never seen as seen now, so that an old
// pairing without a record starts its count at the first connection.
func (c *liveness) startClock() {
	c.mu.Lock()
	unknown := c.phoneSeen.IsZero()
	c.mu.Unlock()
	if unknown {
		c.seen(c.now())
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// seen records that the phone was online at ts.
func (c *liveness) seen(ts time.Time) {
	if ts.IsZero() {
		ts = c.now()
	}
	c.load(c.base)
	c.mu.Lock()
	if !ts.After(c.phoneSeen) {
		c.mu.Unlock()
		return
	}
	wasOffline := !c.phoneSeen.IsZero() && c.now().Sub(c.phoneSeen) >= PhoneWarnAfter
	c.phoneSeen = ts
	save := ts.Sub(c.phoneSaved) >= phoneSeenPrecision
	if save {
		c.phoneSaved = ts
	}
	c.mu.Unlock()
	if wasOffline {
		c.log.Info().Time("seen_at", ts).Msg("the phone is online again")
	}
	if save {
		if err := writeTime(c.base, c.kv, kvPhoneSeen, ts); err != nil {
			c.log.Warn().Err(err).Msg("cannot record when the phone was last seen")
		}
	}
}

// lastSeen is when the phone was last seen online, zero when unknown.
func (c *liveness) lastSeen() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phoneSeen
}

// offline reports how long the phone has not been seen, 0 when it was
// never seen.
func (c *liveness) offline() time.Duration {
	seen := c.lastSeen()
	if seen.IsZero() {
		return 0
	}
	return max(0, c.now().Sub(seen))
}

// maybePing pings the phone when it has not been seen for
// PhonePingAfter and was not pinged in the last PhonePingInterval. The
// ping runs on its own goroutine.
func (c *liveness) maybePing() {
	now := c.now()
	c.mu.Lock()
	due := !c.phoneSeen.IsZero() && now.Sub(c.phoneSeen) >= PhonePingAfter &&
		(c.pingAt.IsZero() || now.Sub(c.pingAt) >= PhonePingInterval)
	if due {
		c.pingAt = now // claimed: one ping at a time, one a day
	}
	c.mu.Unlock()
	if !due {
		return
	}
	c.background(func() { c.ping(c.base, now) })
}

// ping sends the account's own devices an app-state key request for
// the newest key, which the phone answers when its WhatsApp runs.
func (c *liveness) ping(ctx context.Context, now time.Time) {
	pn, _ := c.wa.OwnIDs()
	if pn.IsEmpty() {
		return
	}
	keyIDs := []*waE2E.AppStateSyncKeyId{}
	if id, err := upkeepOf(c.wa).LatestAppStateKeyID(ctx); err != nil {
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
	if err := writeTime(ctx, c.kv, kvPhonePinged, now); err != nil {
		c.log.Warn().Err(err).Msg("cannot record the phone ping")
	}
	c.log.Info().Time("phone_last_seen", c.lastSeen()).Msg("pinged the phone: it has not been seen for over 10 days")
}

// condition is the phone-offline condition of Status; ok is false
// while the phone was seen in the last PhoneWarnAfter.
func (c *liveness) condition() (cond channel.Condition, ok bool) {
	seen := c.lastSeen()
	off := c.offline()
	if off < PhoneWarnAfter {
		return channel.Condition{}, false
	}
	return channel.Condition{
		Key: condPhoneOffline, Health: channel.HealthPhoneOffline, Since: seen.Add(PhoneWarnAfter),
		Text: fmt.Sprintf("The phone of this WhatsApp account has not been online for %d days (last seen %s): open WhatsApp on it, "+
			"or WhatsApp unlinks bridged after about 14 days.", int(off/(24*time.Hour)), seen.UTC().Format("2006-01-02 15:04 UTC")),
	}, true
}
