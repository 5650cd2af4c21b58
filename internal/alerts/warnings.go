package alerts

import (
	"context"
	"strings"

	"github.com/bridged-app/bridged/internal/channel"
)

// Warner is a channel that reports conditions the owner should hear about
// while the connection itself may be fine (WhatsApp's phone not online for
// 12 days): key → text. Each key is told once while it lasts and re-armed
// when the channel stops reporting it.
type Warner interface {
	Warnings() map[string]string
}

func warningKey(ch, key string) string { return "warning/" + ch + "/" + key }

// checkWarnings raises ch's current warnings and clears the ones it no
// longer reports.
func (a *Alerts) checkWarnings(ctx context.Context, ch channel.Channel) {
	w, ok := ch.(Warner)
	if !ok {
		return
	}
	now := w.Warnings()
	for key, text := range now {
		a.raise(ctx, warningKey(ch.Name(), key), "", "", text)
	}
	prefix := warningKey(ch.Name(), "")
	for key := range a.Raised() {
		if rest, ok := strings.CutPrefix(key, prefix); ok {
			if _, still := now[rest]; !still {
				a.Clear(ctx, key)
			}
		}
	}
}
