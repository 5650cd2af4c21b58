package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/snapshot"
	"github.com/bridged-app/bridged/internal/store"
)

// A message's story shows what its turn changed with a link to the diff;
// the diff page shows the file's lines, and its form undoes the turn.
func TestStoryLinksTheTurnsDiffAndUndoes(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	dir := t.TempDir()
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := hm.Layout().Prepare(); err != nil {
		t.Fatal(err)
	}
	snaps := snapshot.New(snapshot.Config{Dir: hm.Layout().SnapshotsDir()}, f.db, hm, zerolog.Nop())
	f.d.opts.Admin.Snapshots = snaps
	if err := f.db.Sessions.SetCursor(ctx, "fam", f.msgID); err != nil {
		t.Fatal(err)
	}
	id, err := snaps.Begin(ctx, snapshot.Start{Folder: "fam", Chat: "local:fam", Kind: store.ChangeTurn, Upto: f.msgID})
	if err != nil {
		t.Fatal(err)
	}
	note := filepath.Join(hm.Layout().GroupDir("fam"), "note.txt")
	if err := os.WriteFile(note, []byte("<b>hello</b>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := snaps.End(ctx, snapshot.Finish{Folder: "fam"}); err != nil {
		t.Fatal(err)
	}

	c := f.login(t)
	diffPath := Prefix + "groups/fam/changes/" + strconv.FormatInt(int64(id), 10)
	_, body := f.do(t, "GET", Prefix+"messages/"+itoa(f.msgID), c, nil, nil)
	if !strings.Contains(body, "files changed: &#43;1 −0") || !strings.Contains(body, f.d.prefix+"groups/fam/changes/"+strconv.FormatInt(int64(id), 10)) {
		t.Fatalf("the story does not show the turn's change and its diff link:\n%s", body)
	}
	if _, body := f.do(t, "GET", Prefix+"groups/fam", c, nil, nil); !strings.Contains(body, "What its turns changed") ||
		!strings.Contains(body, f.d.prefix+"groups/fam/changes/"+strconv.FormatInt(int64(id), 10)) {
		t.Errorf("the group page does not list the turn's change:\n%s", body)
	}
	resp, body := f.do(t, "GET", diffPath, c, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "note.txt") || !strings.Contains(body, "&#43;&lt;b&gt;hello&lt;/b&gt;") {
		t.Fatalf("GET the diff: %s\n%s", resp.Status, body)
	}
	resp, body = f.do(t, "POST", diffPath+"/undo", c, url.Values{"undo": {"plain"}, "csrf": {f.csrf(t, c)}}, map[string]string{"Origin": f.srv.URL})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Undone: recorded as") {
		t.Fatalf("POST the undo: %s\n%s", resp.Status, body)
	}
	if _, err := os.Lstat(note); !os.IsNotExist(err) {
		t.Errorf("note.txt after the undo: %v; want it gone", err)
	}
}
