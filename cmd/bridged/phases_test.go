package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// maxRunDaemonLines bounds runDaemon: it names the phases the daemon is
// built in, each a method of daemon with its own doc line; what a phase
// builds goes in the phase, not here.
const maxRunDaemonLines = 120

// runDaemon stays a list of phases: at most maxRunDaemonLines lines, and
// every method of daemon says what it does.
func TestRunDaemonIsPhases(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "daemon.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	methods := 0
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		if fn.Recv == nil && fn.Name.Name == "runDaemon" {
			found = true
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > maxRunDaemonLines {
				t.Errorf("runDaemon is %d lines, over its bound of %d: build the new part in a phase method of daemon", n, maxRunDaemonLines)
			} else {
				t.Logf("runDaemon: %d lines (bound %d)", n, maxRunDaemonLines)
			}
		}
		if fn.Recv != nil && len(fn.Recv.List) == 1 {
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "daemon" {
					methods++
					if fn.Doc == nil {
						t.Errorf("daemon.%s has no doc comment: say what the phase builds", fn.Name.Name)
					}
				}
			}
		}
	}
	if !found {
		t.Fatal("runDaemon not found in daemon.go")
	}
	if methods < 5 {
		t.Errorf("daemon has %d methods; want the daemon built in named phases", methods)
	}
}
