package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

func TestNormalizeSender(t *testing.T) {
	tests := []struct{ in, want string }{
		{"+49 170 1234567", "491701234567@s.whatsapp.net"},
		{"(0049) 170-123.4567", "00491701234567@s.whatsapp.net"},
		{"491701234567:12@s.whatsapp.net", "491701234567@s.whatsapp.net"},
		{"491701234567.0:3@s.whatsapp.net", "491701234567@s.whatsapp.net"},
		{"123456789:4@LID", "123456789@lid"},
		{"local:bob", "local:bob"},
		{"tg:123456", "tg:123456"},
		{"TG:42", "tg:42"},
		{"Admins", store.AllowAdmins},
		{" ME ", store.AllowOwner},
		{"bob", ""},
		{"123", ""},
		{"local:", ""},
		{"local:two words", ""},
		{"1234@g.us", ""},
	}
	for _, tt := range tests {
		got, err := store.NormalizeSender(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("NormalizeSender(%q) = %q; want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NormalizeSender(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// A group's allow list and what becomes of others' messages are kept,
// normalised, and an invalid entry is refused.
func TestGroupAllowRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
	g, err := db.Groups.Add(ctx, store.Group{Chat: "local:fam", Folder: "fam"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Others != store.OthersContext || g.Allow != nil {
		t.Fatalf("new group: allow %v, others %q; want everyone, context", g.Allow, g.Others)
	}
	g.Allow, g.Others = []string{"+49 170 1234567", "local:bob", "admins", "491701234567@s.whatsapp.net"}, store.OthersDrop
	if err := db.Groups.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	got, err := db.Groups.ByFolder(ctx, "fam")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"491701234567@s.whatsapp.net", "local:bob", "admins"}; !slices.Equal(got.Allow, want) || got.Others != store.OthersDrop {
		t.Fatalf("stored allow %v, others %q; want %v, drop", got.Allow, got.Others, want)
	}
	got.Allow = []string{"nobody"}
	if err := db.Groups.Update(ctx, got); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("invalid entry: %v; want ErrInvalid", err)
	}
	got.Allow, got.Others = nil, "ignore"
	if err := db.Groups.Update(ctx, got); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("invalid others: %v; want ErrInvalid", err)
	}
}

// "me" alone admits the owner only: no sender, admin or not, in any form;
// with others beside it the list is refused.
func TestAllowOwnerOnly(t *testing.T) {
	allow, err := store.NormalizeAllow([]string{"Me"})
	if err != nil || !slices.Equal(allow, []string{store.AllowOwner}) {
		t.Fatalf("NormalizeAllow(Me) = %v, %v; want [me]", allow, err)
	}
	g := store.Group{Allow: allow}
	if !g.OwnerOnly() {
		t.Error("OwnerOnly = false for [me]")
	}
	for _, ids := range [][]string{{"491701234567@s.whatsapp.net"}, {"local:bob"}, {"me"}, {"local:me"}} {
		for _, admin := range []bool{false, true} {
			if g.Admits(ids, admin) {
				t.Errorf("[me] admits %v (admin %v); want nobody but the owner", ids, admin)
			}
		}
	}
	if (store.Group{}).OwnerOnly() || (store.Group{Allow: []string{"local:bob"}}).OwnerOnly() {
		t.Error("OwnerOnly for everyone or a list of senders")
	}
	if _, err := store.NormalizeAllow([]string{"me", "local:bob"}); err == nil {
		t.Error("NormalizeAllow(me, local:bob): no error; want me refused beside others")
	}
}
