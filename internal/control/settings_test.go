package control

import (
	"context"
	"errors"
	"slices"
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

// The owner sets which other groups' folders the main group's agent sees:
// all, none or registered folders, on the main group only; removing a seen
// group drops it from the list and applies the main group's settings to
// its running agent.
func TestUpdateGroupSees(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	for _, f := range []string{"family", "work"} {
		if _, err := h.client.AddGroup(ctx, GroupAdd{Chat: "local:" + f, Name: f}); err != nil {
			t.Fatal(err)
		}
	}
	gs, err := h.client.Groups(ctx)
	if err != nil || len(gs) != 3 || gs[0].Sees != "none" || gs[1].Sees != "none" {
		t.Fatalf("groups %+v, %v; want a new main and the others seeing none", gs, err)
	}
	set := func(folder, sees string) (Group, error) {
		return h.client.UpdateGroup(ctx, folder, GroupPatch{Sees: &sees})
	}
	if g, err := set("main", "work, family"); err != nil || g.Sees != "family,work" {
		t.Fatalf("--sees work,family: %+v, %v; want family,work", g, err)
	}
	for _, bad := range []struct{ folder, sees string }{
		{"main", "nobody"},   // no such group
		{"main", "main"},     // its own
		{"main", "../store"}, // not a folder
		{"family", "all"},    // not main
		{"family", "work"},   // not main
	} {
		if _, err := set(bad.folder, bad.sees); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s --sees %s: %v; want ErrInvalid", bad.folder, bad.sees, err)
		}
	}
	if g, err := set("family", "none"); err != nil || g.Sees != "none" {
		t.Errorf("family --sees none: %+v, %v; want it accepted", g, err)
	}
	h.sync.mu.Lock()
	h.sync.applied = nil
	h.sync.mu.Unlock()
	if err := h.client.RemoveGroup(ctx, "family"); err != nil {
		t.Fatal(err)
	}
	gs, _ = h.client.FindGroups(ctx, "main")
	if len(gs) != 1 || gs[0].Sees != "work" {
		t.Errorf("main after family's removal: %+v; want it seeing work", gs)
	}
	h.sync.mu.Lock()
	applied := h.sync.applied
	h.sync.mu.Unlock()
	if !slices.Contains(applied, "main") {
		t.Errorf("settings applied to %q on family's removal; want main's too", applied)
	}
}
