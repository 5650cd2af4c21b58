package store

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rs/zerolog"
)

func TestParseSees(t *testing.T) {
	tests := []struct {
		in, want string
		folders  []Folder
		all      bool
		bad      bool
	}{
		{in: "all", want: "all", all: true},
		{in: " none ", want: "none"},
		{in: "", want: "none"},
		{in: "work, family,work", want: "family,work", folders: []Folder{"family", "work"}},
		{in: "all,", want: "all,", folders: []Folder{"all"}},
		{in: "Family", bad: true},
		{in: "../store", bad: true},
		{in: "global", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseSees(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("ParseSees(%q) = %v; want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got.String() != tt.want || got.All != tt.all || !reflect.DeepEqual(got.Folders, tt.folders) {
			t.Errorf("ParseSees(%q) = %+v (%q), %v; want %q", tt.in, got, got.String(), err, tt.want)
		}
		back, err := scanSees(seesSQL(got))
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("stored %q read back as %+v, %v; want %+v", seesSQL(got), back, err, got)
		}
	}
}

// A new main group sees no other group's folder; the owner names those it
// sees, each a registered group's; only the main group sees any; a removed
// group leaves the main group's list.
func TestGroupSees(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	main, err := db.Groups.Add(ctx, Group{Chat: "local:main", Folder: "main", IsMain: true})
	if err != nil {
		t.Fatal(err)
	}
	if !main.Sees.None() {
		t.Fatalf("a new main group sees %s; want none", main.Sees)
	}
	fam := addGroup(t, db, "local:family", "family")
	addGroup(t, db, "local:work", "work")

	main.Sees = Sees{Folders: []Folder{"family", "work"}}
	if err := db.Groups.Update(ctx, main); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Groups.Main(ctx); got.Sees.String() != "family,work" {
		t.Errorf("main sees %s; want family,work", got.Sees)
	}
	for _, bad := range []struct {
		name string
		g    Group
	}{
		{"a folder no group has", func() Group { g := main; g.Sees = Sees{Folders: []Folder{"nobody"}}; return g }()},
		{"its own folder", func() Group { g := main; g.Sees = Sees{Folders: []Folder{"main"}}; return g }()},
		{"a group that is not main", func() Group { g := fam; g.Sees = SeesAll; return g }()},
	} {
		if err := db.Groups.Update(ctx, bad.g); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Update = %v; want ErrInvalid", bad.name, err)
		}
	}
	if err := db.Groups.Remove(ctx, "family"); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Groups.Main(ctx); got.Sees.String() != "work" {
		t.Errorf("after family's removal main sees %s; want work", got.Sees)
	}
	addGroup(t, db, "local:family2", "family")
	if got, _ := db.Groups.Main(ctx); got.Sees.String() != "work" {
		t.Errorf("a new group in a removed group's folder: main sees %s; want work only", got.Sees)
	}
}

// Migration 0021: the main group of a home made before keeps seeing every
// group's folder, as it did, and the owner is told once; the other groups
// see none.
func TestMigrationMainSeesAll(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridged.db")
	old, err := OpenUpTo(ctx, path, 20, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO registered_groups (chat, name, folder, trigger_word, requires_trigger, is_main, container_config, created_at) VALUES ('local:main', 'main', 'main', '@Andy', 0, 1, '{}', 1)`,
		`INSERT INTO registered_groups (chat, name, folder, trigger_word, requires_trigger, is_main, container_config, created_at) VALUES ('local:family', 'family', 'family', '@Andy', 1, 0, '{}', 2)`,
	} {
		if _, err := old.write.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	db := openAt(t, path)
	main, err := db.Groups.Main(ctx)
	if err != nil || !main.Sees.All {
		t.Errorf("migrated main group sees %s, %v; want all", main.Sees, err)
	}
	fam, err := db.Groups.ByFolder(ctx, "family")
	if err != nil || !fam.Sees.None() {
		t.Errorf("migrated family group sees %s, %v; want none", fam.Sees, err)
	}
	if told, err := db.Notices.Take(ctx, "main_sees"); err != nil || !told {
		t.Errorf("main_sees notice: %v, %v; want one pending", told, err)
	}
	// A fresh store has no notice to give.
	if told, _ := openTest(t).Notices.Take(ctx, "main_sees"); told {
		t.Error("a fresh store has a main_sees notice pending; want none")
	}
}
