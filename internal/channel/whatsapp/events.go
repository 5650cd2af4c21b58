package whatsapp

import (
	"go.mau.fi/whatsmeow/types/events"
)

// handleEvent is registered with whatsmeow's success-status handlers:
// returning false withholds the acknowledgement of the message or
// notification, so WhatsApp delivers it again later.
func (c *Client) handleEvent(evt any) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			// whatsmeow would treat a panic as handled and ack the message.
			c.log.Error().Any("panic", r).Type("event", evt).Msg("whatsapp event handler panicked; not acknowledging")
			ok = false
		}
	}()
	ctx := c.base
	sink := c.sink
	c.phone.handleEvent(evt)
	switch e := evt.(type) {
	case *events.Message:
		if n := historyNotification(e); n != nil {
			return c.hist.queue(ctx, e.Info.ID, n)
		}
		return c.in.handle(ctx, sink, e)
	case *events.AppStateSyncError, *events.AppStateSyncComplete:
		c.app.handleEvent(evt)
	case *events.HistorySync:
		return c.hist.handleSync(ctx, sink, e)
	case *events.UndecryptableMessage:
		c.log.Warn().Str("chat", e.Info.Chat.String()).Str("message_id", e.Info.ID).
			Bool("unavailable", e.IsUnavailable).Msg("cannot decrypt a WhatsApp message; asked the phone to resend it")
	case *events.JoinedGroup:
		c.groups.setAdmins(ctx, &e.GroupInfo)
		return c.in.chatSeen(ctx, sink, e.JID, e.Name, true)
	case *events.GroupInfo:
		c.groups.noteAdminChanges(ctx, e)
		if !c.restrict.noteSuspension(ctx, sink, e) {
			return false
		}
		if e.Name != nil {
			return c.in.chatSeen(ctx, sink, e.JID, e.Name.Name, true)
		}
	case *events.NotifyAccountReachoutTimelock:
		c.restrict.handleReachout(ctx, e)
	case *events.PushNameSetting:
		signal(c.pres.wake)
	case *events.StreamError:
		c.log.Warn().Str("code", e.Code).Msg("whatsapp stream error")
	case *events.OfflineSyncCompleted:
		c.log.Info().Int("events", e.Count).Msg("caught up with messages missed while offline")
	default:
		c.conn.handleEvent(evt)
	}
	return true
}
