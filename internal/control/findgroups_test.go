package control

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/bridged-app/bridged/internal/store"
)

// A command that acts on one group (chat, groups set, tasks add) asks the
// daemon for the groups its name names, and the answer holds those alone:
// with hundreds of groups registered it is one group's, not the list's.
func TestFindGroupsAnswersOnlyTheNamedGroups(t *testing.T) {
	h := start(t, Live{})
	ctx := context.Background()
	if _, err := h.client.AddGroup(ctx, GroupAdd{Chat: "local:main", Name: "main", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		f := fmt.Sprintf("g%04d", i)
		if _, err := h.db.Groups.Add(ctx, store.Group{Chat: store.ChatID("local:" + f), Folder: store.Folder(f), Name: f, Trigger: "@Andy", RequiresTrigger: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.client.AddGroup(ctx, GroupAdd{Chat: "local:twin-a", Name: "Twin", Folder: "twin-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.AddGroup(ctx, GroupAdd{Chat: "local:twin-b", Name: "Twin", Folder: "twin-b"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		want []string
	}{
		{"", []string{"main"}},                 // the main group
		{"g0042", []string{"g0042"}},           // a folder
		{"local:g0007", []string{"g0007"}},     // a chat id
		{"G0100", []string{"g0100"}},           // a name, ignoring case
		{"Twin", []string{"twin-a", "twin-b"}}, // a name two groups share
		{"nobody", nil},                        // none
		{"local:main", []string{"main"}},       // the main group by its chat
	} {
		gs, err := h.client.FindGroups(ctx, tt.name)
		if err != nil {
			t.Fatalf("FindGroups(%q): %v", tt.name, err)
		}
		var folders []string
		for _, g := range gs {
			folders = append(folders, g.Folder)
		}
		slices.Sort(folders)
		if !slices.Equal(folders, tt.want) {
			t.Errorf("FindGroups(%q) = %v; want %v", tt.name, folders, tt.want)
		}
	}
	// On the wire: one group's answer, not a thousand's.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://bridged/v1/groups?find=g0042", nil)
	resp, err := h.client.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(body) > 2000 {
		t.Errorf("GET /v1/groups?find=g0042 answered %d bytes; want one group's (under 2,000)", len(body))
	}
}
