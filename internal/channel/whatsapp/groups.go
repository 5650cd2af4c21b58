package whatsapp

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"go.mau.fi/whatsmeow/types"
)

// groupSync owns the joined groups: their names, recorded through the
// sink at each connection and daily, their suspension as WhatsApp lists it,
// and their admins (admins.go).
type groupSync struct {
	*core
	conn     *connection
	ids      *identities
	restrict *restrictions

	mu     sync.Mutex
	admins map[types.JID]map[types.JID]bool // group → admins, in every known form
	failed map[types.JID]time.Time          // group → when reading its metadata last failed
}

// list lists the groups the account is a member of, sorted by name, and
// notes each one's admins. It asks WhatsApp, so it needs a connection.
func (c *groupSync) list(ctx context.Context) ([]GroupInfo, error) {
	if st := c.conn.state(); st != channel.StateConnected {
		return nil, fmt.Errorf("list whatsapp groups: %w (state %s)", errNotConnected, st)
	}
	joined, err := c.wa.GetJoinedGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("list whatsapp groups: %w", err)
	}
	out := make([]GroupInfo, 0, len(joined))
	for _, g := range joined {
		if g == nil || g.JID.IsEmpty() {
			continue
		}
		c.setAdmins(ctx, g)
		out = append(out, GroupInfo{ID: g.JID.ToNonAD().String(), Name: g.Name, Suspended: g.Suspended})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// refresh fetches the joined groups and records each one's name through
// the sink's ChatSeen, and corrects their suspension. It returns how many
// groups were recorded.
func (c *groupSync) refresh(ctx context.Context) (int, error) {
	sink := c.sink
	groups, err := c.list(ctx)
	if err != nil {
		return 0, err
	}
	for i, g := range groups {
		if err := sink.ChatSeen(ctx, g.ID, g.Name, true); err != nil {
			return i, fmt.Errorf("record group %s: %w", g.ID, err)
		}
		c.restrict.syncSuspension(ctx, sink, g)
	}
	return len(groups), nil
}

// sync refreshes the groups, bounded by groupSyncTimeout, and logs the
// outcome.
func (c *groupSync) sync(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Any("panic", r).Msg("group name sync panicked")
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, groupSyncTimeout)
	defer cancel()
	n, err := c.refresh(ctx)
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot sync group names")
		return
	}
	c.log.Info().Int("groups", n).Msg("synced group names")
}
