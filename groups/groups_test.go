package groups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
)

func TestTemplatesNameTheAssistant(t *testing.T) {
	for _, name := range []string{"main", "global"} {
		text, err := Template(name, "Zed")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text, "{{") || !strings.Contains(text, "You are Zed") {
			t.Errorf("%s template: placeholder left or name missing", name)
		}
		for _, must := range []string{"send_message", "<internal>", "conversations/", "schedule_task"} {
			if !strings.Contains(text, must) {
				t.Errorf("%s template does not mention %s", name, must)
			}
		}
	}
	main, _ := Template("main", "Zed")
	if !strings.Contains(main, "register_group") || !strings.Contains(main, "target_group") {
		t.Error("main template lacks its admin duties")
	}
}

func globalTree(t *testing.T) (*home.Tree, string) {
	t.Helper()
	h, err := home.New(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := h.Global()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	return tree, h.Layout().Dir
}

func TestInstallKeepsUserEdits(t *testing.T) {
	tree, _ := globalTree(t)
	dir := tree.Path()
	wrote, err := Install(tree, "global", "Andy")
	if err != nil || !wrote {
		t.Fatalf("first install: wrote=%v err=%v", wrote, err)
	}
	os.WriteFile(filepath.Join(dir, "CLAUDE.md"), []byte("my rules"), 0o644)
	if wrote, err := Install(tree, "global", "Andy"); err != nil || wrote {
		t.Fatalf("second install: wrote=%v err=%v; want no write", wrote, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "CLAUDE.md"))
	if string(b) != "my rules" {
		t.Fatalf("user edit lost: %q", b)
	}
}

// A dangling groups/global/CLAUDE.md symlink (the main agent can plant one)
// must not make the install create a file at its target, anywhere.
func TestInstallDanglingLinkCreatesNothing(t *testing.T) {
	tree, homeDir := globalTree(t)
	for _, target := range []string{
		filepath.Join(homeDir, "store", "planted.md"), // absolute, outside the tree
		"../../planted-relative.md",                   // relative, climbing out
	} {
		link := filepath.Join(tree.Path(), "CLAUDE.md")
		os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		wrote, err := Install(tree, "global", "Andy")
		if err != nil || wrote {
			t.Errorf("install over a dangling link to %s: wrote=%v err=%v; want nothing written", target, wrote, err)
		}
		abs := target
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(tree.Path(), target)
		}
		if _, err := os.Lstat(abs); !os.IsNotExist(err) {
			t.Errorf("link target %s: %v; want nothing created", abs, err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("CLAUDE.md: %v, %v; want the link left as it was", fi, err)
		}
	}
}
