package prompt

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

func TestPlantedNotice(t *testing.T) {
	rep := home.QuarantineReport{Failed: []string{"groups/fam/x/.claude: permission denied"}}
	for i := range 25 {
		rep.Moved = append(rep.Moved, home.Planted{Path: fmt.Sprintf("groups/fam/p%d/.claude", i), MovedTo: fmt.Sprintf("data/quarantine/fam/T/group/p%d/.claude", i)})
	}
	rep.Moved[0].Path = "groups/fam/evil\n- forged line/.claude"
	got := PlantedNotice(store.Group{Folder: "fam", Tools: store.ToolsReadOnly}, rep)
	for _, want := range []string{"Group fam (tools: read-only)", "nothing deleted", "groups/fam/p1/.claude → data/quarantine/fam/T/group/p1/.claude",
		"… and 5 more", "could not be moved: groups/fam/x/.claude: permission denied", `"groups/fam/evil\n- forged line/.claude"`} {
		if !strings.Contains(got, want) {
			t.Errorf("notice:\n%s\nwant %q", got, want)
		}
	}
	if strings.Contains(got, "\n- forged line") {
		t.Errorf("notice:\n%s\nan agent's file name forged a line", got)
	}
}
