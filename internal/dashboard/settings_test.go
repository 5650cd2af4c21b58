package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/store"
)

// The group page and the overview show each group's tool profile, who may
// wake its agent and what becomes of others' messages.
func TestGroupSettingsShown(t *testing.T) {
	f := newFixture(t, false)
	c := f.login(t)
	tools, drop := "read-only", store.OthersDrop
	allow := []string{"me"}
	if _, err := f.d.opts.Admin.UpdateGroup(context.Background(), "fam", control.GroupPatch{Tools: &tools, Allow: &allow, Others: &drop}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{Prefix + "groups/fam", "<dt>tools</dt><dd>read-only</dd>"},
		{Prefix + "groups/fam", "<dt>who may wake it</dt><dd>the owner only</dd>"},
		{Prefix + "groups/fam", "<dt>others' messages</dt><dd>dropped (not stored)</dd>"},
		{Prefix, "<td>read-only</td><td>the owner only (others dropped)</td>"},
	} {
		resp, body := f.do(t, "GET", tt.path, c, nil, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, tt.want) {
			t.Errorf("GET %s: %s; want %q in\n%s", tt.path, resp.Status, tt.want, body)
		}
	}
	allow = []string{"local:carol", "admins"}
	if _, err := f.d.opts.Admin.UpdateGroup(context.Background(), "fam", control.GroupPatch{Allow: &allow}); err != nil {
		t.Fatal(err)
	}
	if _, body := f.do(t, "GET", Prefix+"groups/fam", c, nil, nil); !strings.Contains(body, "<dd>the owner, local:carol, admins</dd>") {
		t.Errorf("group page does not list the allowed senders:\n%s", body)
	}
}
