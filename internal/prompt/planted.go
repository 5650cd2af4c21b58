package prompt

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

// maxPlantedListed bounds the entries one planted notice lists.
const maxPlantedListed = 20

// PlantedNotice is the owner's notice of what was moved aside from g
// before its container started (home.Home.Quarantine).
func PlantedNotice(g store.Group, rep home.QuarantineReport) string {
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
