package control

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/local"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/store"
)

// PATCH /v1/groups/{folder} sets who may wake the agent and what becomes of
// others' messages; the group list shows them; a post as another member is
// not the owner's, and one the group drops is 403.
func TestAllowListAndPostAs(t *testing.T) {
	h := start(t, Live{})
	h.addMain(t)
	ctx := context.Background()
	allow, drop := []string{"+49 170 1234567", "local:carol"}, store.OthersDrop
	g, err := h.client.UpdateGroup(ctx, "main", GroupPatch{Allow: &allow, Others: &drop})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"491701234567@s.whatsapp.net", "local:carol"}
	if !slices.Equal(g.Allow, want) || g.Others != store.OthersDrop {
		t.Errorf("updated group allows %v, others %q; want %v, drop", g.Allow, g.Others, want)
	}
	gs, err := h.client.Groups(ctx)
	if err != nil || len(gs) != 1 || !slices.Equal(gs[0].Allow, want) {
		t.Errorf("groups list: %+v, %v; want main allowing %v", gs, err, want)
	}
	bad := []string{"nobody"}
	if _, err := h.client.UpdateGroup(ctx, "main", GroupPatch{Allow: &bad}); err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("bad sender: %v; want a refusal naming it", err)
	}

	if _, err := h.client.Post(ctx, "local:main", PostMessage{Sender: "me", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if m := <-h.posted; !m.FromMe || m.Sender != "me" {
		t.Errorf("owner's post: %+v; want FromMe from me", m)
	}
	if _, err := h.client.Post(ctx, "local:main", PostMessage{Sender: "me", As: "carol", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if m := <-h.posted; m.FromMe || m.Sender != "local:carol" {
		t.Errorf("post as carol: %+v; want local:carol, not FromMe", m)
	}
	h.inbound.Store(local.Inbound(func(context.Context, ingest.Changed, channel.Message) (store.MessageID, error) { return 0, nil })) // dropped
	if _, err := h.client.Post(ctx, "local:main", PostMessage{As: "bob", Text: "hi"}); err == nil || !strings.Contains(err.Error(), "sender not allowed") {
		t.Errorf("dropped post: %v; want sender not allowed", err)
	}
	if _, err := h.client.Post(ctx, "local:main", PostMessage{As: "bob smith", Text: "hi"}); err == nil {
		t.Error("post as a name with a space: no error")
	}
}
