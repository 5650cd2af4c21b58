package router

import (
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

// DefaultLateWindow is Config.LateWindow's default.
const DefaultLateWindow = 10 * time.Minute

// wakes reports whether m would wake g's agent had it arrived in time. A
// message from a sender the group's allow list did not admit never does.
func (r *Router) wakes(g store.Group, m store.Message) bool {
	if m.IsBot || m.NotAllowed {
		return false
	}
	if g.IsMain || !g.RequiresTrigger {
		return true
	}
	trig := g.Trigger
	if strings.TrimSpace(trig) == "" {
		trig = "@" + r.cfg.AssistantName
	}
	return m.Mentioned || prompt.MatchTrigger(trig, m.Text)
}

// noteLate tells g's chat once that late messages which would have woken
// its agent were seen but did not start a turn; they stay pending and go
// to the agent as context with the next fresh message that wakes it. A
// backlog arrives one message at a time: the chat is told once until a
// turn starts again.
func (r *Router) noteLate(g store.Group, grp *agentrun.Group, msgs []store.Message) {
	if grp.Notes.LateTold {
		return
	}
	late := 0
	for _, m := range msgs {
		if m.Late && r.wakes(g, m) {
			late++
		}
	}
	if late == 0 {
		return
	}
	grp.Notes.LateTold = true
	r.log.Info().Str("group", string(g.Folder)).Int("late", late).Msg("late messages kept as context; they start no turn; telling the chat")
	r.notice(g.Chat, g.Folder, prompt.LateNotice(r.cfg.LateWindow))
}
