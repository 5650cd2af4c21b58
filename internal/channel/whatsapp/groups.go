package whatsapp

import (
	"context"
	"fmt"
	"sort"

	"github.com/bridged-app/bridged/internal/channel"
)

// Groups lists the groups the account is a member of, sorted by name, and
// notes each one's admins. It asks WhatsApp, so it needs a connection.
func (c *Client) Groups(ctx context.Context) ([]GroupInfo, error) {
	if st := c.Status().State; st != channel.StateConnected {
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

// RefreshGroups fetches the joined groups and records each one's name
// through the sink's ChatSeen. It returns how many groups were recorded. It
// runs on every connection, daily, and on request (list_groups refresh).
func (c *Client) RefreshGroups(ctx context.Context) (int, error) {
	sink := c.sink
	groups, err := c.Groups(ctx)
	if err != nil {
		return 0, err
	}
	for i, g := range groups {
		if err := sink.ChatSeen(ctx, g.ID, g.Name, true); err != nil {
			return i, fmt.Errorf("record group %s: %w", g.ID, err)
		}
		c.syncSuspension(ctx, sink, g)
	}
	return len(groups), nil
}
