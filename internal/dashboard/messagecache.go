package dashboard

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// messageHours keeps the overview's counts of messages per hour, every
// chat's, with the id of the newest message counted, so a page reads only
// the messages stored since the last one (by id), not every chat's last 24
// hours: a thousand groups' index seeks and thousands of rows become the
// few rows that came in meanwhile. A message stored late with an older
// time (WhatsApp's offline messages) still lands in its hour. Messages of
// a group removed meanwhile stay counted until their hour leaves the plot.
type messageHours struct {
	mu    sync.Mutex
	from  time.Time // the first hour kept
	last  store.MessageID
	hours map[time.Time]store.HourlyMessages
}

// messagesByHour is store.DB.Messages.ByHour("", since), from memory and the
// messages stored since the last call.
func (d *Dashboard) messagesByHour(ctx context.Context, since time.Time) ([]store.HourlyMessages, error) {
	c := &d.messageHours
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hours == nil || since.Before(c.from) {
		c.hours, c.last = map[time.Time]store.HourlyMessages{}, 0
	}
	c.from = since
	fresh, last, err := d.opts.Admin.DB.Messages.ByHourAfter(ctx, c.last, since)
	if err != nil {
		return nil, err
	}
	for _, h := range fresh {
		k := h.Hour.UTC()
		old := c.hours[k]
		c.hours[k] = store.HourlyMessages{Hour: k, In: old.In + h.In, Out: old.Out + h.Out}
	}
	c.last = last
	out := make([]store.HourlyMessages, 0, len(c.hours))
	for k, h := range c.hours {
		if k.Before(since.Truncate(time.Hour)) {
			delete(c.hours, k)
			continue
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b store.HourlyMessages) int { return a.Hour.Compare(b.Hour) })
	return out, nil
}
