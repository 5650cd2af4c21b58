package router

import (
	"context"
	"strings"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/turns"
)

// NewSessionCommand, sent by the owner alone in a chat, ends its group's
// Claude session (EndSession): the next turn starts a new one.
const NewSessionCommand = "/new"

// EndSession ends folder's Claude session so that its next turn starts a
// new one; the group's files and memory stay. A running container of the
// group is closed at once when idle, or when its turn in flight ends
// (agentrun.Runner.EndSession); the result says which. A folder that is
// not registered is store.ErrNotFound.
func (r *Router) EndSession(ctx context.Context, folder store.Folder) (agentrun.Applied, error) {
	if _, err := r.db.Groups.ByFolder(ctx, folder); err != nil {
		return agentrun.AppliesNext, err
	}
	grp := r.runs.Group(folder)
	grp.Lock()
	defer grp.Unlock()
	return r.runs.EndSession(ctx, grp, folder)
}

// isNewSession reports whether m is the owner's NewSessionCommand. Anyone
// else's "/new" is an ordinary message.
func isNewSession(m store.Message) bool {
	return m.FromMe && !m.IsBot && strings.EqualFold(strings.TrimSpace(m.Text), NewSessionCommand)
}

// newSessions acts on the owner's NewSessionCommands among g's pending msgs
// and returns the rest: a command not acted on yet ends the group's session
// and the chat is told (and so is a waiter on the command's turn, when no
// earlier message waits for one); a command is never handed to the agent.
// grp's lock must be held.
func (r *Router) newSessions(ctx context.Context, g store.Group, grp *agentrun.Group, msgs []store.Message) []store.Message {
	out := make([]store.Message, 0, len(msgs))
	for _, m := range msgs {
		if !isNewSession(m) {
			out = append(out, m)
			continue
		}
		if m.ID <= grp.Notes.NewSessionAt {
			continue
		}
		grp.Notes.NewSessionAt = m.ID
		applied, err := r.runs.EndSession(ctx, grp, g.Folder)
		if err != nil {
			r.log.Error().Err(err).Str("group", string(g.Folder)).Msg("cannot end the session the owner asked to end")
			r.notice(g.Chat, g.Folder, "Could not start a new session; bridged's log says why. Try /new again.")
			continue
		}
		r.notice(g.Chat, g.Folder, prompt.NewSessionNotice(applied == agentrun.AppliesAtTurnEnd))
		if len(out) == 0 {
			// Nothing before the command waits for a turn: whoever waits
			// on it (`bridged chat`) is answered with the notice.
			r.turns.Ended(turns.End{Chat: string(g.Chat), Result: turns.Done, Upto: int64(m.ID)})
		}
	}
	return out
}
