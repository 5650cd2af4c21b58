package control

import (
	"context"
	"testing"
)

// The answer to a change of a group says how it reaches the group's agent,
// as the running daemon tells; the store alone says from the next message.
func TestUpdateGroupSaysHowTheChangeApplies(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	tools := "read-only"
	g, err := h.client.UpdateGroup(ctx, "main", GroupPatch{Tools: &tools})
	if err != nil || g.Applies != AppliesNext {
		t.Fatalf("update with no agent running: applies %q, %v; want %q", g.Applies, err, AppliesNext)
	}
	const busy = "applies when the current turn ends"
	h.sync.applies.Store(busy)
	if g, err = h.client.UpdateGroup(ctx, "main", GroupPatch{Tools: &tools}); err != nil || g.Applies != busy {
		t.Fatalf("update during a turn: applies %q, %v; want %q", g.Applies, err, busy)
	}
	a := &Admin{DB: h.db, AssistantName: "Andy"}
	if g, err = a.UpdateGroup(ctx, "main", GroupPatch{Tools: &tools}); err != nil || g.Applies != AppliesNext {
		t.Fatalf("update through the store: applies %q, %v; want %q", g.Applies, err, AppliesNext)
	}
}
