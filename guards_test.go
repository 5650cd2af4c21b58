package bridged_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// allowedContextKeys lists every key a non-test file of the module may put
// in a context with context.WithValue, by the package's directory and the
// key as written, with what it carries. A key missing here fails
// TestNoCommitInContext: request-scoped data only, never a callback or a
// unit of work (those are parameters, so the signatures show every path
// that commits).
var allowedContextKeys = map[[2]string]string{
	{"internal/credproxy", "requestKey{}"}: "an API request's group folder and budget reservation (a requestMeta), for its response's meter to charge",
	{"internal/dashboard", "sessionKey{}"}: "the signed-in dashboard session of a request (its CSRF token and expiry), for its page",
}

// allowedCmdSetters lists the Set… and On… calls cmd/bridged may make, as
// written: the standard library's, which configure a value, never wire one
// component into another after construction.
var allowedCmdSetters = map[string]bool{
	"fs.SetOutput":       true, // flag.FlagSet
	"enc.SetIndent":      true, // json.Encoder
	"debug.SetGCPercent": true, // runtime/debug
}

// sourceFile is one parsed non-test Go file of the module.
type sourceFile struct {
	dir  string // the package's directory, relative to the module ("" for the root)
	path string
	file *ast.File
}

// parseSources parses every non-test .go file of the module (not testdata,
// not hidden directories).
// skipDir is the walk's answer for directory path (base name name): the
// module's code is everywhere but hidden, underscore, testdata, node_modules
// and vendor directories.
func skipDir(path, name string) error {
	if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" || name == "vendor") {
		return filepath.SkipDir
	}
	return nil
}

func parseSources(t *testing.T) (*token.FileSet, []sourceFile) {
	t.Helper()
	fset := token.NewFileSet()
	var out []sourceFile
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			return skipDir(path, name)
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
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
		out = append(out, sourceFile{dir: dir, path: path, file: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("found only %d Go files; is the test run from the module?", len(out))
	}
	return fset, out
}

// importName returns the name file f uses for the package with import path
// path ("" if it does not import it).
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil || p != path {
			continue
		}
		if imp.Name != nil {
			return imp.Name.Name
		}
		return path[strings.LastIndex(path, "/")+1:]
	}
	return ""
}

// commitish matches the names of what must never travel in a context: a
// commit, a unit of work, a hook or callback, a transaction.
var commitish = regexp.MustCompile(`(?i)commit|unit|hook|callback|record|enqueue|\btx\b|func`)

// No context.WithValue in the module's code carries a callback or a commit:
// every key is listed in allowedContextKeys, and no value is a function
// literal or is named like a commit, a unit of work or a hook.
func TestNoCommitInContext(t *testing.T) {
	fset, files := parseSources(t)
	seen := map[[2]string]bool{}
	for _, sf := range files {
		ctxName := importName(sf.file, "context")
		if ctxName == "" || ctxName == "_" {
			continue
		}
		ast.Inspect(sf.file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "WithValue" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != ctxName {
				return true
			}
			at := fset.Position(call.Pos())
			if len(call.Args) != 3 {
				t.Errorf("%s: context.WithValue with %d arguments", at, len(call.Args))
				return true
			}
			key := [2]string{sf.dir, types.ExprString(call.Args[1])}
			val := call.Args[2]
			seen[key] = true
			if _, ok := allowedContextKeys[key]; !ok {
				t.Errorf("%s: context.WithValue with key %s is not in allowedContextKeys: pass callbacks and units of work as parameters, "+
					"and list a key of request-scoped data there with what it carries", at, key[1])
			}
			if _, ok := val.(*ast.FuncLit); ok {
				t.Errorf("%s: context.WithValue carries a function literal: pass it as a parameter", at)
			} else if s := types.ExprString(val); commitish.MatchString(s) {
				t.Errorf("%s: context.WithValue carries %s, named like a callback or a commit: pass it as a parameter", at, s)
			}
			return true
		})
	}
	for key := range allowedContextKeys {
		if !seen[key] {
			t.Errorf("allowedContextKeys lists %s in %s, which no context.WithValue uses any more: remove it", key[1], key[0])
		}
	}
}

// setterCall matches a method named Set… (SetPoster, SetSink) or On…
// (OnEnd, OnChange): a call that completes wiring after construction, by
// setting a dependency or registering a callback.
var setterCall = regexp.MustCompile(`^(Set|On)[A-Z]`)

// cmd/bridged wires the daemon by construction order and constructor
// arguments: no Set… or On… call completes the wiring afterwards. The
// standard library's setters it uses are listed in allowedCmdSetters.
func TestNoWiringSettersInCmd(t *testing.T) {
	fset, files := parseSources(t)
	n := 0
	for _, sf := range files {
		if sf.dir != "cmd/bridged" {
			continue
		}
		n++
		ast.Inspect(sf.file, func(node ast.Node) bool {
			call, ok := node.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !setterCall.MatchString(sel.Sel.Name) {
				return true
			}
			if s := types.ExprString(sel); !allowedCmdSetters[s] {
				t.Errorf("%s: %s( completes wiring after construction: give it as a constructor argument, "+
					"or build what it needs first (a standard library setter goes in allowedCmdSetters)", fset.Position(call.Pos()), s)
			}
			return true
		})
	}
	if n == 0 {
		t.Fatal("no files of cmd/bridged found")
	}
}

// maxMethods bounds the methods (exported or not) of types that tend to
// gather everything: what they hold grows, their methods move out to the
// parts they use.
var maxMethods = map[[2]string]int{
	{"internal/ipchost", "Host"}: 20, // the file protocol's requests; the directory engine is internal/dirwatch
}

// methodCounts counts the methods declared on each named type of files,
// keyed by package directory and type name.
func methodCounts(files []sourceFile) map[[2]string]int {
	got := map[[2]string]int{}
	for _, sf := range files {
		for _, d := range sf.file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				got[[2]string{sf.dir, id.Name}]++
			}
		}
	}
	return got
}

// Each type of maxMethods has at most its bound of methods.
func TestMethodCounts(t *testing.T) {
	_, files := parseSources(t)
	got := methodCounts(files)
	for k, limit := range maxMethods {
		switch n := got[k]; {
		case n == 0:
			t.Errorf("%s.%s has no methods: is it still there?", k[0], k[1])
		case n > limit:
			t.Errorf("%s.%s has %d methods, over its bound of %d: move what is not its own to the part it belongs to", k[0], k[1], n, limit)
		default:
			t.Logf("%s.%s: %d methods (bound %d)", k[0], k[1], n, limit)
		}
	}
}

// packageMaxMethods bounds every type of a package that is built of owned
// parts: none of them gathers everything again.
var packageMaxMethods = map[string]int{
	"internal/channel/whatsapp": 20, // the Client composes its parts (client.go)
	"internal/channel/telegram": 20, // the Client is its core and the parts that view it (telegram.go)
}

// Each type of a package in packageMaxMethods has at most its bound of
// methods.
func TestPackageMethodCounts(t *testing.T) {
	_, files := parseSources(t)
	got := map[string]map[string]int{} // package → type → methods
	for k, n := range methodCounts(files) {
		if _, ok := packageMaxMethods[k[0]]; !ok {
			continue
		}
		if got[k[0]] == nil {
			got[k[0]] = map[string]int{}
		}
		got[k[0]][k[1]] = n
	}
	for dir, limit := range packageMaxMethods {
		if len(got[dir]) == 0 {
			t.Errorf("%s has no methods: is it still there?", dir)
		}
		for typ, n := range got[dir] {
			if n > limit {
				t.Errorf("%s.%s has %d methods, over the package's bound of %d: split it into parts that own their state", dir, typ, n, limit)
			}
		}
	}
}

// packageMaxLines bounds the non-test Go lines of a package that must stay
// small: the router is the glue between the channels, the store and the
// runs (docs/architecture.md), and what grows in it belongs to one of them.
var packageMaxLines = map[string]int{
	"internal/router": 1200,
}

// Each package in packageMaxLines has at most its bound of non-test lines.
func TestPackageLines(t *testing.T) {
	fset, files := parseSources(t)
	got := map[string]int{}
	for _, f := range files {
		if _, ok := packageMaxLines[f.dir]; ok {
			got[f.dir] += fset.File(f.file.Pos()).LineCount()
		}
	}
	for dir, limit := range packageMaxLines {
		switch n := got[dir]; {
		case n == 0:
			t.Errorf("%s has no Go files: is it still there?", dir)
		case n > limit:
			t.Errorf("%s has %d lines of non-test Go, over its bound of %d: move what is not its own to the package it belongs to", dir, n, limit)
		default:
			t.Logf("%s: %d lines (bound %d)", dir, n, limit)
		}
	}
}
