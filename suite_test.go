package bridged_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// maxTestSleeps bounds the time.Sleep calls in the module's tests that
// wait on the real clock. A test waits on an event with a deadline (a
// channel, a file system watch, a pidfd, a long poll), never a sleep for
// something to happen; the calls left stand for a slow peer. A sleep inside
// a synctest bubble (synctest.Test) is not counted: it advances the
// bubble's fake clock at once, after every goroutine of the bubble is
// blocked, which is how such a test says "a minute later".
// Lower it when a sleep goes; it never rises.
const maxTestSleeps = 6

// leakCheckPending names the packages that start goroutines and whose tests
// do not check for leaked ones yet, each with why. An entry whose package
// checks, or starts none, fails TestLeakChecked: remove it.
var leakCheckPending = map[string]string{}

// testFiles parses the module's _test.go files (not testdata, not hidden
// directories), keyed by the package's directory ("" for the root).
func testFiles(t *testing.T) (*token.FileSet, map[string][]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string][]*ast.File{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			return skipDir(path, name)
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." {
			dir = ""
		}
		out[dir] = append(out[dir], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fset, out
}

// calls returns the positions of the calls pkg.name in f, pkg being the
// name f imports path under.
func calls(fset *token.FileSet, f *ast.File, path, name string) []token.Position {
	pkg := importName(f, path)
	if pkg == "" {
		return nil
	}
	var out []token.Position
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == name {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg {
				out = append(out, fset.Position(call.Pos()))
			}
		}
		return true
	})
	return out
}

// realSleeps counts the time.Sleep calls in f outside a synctest bubble
// (the function given to synctest.Test or synctest.Run).
func realSleeps(f *ast.File) int {
	timePkg, synctestPkg := importName(f, "time"), importName(f, "testing/synctest")
	if timePkg == "" {
		return 0
	}
	isCall := func(call *ast.CallExpr, pkg string, names ...string) bool {
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || pkg == "" {
			return false
		}
		id, ok := sel.X.(*ast.Ident)
		return ok && id.Name == pkg && slices.Contains(names, sel.Sel.Name)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		call, ok := node.(*ast.CallExpr)
		if !ok {
			return true
		}
		if isCall(call, synctestPkg, "Test", "Run") {
			return false
		}
		if isCall(call, timePkg, "Sleep") {
			n++
		}
		return true
	})
	return n
}

// The tests call time.Sleep on the real clock at most maxTestSleeps times.
func TestSleepsInTests(t *testing.T) {
	_, files := testFiles(t)
	perDir := map[string]int{}
	total := 0
	for dir, fl := range files {
		for _, f := range fl {
			n := realSleeps(f)
			perDir[dir] += n
			total += n
		}
	}
	if total > maxTestSleeps {
		var dirs []string
		for d, n := range perDir {
			if n > 0 {
				dirs = append(dirs, d+": "+strconv.Itoa(n))
			}
		}
		sort.Strings(dirs)
		t.Errorf("%d time.Sleep calls in tests, over the bound of %d (%s): wait on an event with a deadline instead", total, maxTestSleeps, strings.Join(dirs, ", "))
	}
	if total < maxTestSleeps {
		t.Logf("%d time.Sleep calls in tests: lower maxTestSleeps to it", total)
	}
}

// Every package whose code starts a goroutine checks, after its tests, that
// none they started still runs (goleak.VerifyTestMain in its TestMain),
// unless leakCheckPending names it.
func TestLeakChecked(t *testing.T) {
	_, sources := parseSources(t)
	starts := map[string]bool{}
	for _, sf := range sources {
		ast.Inspect(sf.file, func(n ast.Node) bool {
			if _, ok := n.(*ast.GoStmt); ok {
				starts[sf.dir] = true
				return false
			}
			return true
		})
	}
	fset, tests := testFiles(t)
	checked := map[string]bool{}
	for dir, fl := range tests {
		for _, f := range fl {
			if len(calls(fset, f, "go.uber.org/goleak", "VerifyTestMain")) > 0 {
				checked[dir] = true
			}
		}
	}
	for dir := range starts {
		if _, pending := leakCheckPending[dir]; !checked[dir] && !pending {
			t.Errorf("%s starts goroutines and its tests do not check for leaks: add a TestMain that calls goleak.VerifyTestMain(m)", dir)
		}
	}
	for dir := range leakCheckPending {
		if checked[dir] || !starts[dir] {
			t.Errorf("leakCheckPending names %s, whose tests check for leaks or which starts no goroutine: remove it", dir)
		}
	}
}
