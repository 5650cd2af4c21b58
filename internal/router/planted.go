package router

import (
	"context"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/prompt"
	"github.com/bridged-app/bridged/internal/store"
)

// planted tells the owner, in the main chat, what was moved aside from g
// before its container started (container.SpecBuilder.Planted): what its
// agent had left where claude reads its configuration, which a group that
// is not full does not load.
func (r *Router) planted(g store.Group, rep home.QuarantineReport) {
	ctx, cancel := context.WithTimeout(context.Background(), shortTimeout)
	defer cancel()
	main, err := r.db.Groups.Main(ctx)
	if err != nil {
		r.log.Warn().Err(err).Str("group", string(g.Folder)).Msg("planted configuration not told: no main chat")
		return
	}
	r.notice(main.Chat, main.Folder, prompt.PlantedNotice(g, rep))
}
