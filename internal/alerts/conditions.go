package alerts

import (
	"context"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
)

// conditionKey is the alert key of a channel's condition.
func conditionKey(ch string, c channel.Condition) string { return channelKey(ch) + "/" + c.Key }

// checkConditions tells the owner each condition of channel ch once while
// it lasts (a new end time is told again), and re-arms those that ended.
func (a *Alerts) checkConditions(ctx context.Context, ch string, conds []channel.Condition) {
	live := make(map[string]bool, len(conds))
	for _, c := range conds {
		key := conditionKey(ch, c)
		live[key] = true
		detail := ""
		if !c.Until.IsZero() {
			detail = c.Until.UTC().Format(time.RFC3339)
		}
		a.raise(ctx, key, detail, "", c.Text)
	}
	prefix := channelKey(ch) + "/"
	for key := range a.Raised() {
		if strings.HasPrefix(key, prefix) && !live[key] {
			a.Clear(ctx, key)
		}
	}
}
