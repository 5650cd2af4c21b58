package router

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

// maxPlantedListed bounds the entries one planted notice lists.
const maxPlantedListed = 20

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
	r.notice(main.Chat, main.Folder, plantedText(g, rep))
}

// plantedText is the owner's notice of rep.
func plantedText(g store.Group, rep home.QuarantineReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Group %s (tools: %s): its agent had left Claude configuration (settings, hooks, skills, MCP servers) that a %s group must not load. Moved aside, nothing deleted:", g.Folder, g.Tools, g.Tools)
	for i, m := range rep.Moved {
		if i == maxPlantedListed {
			fmt.Fprintf(&b, "\n… and %d more (see the daemon log)", len(rep.Moved)-i)
			break
		}
		fmt.Fprintf(&b, "\n- %s → %s", shown(m.Path), shown(m.MovedTo))
	}
	for i, f := range rep.Failed {
		if i == maxPlantedListed {
			fmt.Fprintf(&b, "\n… and %d more that could not be moved (see the daemon log)", len(rep.Failed)-i)
			break
		}
		fmt.Fprintf(&b, "\n- could not be moved: %s", shown(f))
	}
	b.WriteString("\nPaths are under the bridged home. Put back only what you trust, and only for a full group.")
	return b.String()
}

// shown is an agent-chosen path as it can be shown: quoted when it holds
// anything but printable characters.
func shown(p string) string {
	if strings.IndexFunc(p, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.QuoteToGraphic(p)
	}
	return p
}
