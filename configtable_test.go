package bridged_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/bridged-app/bridged"
	"github.com/bridged-app/bridged/internal/config"
)

// The README's configuration table is checked against the settings
// internal/config knows (config.Variables, which `bridged run --help` and
// the env file that `install-service` writes come from): every variable
// has a row, the table names no variable config does not know, and a
// default the code gives is the default the row shows. The table is
// written by hand; this test keeps it true.
//
// A row's first column names one or more variables in backticks. A name
// that starts with `_` shortens the full name before it: it replaces as
// many of that name's trailing words as it has (`BRIDGED_CONTAINER_MEMORY`
// / `_CPUS` is BRIDGED_CONTAINER_CPUS; `BRIDGED_PROXY_MAX_CONNS` /
// `_MAX_INFLIGHT` is BRIDGED_PROXY_MAX_INFLIGHT). The defaults column
// gives one backticked default per name, in the same order, when it gives
// as many as there are names.
func TestREADMEConfigurationTable(t *testing.T) {
	rows := configRows(t, bridged.README)
	known := make(map[string]config.Variable)
	for _, v := range config.Variables() {
		known[v.Env] = v
	}

	listed := make(map[string]bool)
	quoted := regexp.MustCompile("`([^`]*)`")
	varName := regexp.MustCompile(`^(BRIDGED|ANTHROPIC|CLAUDE)_[A-Z0-9_]+$`)
	for _, row := range rows {
		var names []string
		last := ""
		for _, m := range quoted.FindAllStringSubmatch(row.cells[0], -1) {
			name := m[1]
			if strings.HasPrefix(name, "_") && last != "" {
				words := strings.Split(last, "_")
				n := strings.Count(name, "_")
				if n >= len(words) {
					t.Errorf("README line %d: %s cannot shorten %s", row.line, name, last)
					continue
				}
				name = strings.Join(words[:len(words)-n], "_") + name
			} else {
				last = name
			}
			if !varName.MatchString(name) {
				t.Errorf("README line %d: %q in the variable column is not a variable's name", row.line, name)
				continue
			}
			names = append(names, name)
		}
		if len(names) == 0 {
			t.Errorf("README line %d: a configuration row names no variable: %s", row.line, row.cells[0])
			continue
		}
		var defaults []string
		for _, m := range quoted.FindAllStringSubmatch(row.cells[1], -1) {
			defaults = append(defaults, m[1])
		}
		for i, name := range names {
			if listed[name] {
				t.Errorf("README line %d: %s has a second row", row.line, name)
			}
			listed[name] = true
			v, ok := known[name]
			if !ok {
				t.Errorf("README line %d: %s is in the configuration table but internal/config does not know it", row.line, name)
				continue
			}
			if v.Default == "" {
				continue
			}
			if len(defaults) != len(names) {
				t.Errorf("README line %d: %s defaults to %q in the code; the row shows %d defaults for %d variables", row.line, name, v.Default, len(defaults), len(names))
				continue
			}
			if defaults[i] != v.Default {
				t.Errorf("README line %d: %s defaults to %q in the code; the table says %q", row.line, name, v.Default, defaults[i])
			}
		}
		// A variable named in the rest of the row (e.g. "same format as
		// BRIDGED_RETENTION") must exist too.
		for _, cell := range row.cells[1:] {
			for _, m := range regexp.MustCompile(`BRIDGED_[A-Z0-9_]*[A-Z0-9]`).FindAllString(cell, -1) {
				if _, ok := known[m]; !ok {
					t.Errorf("README line %d: the row mentions %s, which internal/config does not know", row.line, m)
				}
			}
		}
	}
	for _, v := range config.Variables() {
		if !listed[v.Env] {
			t.Errorf("internal/config knows %s, but the README's configuration table has no row for it", v.Env)
		}
	}
}

type configRow struct {
	line  int
	cells []string
}

// configRows returns the body rows of the first table under the README's
// "## Configuration", split into cells.
func configRows(t *testing.T, readme string) []configRow {
	t.Helper()
	lines := strings.Split(readme, "\n")
	start := -1
	for i, l := range lines {
		if l == "## Configuration" {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatal(`README has no "## Configuration" section`)
	}
	var rows []configRow
	inTable := false
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "## ") {
			break
		}
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break
			}
			continue
		}
		if !inTable {
			inTable = true // the header row
			continue
		}
		if strings.HasPrefix(l, "|---") {
			continue
		}
		// Cells split at every | that is not escaped (\|), trimmed.
		cells := strings.Split(strings.ReplaceAll(strings.Trim(l, "|"), `\|`, "\x00"), "|")
		for j, c := range cells {
			cells[j] = strings.TrimSpace(strings.ReplaceAll(c, "\x00", "|"))
		}
		if len(cells) < 3 {
			t.Fatalf("README line %d: a configuration row has %d cells, want 3: %s", i+1, len(cells), l)
		}
		rows = append(rows, configRow{line: i + 1, cells: cells})
	}
	if len(rows) == 0 {
		t.Fatal("README's Configuration section has no table")
	}
	return rows
}
