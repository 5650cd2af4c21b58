package whatsapp

import (
	"context"
	"errors"
	"time"

	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
)

// A group's admins, for an allow list that admits them ("admins"): read
// from the group's metadata (every joined group's at each group sync, a
// group's own when a message arrives before it was read) and kept current
// by the participant events (promote, demote, leave). Each admin is kept in
// every form known, phone number and LID, so a sender matches in either.

// groupInfoClient fetches one group's metadata; *whatsmeow.Client has it.
type groupInfoClient interface {
	GetGroupInfo(ctx context.Context, jid types.JID) (*types.GroupInfo, error)
}

// adminFetchTimeout bounds the fetch of a group's metadata when a message
// arrives before it was read.
const adminFetchTimeout = 15 * time.Second

// adminRetryAfter is how long a group whose metadata could not be read
// goes without another try: until then its senders count as no admins at
// once, so a group WhatsApp will not describe (one bridged was removed
// from, a fetch that times out) does not hold up each of its messages for
// adminFetchTimeout.
const adminRetryAfter = 10 * time.Minute

// setAdmins replaces a group's admins with those of its metadata.
func (c *groupSync) setAdmins(ctx context.Context, info *types.GroupInfo) {
	if info == nil || info.JID.IsEmpty() {
		return
	}
	admins := map[types.JID]bool{}
	for _, p := range info.Participants {
		if !p.IsAdmin && !p.IsSuperAdmin {
			continue
		}
		for _, j := range c.ids.forms(ctx, p.JID, p.PhoneNumber, p.LID) {
			admins[j] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admins == nil {
		c.admins = map[types.JID]map[types.JID]bool{}
	}
	c.admins[info.JID.ToNonAD()] = admins
	delete(c.failed, info.JID.ToNonAD())
}

// noteAdminChanges applies a group's participant event to its admins: a
// promoted member becomes one, a demoted or departed one no longer is. A
// group not read yet is left to be read when needed.
func (c *groupSync) noteAdminChanges(ctx context.Context, e *events.GroupInfo) {
	if len(e.Promote)+len(e.Demote)+len(e.Leave) == 0 {
		return
	}
	type change struct {
		forms []types.JID
		admin bool
	}
	var changes []change
	for _, j := range e.Promote {
		changes = append(changes, change{c.ids.forms(ctx, j), true})
	}
	for _, list := range [][]types.JID{e.Demote, e.Leave} {
		for _, j := range list {
			changes = append(changes, change{c.ids.forms(ctx, j), false})
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	admins, ok := c.admins[e.JID.ToNonAD()]
	if !ok {
		return
	}
	for _, ch := range changes {
		for _, j := range ch.forms {
			if ch.admin {
				admins[j] = true
			} else {
				delete(admins, j)
			}
		}
	}
	c.log.Debug().Str("chat", e.JID.String()).Int("promoted", len(e.Promote)).Int("demoted", len(e.Demote)).
		Int("left", len(e.Leave)).Msg("group admins changed")
}

// isAdmin reports whether a sender known by ids is an admin of group,
// reading the group's metadata first when it was not read yet.
func (c *groupSync) isAdmin(ctx context.Context, group types.JID, ids []types.JID) bool {
	c.mu.Lock()
	admins, ok := c.admins[group]
	failedAt, failed := c.failed[group]
	c.mu.Unlock()
	if !ok {
		if failed && c.now().Sub(failedAt) < adminRetryAfter {
			return false
		}
		gc, can := c.wa.(groupInfoClient)
		if !can {
			return false
		}
		fctx, cancel := context.WithTimeout(ctx, adminFetchTimeout)
		info, err := gc.GetGroupInfo(fctx, group)
		cancel()
		if err == nil && (info == nil || info.JID.ToNonAD() != group) {
			err = errors.New("WhatsApp returned no metadata for the group")
		}
		if err != nil {
			c.mu.Lock()
			if c.failed == nil {
				c.failed = map[types.JID]time.Time{}
			}
			c.failed[group] = c.now()
			c.mu.Unlock()
			c.log.Warn().Err(err).Str("chat", group.String()).Dur("retry_after", adminRetryAfter).
				Msg("cannot read the group's admins; its senders count as no admins until it is read")
			return false
		}
		c.setAdmins(ctx, info)
		c.mu.Lock()
		admins = c.admins[group]
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if admins[id.ToNonAD()] {
			return true
		}
	}
	return false
}
