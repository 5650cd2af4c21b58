package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

func urlQuery(s string) string { return url.QueryEscape(s) }

// events streams a group's new messages as server-sent events ("message",
// the message as JSON, its id as the event's id) until the client leaves or
// the daemon stops. It starts after the id in ?after= or Last-Event-ID.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	g, err := d.groupOf(ctx, r.PathValue("folder"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if v, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && v > after {
		after = v
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 3000\n\n"); err != nil {
		return
	}
	if rc.Flush() != nil {
		return
	}
	poll := time.NewTicker(d.opts.PollEvery)
	defer poll.Stop()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		// Ask for the wake before reading, so a message stored in between
		// is not missed.
		var wake <-chan struct{}
		if d.opts.Wait != nil {
			wake = d.opts.Wait(ctx)
		}
		ms, err := d.opts.Admin.DB.Messages.After(ctx, store.ChatID(g.Chat), store.MessageID(after), 100)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn().Err(err).Str("group", g.Folder).Msg("dashboard: live conversation")
			}
			return
		}
		for _, m := range ms {
			b, _ := json.Marshal(d.messageOut(m, g.Chat))
			if _, err := fmt.Fprintf(w, "id: %d\nevent: message\ndata: %s\n\n", m.ID, b); err != nil {
				return
			}
			after = int64(m.ID)
		}
		if len(ms) > 0 {
			if rc.Flush() != nil {
				return
			}
			if len(ms) == 100 {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.done:
			return
		case <-wake:
		case <-poll.C:
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}
