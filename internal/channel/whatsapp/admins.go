package whatsapp

import (
	"context"
	"errors"
	"slices"
	"sync"
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

// adminCache is every known group's admins. The zero value is ready.
type adminCache struct {
	mu     sync.Mutex
	groups map[types.JID]map[types.JID]bool // group → admins, in every known form
	failed map[types.JID]time.Time          // group → when reading its metadata last failed
}

// setAdmins replaces a group's admins with those of its metadata.
func (c *Client) setAdmins(ctx context.Context, info *types.GroupInfo) {
	if info == nil || info.JID.IsEmpty() {
		return
	}
	admins := map[types.JID]bool{}
	for _, p := range info.Participants {
		if !p.IsAdmin && !p.IsSuperAdmin {
			continue
		}
		for _, j := range c.forms(ctx, p.JID, p.PhoneNumber, p.LID) {
			admins[j] = true
		}
	}
	c.admins.mu.Lock()
	defer c.admins.mu.Unlock()
	if c.admins.groups == nil {
		c.admins.groups = map[types.JID]map[types.JID]bool{}
	}
	c.admins.groups[info.JID.ToNonAD()] = admins
	delete(c.admins.failed, info.JID.ToNonAD())
}

// noteAdminChanges applies a group's participant event to its admins: a
// promoted member becomes one, a demoted or departed one no longer is. A
// group not read yet is left to be read when needed.
func (c *Client) noteAdminChanges(ctx context.Context, e *events.GroupInfo) {
	if len(e.Promote)+len(e.Demote)+len(e.Leave) == 0 {
		return
	}
	type change struct {
		forms []types.JID
		admin bool
	}
	var changes []change
	for _, j := range e.Promote {
		changes = append(changes, change{c.forms(ctx, j), true})
	}
	for _, list := range [][]types.JID{e.Demote, e.Leave} {
		for _, j := range list {
			changes = append(changes, change{c.forms(ctx, j), false})
		}
	}
	c.admins.mu.Lock()
	defer c.admins.mu.Unlock()
	admins, ok := c.admins.groups[e.JID.ToNonAD()]
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
func (c *Client) isAdmin(ctx context.Context, group types.JID, ids []types.JID) bool {
	c.admins.mu.Lock()
	admins, ok := c.admins.groups[group]
	failedAt, failed := c.admins.failed[group]
	c.admins.mu.Unlock()
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
			c.admins.mu.Lock()
			if c.admins.failed == nil {
				c.admins.failed = map[types.JID]time.Time{}
			}
			c.admins.failed[group] = c.now()
			c.admins.mu.Unlock()
			c.log.Warn().Err(err).Str("chat", group.String()).Dur("retry_after", adminRetryAfter).
				Msg("cannot read the group's admins; its senders count as no admins until it is read")
			return false
		}
		c.setAdmins(ctx, info)
		c.admins.mu.Lock()
		admins = c.admins.groups[group]
		c.admins.mu.Unlock()
	}
	c.admins.mu.Lock()
	defer c.admins.mu.Unlock()
	for _, id := range ids {
		if admins[id.ToNonAD()] {
			return true
		}
	}
	return false
}

// forms are every known form of a user given as ids (phone number and LID,
// without device parts, in the order given): a form none of ids has is
// completed through whatsmeow's LID map.
func (c *Client) forms(ctx context.Context, ids ...types.JID) []types.JID {
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
