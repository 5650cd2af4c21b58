package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Sees is which other groups' folders the main group's agent sees,
// read-only, under /workspace/groups (its own is always there, read-write).
// The zero value sees none.
type Sees struct {
	// All: every group's folder (the whole groups/ directory, so a group
	// registered later is seen at once).
	All bool
	// Folders are the groups seen when All is false, sorted, without
	// repeats; empty: none.
	Folders []Folder
}

// The words of Sees that are not a list of folders.
const (
	SeesAllWord  = "all"
	SeesNoneWord = "none"
)

// SeesAll sees every group's folder.
var SeesAll = Sees{All: true}

// ParseSees reads what the owner gives: "all", "none", or folders
// separated by commas ("family,work"). A list of one folder named all or
// none is written with a comma ("all,").
func ParseSees(s string) (Sees, error) {
	if w, ok := seesWord(strings.TrimSpace(s)); ok {
		return w, nil
	}
	var fs []Folder
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if err := ValidateFolder(f); err != nil {
			return Sees{}, err
		}
		fs = append(fs, Folder(f))
	}
	return seesFolders(fs), nil
}

// seesWord is the Sees of all, none or the empty string, and whether v is
// one of them.
func seesWord(v string) (Sees, bool) {
	switch v {
	case SeesAllWord:
		return SeesAll, true
	case SeesNoneWord, "":
		return Sees{}, true
	}
	return Sees{}, false
}

// seesFolders sees fs, sorted and without repeats.
func seesFolders(fs []Folder) Sees {
	slices.Sort(fs)
	return Sees{Folders: slices.Compact(fs)}
}

// None reports whether s sees no other group's folder.
func (s Sees) None() bool { return !s.All && len(s.Folders) == 0 }

// String is s as ParseSees reads it: all, none, or the folders separated
// by commas.
func (s Sees) String() string {
	switch {
	case s.All:
		return SeesAllWord
	case len(s.Folders) == 0:
		return SeesNoneWord
	}
	parts := make([]string, len(s.Folders))
	for i, f := range s.Folders {
		parts[i] = string(f)
	}
	out := strings.Join(parts, ",")
	if len(parts) == 1 && (out == SeesAllWord || out == SeesNoneWord) {
		out += ","
	}
	return out
}

// Without is s without folder.
func (s Sees) Without(folder Folder) Sees {
	return Sees{All: s.All, Folders: slices.DeleteFunc(slices.Clone(s.Folders), func(f Folder) bool { return f == folder })}
}

// seesSQL is how s is stored: "all", "none" or a JSON array of folders.
func seesSQL(s Sees) string {
	if s.None() || s.All {
		return s.String()
	}
	b, _ := json.Marshal(s.Folders)
	return string(b)
}

// scanSees reads what seesSQL stored.
func scanSees(v string) (Sees, error) {
	if w, ok := seesWord(v); ok {
		return w, nil
	}
	var fs []Folder
	if err := json.Unmarshal([]byte(v), &fs); err != nil {
		return Sees{}, fmt.Errorf("folders seen: %w", err)
	}
	return seesFolders(fs), nil
}
