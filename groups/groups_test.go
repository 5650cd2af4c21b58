package groups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestInstallKeepsUserEdits(t *testing.T) {
	dir := t.TempDir()
	wrote, err := Install(dir, "global", "Andy")
	if err != nil || !wrote {
		t.Fatalf("first install: wrote=%v err=%v", wrote, err)
	}
	os.WriteFile(filepath.Join(dir, "CLAUDE.md"), []byte("my rules"), 0o644)
	if wrote, err := Install(dir, "global", "Andy"); err != nil || wrote {
		t.Fatalf("second install: wrote=%v err=%v; want no write", wrote, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "CLAUDE.md"))
	if string(b) != "my rules" {
		t.Fatalf("user edit lost: %q", b)
	}
}
