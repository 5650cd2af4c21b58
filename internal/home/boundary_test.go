package home

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The boundary check: outside this package, no daemon code may touch an
// agent-writable tree (groups/, data/sessions/, data/ipc/, an inbox) with
// the os package's path-based file functions, or with package ipc's
// path-based writers, which follow whatever links an agent planted. It reads
// the module's non-test sources; code inside the container (agent-runner)
// and the test tooling are not the daemon and are skipped.

// pathFuncs are the path-based functions that must not see an agent path.
var pathFuncs = map[string][]string{
	"os": {"Create", "CreateTemp", "WriteFile", "ReadFile", "ReadDir", "Rename", "Remove", "RemoveAll",
		"Mkdir", "MkdirAll", "MkdirTemp", "Open", "OpenFile", "Chown", "Lchown", "Chmod", "Chtimes",
		"Symlink", "Link", "Truncate", "Stat", "Lstat", "OpenRoot", "Readlink"},
	"filepath": {"Walk", "WalkDir", "Glob", "EvalSymlinks"},
	"ipc":      {"WriteFileAtomic", "WriteJSON", "List"},
}

// agentPathMarks are names whose value is a path in an agent-writable tree:
// home.Layout's and ipc.Layout's accessors, and literal directory names.
var agentPathMarks = []string{"GroupDir", "GroupsDir", "GlobalDir", "ClaudeDir", "SessionsDir", "IPCDir",
	"IPCRoot", "SettingsFile", "Input", "Requests", "Responses"}

var agentPathLiterals = []string{"groups", "ipc", "sessions", "inbox", ".claude"}

// skipped are the trees that are not the daemon.
var skipped = []string{"agent-runner", "cmd/fakeclaude", "cmd/testimage", "internal/testimage", "internal/ipc/ipctest", "internal/testcover", "internal/home", "e2e"}

// foreignTrees are files that read another program's tree by name, never
// bridged's, with the reason.
var foreignTrees = map[string]string{
	"internal/nanoclaw/source.go": "reads a stopped NanoClaw install's group folders for `bridged import`, never following a link",
}

func TestNoPathBasedAccessToAgentTrees(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]map[string][]byte{} // directory → file → source
	var files int
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." || slices.Contains(skipped, rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || foreignTrees[rel] != "" {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		dir := path.Dir(rel)
		if dir == "internal/ipc" {
			return nil // the agent side's IPC helpers; the host may not call them (see pathFuncs)
		}
		if pkgs[dir] == nil {
			pkgs[dir] = map[string][]byte{}
		}
		pkgs[dir][rel] = src
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read only %d source files; the walk is broken", files)
	}
	for _, srcs := range pkgs {
		for _, f := range boundaryViolations(t, srcs) {
			t.Errorf("%s: open it through internal/home instead", f)
		}
	}
}

// TestBoundaryCheckCatches proves the check finds what it is for.
func TestBoundaryCheckCatches(t *testing.T) {
	src := `package x
import ("os"; "path/filepath"; "github.com/bridged-app/bridged/internal/ipc")
func a(l Layout, f string) { dir := filepath.Join(l.GroupDir(f), "inbox"); p := dir + "/x"; os.WriteFile(p, nil, 0) }
func b(home string) { os.MkdirAll(filepath.Join(home, "data", "ipc", "x"), 0) }
func c(l ipc.Layout) { ipc.WriteJSON(l.Input(), "n", 1) }
func d() { _ = ipc.Layout{Root: "/x"} }
func e(home string) { os.Remove(filepath.Join(home, "store", "bridged.db")); save(filepath.Join(home, inboxDir), "n") }
const inboxDir = "inbox"
`
	other := `package x
func save(dir, name string) { p := filepath.Join(dir, name); os.Create(p) }
func keep(dir string) { os.Create(dir) }
`
	got := boundaryViolations(t, map[string][]byte{"x.go": []byte(src), "y.go": []byte(other)})
	slices.Sort(got)
	want := []string{"x.go:3: os.WriteFile", "x.go:4: os.MkdirAll", "x.go:5: ipc.WriteJSON", "x.go:6: ipc.Layout", "y.go:2: os.Create"}
	if len(got) != len(want) {
		t.Fatalf("found %q; want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("finding %d = %q; want %q…", i, got[i], want[i])
		}
	}
}

// boundaryViolations checks the files of one package. Taint (an agent path)
// flows through assignments, package-level constants and variables, and
// into the parameters of the package's own functions.
func boundaryViolations(t *testing.T, srcs map[string][]byte) []string {
	fset := token.NewFileSet()
	var files []*ast.File
	for name, src := range srcs {
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		files = append(files, f)
	}
	pos := func(n ast.Node) string {
		p := fset.Position(n.Pos())
		return p.Filename + ":" + strconv.Itoa(p.Line)
	}
	var out []string
	global := map[string]bool{}
	funcs := map[string]*ast.FuncDecl{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if n, ok := n.(*ast.CompositeLit); ok {
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && isPkg(sel.X, "ipc") && sel.Sel.Name == "Layout" {
					out = append(out, pos(n)+": ipc.Layout (path-based IPC access)")
				}
			}
			return true
		})
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Body != nil {
					funcs[d.Name.Name] = d
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok {
						for i, id := range vs.Names {
							if i < len(vs.Values) && isAgentExpr(vs.Values[i], global) {
								global[id.Name] = true
							}
						}
					}
				}
			}
		}
	}
	// Per function: its tainted names, seeded by tainted parameters.
	taint := map[string]map[string]bool{}
	for name := range funcs {
		taint[name] = maps.Clone(global)
	}
	for changed := true; changed; {
		changed = false
		for name, fd := range funcs {
			if propagate(fd.Body, taint[name]) {
				changed = true
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				var callee string
				switch fn := call.Fun.(type) {
				case *ast.Ident:
					callee = fn.Name
				case *ast.SelectorExpr:
					callee = fn.Sel.Name
				}
				g, ok := funcs[callee]
				if !ok {
					return true
				}
				params := paramNames(g)
				for i, a := range call.Args {
					if i < len(params) && params[i] != "_" && !taint[callee][params[i]] && isAgentExpr(a, taint[name]) {
						taint[callee][params[i]] = true
						changed = true
					}
				}
				return true
			})
		}
	}
	for name, fd := range funcs {
		out = append(out, callViolations(fd.Body, taint[name], pos)...)
	}
	return out
}

func paramNames(fd *ast.FuncDecl) []string {
	var names []string
	for _, f := range fd.Type.Params.List {
		if len(f.Names) == 0 {
			names = append(names, "_")
		}
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
	}
	return names
}

// isAgentExpr reports whether e mentions an agent path.
func isAgentExpr(e ast.Node, tainted map[string]bool) bool {
	hit := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if tainted[n.Name] {
				hit = true
			}
		case *ast.SelectorExpr:
			if slices.Contains(agentPathMarks, n.Sel.Name) {
				hit = true
			}
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				s := strings.Trim(n.Value, "`\"")
				for _, l := range agentPathLiterals {
					if s == l || strings.HasPrefix(s, l+"/") || strings.Contains(s, "/"+l) {
						hit = true
					}
				}
			}
		case *ast.FuncLit:
			return false
		}
		return !hit
	})
	return hit
}

// propagate marks names assigned from agent paths; it reports a change.
func propagate(body *ast.BlockStmt, tainted map[string]bool) bool {
	any := false
	for changed := true; changed; {
		changed = false
		ast.Inspect(body, func(n ast.Node) bool {
			var lhs, rhs []ast.Expr
			switch n := n.(type) {
			case *ast.AssignStmt:
				lhs, rhs = n.Lhs, n.Rhs
			case *ast.ValueSpec:
				for _, id := range n.Names {
					lhs = append(lhs, id)
				}
				rhs = n.Values
			case *ast.RangeStmt:
				if n.Value != nil {
					lhs, rhs = []ast.Expr{n.Value}, []ast.Expr{n.X}
				}
			}
			for i, l := range lhs {
				id, ok := l.(*ast.Ident)
				if !ok || tainted[id.Name] || len(rhs) == 0 {
					continue
				}
				if isAgentExpr(rhs[min(i, len(rhs)-1)], tainted) {
					tainted[id.Name] = true
					changed, any = true, true
				}
			}
			return true
		})
	}
	return any
}

// callViolations finds calls of pathFuncs with an agent path argument.
func callViolations(body *ast.BlockStmt, tainted map[string]bool, pos func(ast.Node) string) []string {
	var out []string
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		for pkg, funcs := range pathFuncs {
			if !isPkg(sel.X, pkg) || !slices.Contains(funcs, sel.Sel.Name) {
				continue
			}
			for _, a := range call.Args {
				if isAgentExpr(a, tainted) {
					out = append(out, pos(call)+": "+pkg+"."+sel.Sel.Name+" on an agent-writable path")
					break
				}
			}
		}
		return true
	})
	return out
}

func isPkg(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
