package bridged_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/bridged-app/bridged"
)

// module is this module's path; imports outside it are not checked here.
const module = "github.com/bridged-app/bridged"

// tier is a package's place in DESIGN §2's dependency direction. A package
// may import packages of a lower tier only (and, where allowedSameTier says
// so, of its own), so every arrow points down.
type tier int

const (
	// leaf packages hold formats, paths and protocols shared by the daemon
	// and the agent runner; they import other leaves only.
	leaf tier = iota
	// storeTier is the SQLite store: it imports nothing of bridged's own
	// but the embedded migrations (a leaf of data).
	storeTier
	// domain holds the rules for groups and tasks that every entry point
	// (CLI, control API, agent tools) shares; it sits on the store.
	domain
	// middle holds the services: each owns one concern and none imports
	// another, so each can be read, tested and replaced alone.
	middle
	// runTier runs one agent container: it combines the container, queue
	// and prompt services for one run, and reports to the orchestrator
	// that started it through a small interface.
	runTier
	// upper holds the orchestrators that combine services: the router, the
	// scheduler, the control API and the channels.
	upper
	// program is a main package, the wiring, or a test-only package: it may
	// import anything.
	program
)

func (t tier) String() string {
	return [...]string{"leaf", "store", "domain", "middle", "run", "upper", "program"}[t]
}

// tiers places every package of the module. A package missing here fails
// TestDependencyDirection: a new package gets its tier when it is added,
// and a package removed leaves the table with it.
var tiers = map[string]tier{
	"":                       program, // the documents the binary installs
	"cmd/bridged":            program,
	"cmd/fakeclaude":         program,
	"cmd/testimage":          program,
	"e2e":                    program,
	"agent-runner":           program,
	"agent-runner/mcpserver": program, // the agent runner links leaves only (see checkLayering)
	"agent-runner/runner":    program,
	"internal/ipc/ipctest":   program, // test support
	"internal/testcover":     program, // test support
	"internal/config":        program, // the wiring's reading half: routes each setting to the package that bounds it

	// test support shared by the packages' tests
	"internal/testlog":                       program,
	"internal/store/storetest":               program,
	"internal/ipchost/ipchosttest":           program,
	"internal/channel/channeltest":           program,
	"internal/channel/telegram/telegramtest": program, // the fake Bot API
	"internal/nanoclaw/nanoclawtest":         program,

	"groups":                    leaf,
	"migrations":                leaf,
	"internal/channel":          leaf, // the Channel interface only
	"internal/claudecli":        leaf,
	"internal/setting":          leaf, // the shape of a package's bounds on its settings
	"internal/dirwatch":         leaf, // the directory engine: imports nothing of bridged's own
	"internal/home":             leaf,
	"internal/ipc":              leaf,
	"internal/schedule":         leaf,
	"internal/termsafe":         leaf,
	"internal/testimage":        leaf,
	"internal/turns":            leaf,
	"internal/store":            storeTier,
	"internal/rules":            domain,
	"internal/container":        middle,
	"internal/credproxy":        middle,
	"internal/groupqueue":       middle,
	"internal/ipchost":          middle,
	"internal/outbox":           middle,
	"internal/prompt":           domain, // text only; on the store for its message and task types
	"internal/alerts":           middle,
	"internal/approvals":        middle, // approval requests in the main chat, settled once
	"internal/retention":        middle,
	"internal/snapshot":         middle, // what each turn changed in its folder and memory; undo
	"internal/remotecontrol":    middle, // the owner's /remote-control: a host-level claude session
	"internal/transcribe":       middle,
	"internal/media":            middle,
	"internal/ingest":           middle, // stores inbound messages and wakes the router; built first
	"internal/agentrun":         runTier,
	"internal/router":           upper,
	"internal/scheduler":        upper,
	"internal/control":          upper,
	"internal/dashboard":        upper,
	"internal/nanoclaw":         upper, // reads a NanoClaw install and imports it (bridged import nanoclaw)
	"internal/channel/local":    upper,
	"internal/channel/whatsapp": upper,
	"internal/channel/telegram": upper,
}

// allowedSameTier lists the imports between packages of one tier that are
// part of the design, each with its reason. Leaves may import leaves and
// programs anything, so neither needs listing.
var allowedSameTier = map[[2]string]string{
	{"internal/control", "internal/channel/local"}: "the control API stores a chat under the local channel's name",
	{"internal/dashboard", "internal/control"}:     "the dashboard shows what the control API's Admin and server report",
}

// storeMayImport is all the store may import of bridged's own.
var storeMayImport = []string{"migrations"}

// pkg is the part of `go list -json` this test reads.
type pkg struct {
	ImportPath string
	Imports    []string // direct imports of the package's non-test files
	Deps       []string // every package it links, transitively
	Error      *struct{ Err string }
}

// listPackages lists every package of the module with `go list -json`
// (non-test files only: tests may import across tiers to drive the real
// thing) and returns them by path relative to the module.
func listPackages(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps,Error", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		p.ImportPath = rel(p.ImportPath)
		pkgs[p.ImportPath] = p
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages; is the test run from the module?", len(pkgs))
	}
	return pkgs
}

// rel returns a path of this module relative to the module ("" for its root).
func rel(path string) string {
	if path == module {
		return ""
	}
	return strings.TrimPrefix(path, module+"/")
}

func ours(path string) bool { return path == module || strings.HasPrefix(path, module+"/") }

// checkLayering returns one line per import that breaks DESIGN §2's direction.
func checkLayering(pkgs map[string]pkg) []string {
	var bad []string
	for _, path := range sortedKeys(pkgs) {
		p := pkgs[path]
		from, ok := tiers[path]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s is in no tier: add it to the tiers table of deps_test.go", path))
			continue
		}
		if from == program {
			continue
		}
		for _, imp := range p.Imports {
			if !ours(imp) {
				continue
			}
			to := rel(imp)
			toTier, ok := tiers[to]
			switch {
			case !ok:
				continue // reported as a package of its own
			case from == storeTier:
				if !slices.Contains(storeMayImport, to) {
					bad = append(bad, fmt.Sprintf("%s imports %s: the store imports nothing of bridged's own", path, to))
				}
			case toTier == program:
				bad = append(bad, fmt.Sprintf("%s (%s) imports %s, a program or test-support package", path, from, to))
			case toTier > from:
				bad = append(bad, fmt.Sprintf("%s (%s) imports %s (%s): dependencies point down only", path, from, to, toTier))
			case toTier == from && from != leaf:
				if _, ok := allowedSameTier[[2]string{path, to}]; !ok {
					bad = append(bad, fmt.Sprintf("%s imports its sibling %s (both %s): siblings do not import each other", path, to, from))
				}
			}
		}
	}
	// The store's whole closure, not just its direct imports.
	if st, ok := pkgs["internal/store"]; ok {
		for _, d := range st.Deps {
			if ours(d) && !slices.Contains(storeMayImport, rel(d)) {
				bad = append(bad, fmt.Sprintf("internal/store links %s: the store imports nothing of bridged's own", rel(d)))
			}
		}
	}
	// The agent runner runs in the container: it links formats, never the
	// daemon's store, runtime or services.
	for _, path := range sortedKeys(pkgs) {
		if path != "agent-runner" && !strings.HasPrefix(path, "agent-runner/") {
			continue
		}
		for _, d := range pkgs[path].Deps {
			if ours(d) && !strings.HasPrefix(rel(d), "agent-runner") && tiers[rel(d)] != leaf {
				bad = append(bad, fmt.Sprintf("%s links %s: the agent runner links leaves only", path, rel(d)))
			}
		}
	}
	return bad
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestDependencyDirection pins DESIGN §2: the store imports nothing internal,
// no service imports a sibling service, leaves import no service, and the
// agent runner links leaves only.
func TestDependencyDirection(t *testing.T) {
	pkgs := listPackages(t)
	for _, line := range checkLayering(pkgs) {
		t.Error(line)
	}
	for _, path := range sortedKeys(tiers) {
		if _, ok := pkgs[path]; !ok {
			t.Errorf("%s is in the tiers table of deps_test.go but is no package of the module", path)
		}
	}
	// The two edges the layering was redrawn for, named so that a failure
	// reads as what broke.
	for _, d := range pkgs["internal/ipchost"].Deps {
		if rel(d) == "internal/container" {
			t.Error("internal/ipchost links internal/container; the home layout lives in internal/home")
		}
	}
}

// TestDependencyCheckCatches feeds checkLayering a graph with one forbidden
// import of each kind and expects each reported.
func TestDependencyCheckCatches(t *testing.T) {
	m := func(s string) string { return module + "/" + s }
	pkgs := map[string]pkg{
		"internal/store":      {Imports: []string{m("migrations"), m("internal/schedule")}, Deps: []string{m("migrations"), m("internal/schedule")}},
		"internal/ipchost":    {Imports: []string{m("internal/container"), m("internal/store"), m("internal/ipc")}},
		"internal/container":  {Imports: []string{m("internal/home")}},
		"internal/ipc":        {Imports: []string{m("internal/store")}},
		"internal/rules":      {Imports: []string{m("internal/groupqueue")}},
		"internal/router":     {Imports: []string{m("internal/scheduler"), m("internal/container")}},
		"internal/control":    {Imports: []string{m("internal/channel/local")}},
		"internal/home":       {},
		"internal/nowhere":    {},
		"agent-runner":        {Deps: []string{m("internal/ipc"), m("internal/store")}},
		"internal/schedule":   {},
		"migrations":          {},
		"internal/groupqueue": {},
	}
	got := strings.Join(checkLayering(pkgs), "\n")
	for _, want := range []string{
		"internal/store imports internal/schedule",
		"internal/store links internal/schedule",
		"internal/ipchost imports its sibling internal/container",
		"internal/ipc (leaf) imports internal/store (store)",
		"internal/rules (domain) imports internal/groupqueue (middle)",
		"internal/router imports its sibling internal/scheduler",
		"internal/nowhere is in no tier",
		"agent-runner links internal/store",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("not reported: %q\nreported:\n%s", want, got)
		}
	}
	for _, fine := range []string{"internal/control imports", "internal/router imports internal/container", "internal/container"} {
		for _, line := range strings.Split(got, "\n") {
			if strings.HasPrefix(line, fine) {
				t.Errorf("reported an allowed import: %s", line)
			}
		}
	}
}

// TestReadmeListsEveryPackage keeps the layout page (docs/layout.md, linked
// from the README) complete: one line per package, starting with its path.
func TestReadmeListsEveryPackage(t *testing.T) {
	if !strings.Contains(bridged.README, "(docs/layout.md)") {
		t.Fatal("README does not link docs/layout.md")
	}
	b, err := os.ReadFile("docs/layout.md")
	if err != nil {
		t.Fatal(err)
	}
	layout := string(b)
	listed := map[string]bool{}
	for _, line := range strings.Split(layout, "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "  ") && len(f) > 1 {
			listed[strings.TrimSuffix(f[0], "/")] = true
		}
	}
	for path := range listPackages(t) {
		if path == "" {
			path = "."
		}
		if !listed[path] {
			t.Errorf("README's layout section does not list %s", path)
		}
	}
}
