package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
)

// After a rename, the daemon's start writes the unedited main CLAUDE.md
// again for the new name and leaves the edited global one, which doctor
// then names with the old assistant's name.
func TestDoctorNamesMemoryLeftWithTheOldName(t *testing.T) {
	dir := newHome(t)
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := prepareHome(hm, "Andy", zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	global := filepath.Join(dir, "groups", "global", "CLAUDE.md")
	b, err := os.ReadFile(global)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(global, append(b, "\nAndy signs every answer.\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	doctor := func(name string) string {
		out, _, _ := cli(t, context.Background(), nil, "", "doctor", "--home", dir, "--assistant-name", name,
			"--mount-allowlist", filepath.Join(newHome(t), "none.json"))
		return out
	}
	if out := doctor("Andy"); strings.Contains(out, "memory") {
		t.Errorf("doctor before a rename:\n%s\nwant no memory warning", out)
	}
	if err := prepareHome(hm, "Bob", zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if main, _ := os.ReadFile(filepath.Join(dir, "groups", "main", "CLAUDE.md")); !strings.HasPrefix(string(main), "# Bob — main channel") || strings.Contains(string(main), "Andy") {
		t.Errorf("the unedited main CLAUDE.md after the rename to Bob:\n%s", main)
	}
	out := doctor("Bob")
	if !strings.Contains(out, "memory       warn  groups/global/CLAUDE.md still names the old assistant Andy (the assistant is now Bob)") {
		t.Errorf("doctor after the rename:\n%s\nwant the edited global CLAUDE.md named with Andy", out)
	}
	if strings.Contains(out, "groups/main/CLAUDE.md") {
		t.Errorf("doctor after the rename names the rewritten main CLAUDE.md:\n%s", out)
	}
}
