package groups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
)

func TestRenderedWithRecognisesAnyName(t *testing.T) {
	for _, name := range []string{"main", "global"} {
		for _, assistant := range []string{"Andy", "Zed", "my-bot_2"} {
			text, err := Template(name, assistant)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := RenderedWith(name, text); !ok || got != assistant {
				t.Errorf("RenderedWith(%s, template for %s) = %q, %v; want %s, true", name, assistant, got, ok, assistant)
			}
			edited := strings.Replace(text, "personal assistant", "personal butler", 1)
			if got, ok := RenderedWith(name, edited); ok {
				t.Errorf("RenderedWith(%s, an edited template) = %q, true; want false", name, got)
			}
			if _, ok := RenderedWith(name, text+"\nAlso: be brief.\n"); ok {
				t.Errorf("RenderedWith(%s, the template with a line added) = true; want false", name)
			}
		}
	}
	other, _ := Template("global", "Andy")
	if _, ok := RenderedWith("main", other); ok {
		t.Error("the global template was taken for the main one")
	}
	if _, ok := RenderedWith("main", ""); ok {
		t.Error("an empty file was taken for the main template")
	}
}

func TestNamesAssistant(t *testing.T) {
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"You are Andy, a personal assistant", true},
		{"trigger @Andy", true},
		{"Andy", true},
		{"Andyland and Randy", false},
		{"andy", false},
		{"Andy_2 is someone else", false},
	} {
		if got := NamesAssistant(tt.text, "Andy"); got != tt.want {
			t.Errorf("NamesAssistant(%q, Andy) = %v; want %v", tt.text, got, tt.want)
		}
	}
}

func newHome(t *testing.T) *home.Home {
	t.Helper()
	hm, err := home.New(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := hm.Layout().Prepare(); err != nil {
		t.Fatal(err)
	}
	return hm
}

func readMemory(t *testing.T, hm *home.Home, folder string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(hm.Layout().GroupDir(folder), FileName))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A rename writes the unedited templates again with the new name; an
// edited one is left, and Stale names it with the old name until the
// owner edits the old name out.
func TestSyncRename(t *testing.T) {
	hm := newHome(t)
	if s, err := Sync(hm, "Andy"); err != nil || len(s.Renamed)+len(s.Stale) != 0 {
		t.Fatalf("first Sync = %+v, %v; want the templates installed, nothing renamed", s, err)
	}
	globalPath := filepath.Join(hm.Layout().GlobalDir(), FileName)
	edited := readMemory(t, hm, "global") + "\nAndy answers in French.\n"
	if err := os.WriteFile(globalPath, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}

	s, err := Sync(hm, "Bob")
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Template("main", "Bob"); readMemory(t, hm, "main") != want {
		t.Errorf("the unedited main CLAUDE.md after the rename:\n%s\nwant the template for Bob", readMemory(t, hm, "main"))
	}
	if got := readMemory(t, hm, "global"); got != edited {
		t.Errorf("the edited global CLAUDE.md was changed:\n%s", got)
	}
	if strings.Join(s.Renamed, ",") != "groups/main/CLAUDE.md" || strings.Join(s.Stale, ",") != "groups/global/CLAUDE.md" || s.Old != "Andy" {
		t.Errorf("Sync after the rename = %+v; want main renamed, global stale with Andy", s)
	}
	if old, stale, err := Stale(hm, "Bob"); err != nil || old != "Andy" || strings.Join(stale, ",") != "groups/global/CLAUDE.md" {
		t.Errorf("Stale = %q, %q, %v; want Andy, the global file", old, stale, err)
	}
	// Still stale at the next start: the old name stays recorded.
	if s, err := Sync(hm, "Bob"); err != nil || strings.Join(s.Stale, ",") != "groups/global/CLAUDE.md" {
		t.Errorf("second Sync as Bob = %+v, %v; want the global file still stale", s, err)
	}

	// The owner edits the old name out: nothing is stale any more.
	if err := os.WriteFile(globalPath, []byte(strings.ReplaceAll(edited, "Andy", "Bob")), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Sync(hm, "Bob"); err != nil || len(s.Stale) != 0 {
		t.Errorf("Sync after the edit = %+v, %v; want nothing stale", s, err)
	}
	if old, stale, err := Stale(hm, "Bob"); err != nil || len(stale) != 0 {
		t.Errorf("Stale after the edit = %q, %q, %v; want none", old, stale, err)
	}
}

// The agent owns groups/: a CLAUDE.md it replaced with a link is neither
// followed nor replaced by a rename.
func TestSyncRenameLeavesLinks(t *testing.T) {
	hm := newHome(t)
	if _, err := Sync(hm, "Andy"); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "outside.md")
	andy, _ := Template("main", "Andy")
	if err := os.WriteFile(target, []byte(andy), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(hm.Layout().GroupDir("main"), FileName)
	os.Remove(link)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Sync(hm, "Bob"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != andy {
		t.Error("the rename wrote through a link")
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", fi, err)
	}
}

// An old name that is also a word of the templates ("channel") does not
// make the rewritten templates look stale.
func TestSyncOldNameInTheTemplateText(t *testing.T) {
	hm := newHome(t)
	if _, err := Sync(hm, "channel"); err != nil {
		t.Fatal(err)
	}
	if s, err := Sync(hm, "Bob"); err != nil || len(s.Stale) != 0 || len(s.Renamed) != 2 {
		t.Errorf("Sync after renaming channel to Bob = %+v, %v; want both renamed, none stale", s, err)
	}
	if old, stale, err := Stale(hm, "Bob"); err != nil || len(stale) != 0 {
		t.Errorf("Stale = %q, %q, %v; want none", old, stale, err)
	}
}
