package bridged_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testSupportDirs are the packages that exist for tests: what they export
// is meant for tests alone.
var testSupportDirs = []string{"e2e", "internal/testimage", "internal/testlog", "internal/testcover",
	"internal/ipc/ipctest", "internal/ipchost/ipchosttest", "internal/store/storetest", "internal/channel/channeltest"}

// TestExportedUsedOnlyByTests reports (never fails on) the exported names
// that non-test code declares and only tests use: `make test-only-names`
// prints them. It matches by name, without types, so it is cheap and
// errs one way: a name also used elsewhere in the product under the same
// spelling (a common method name such as Add or Run) is never reported,
// and a method called only through an interface the standard library
// declares (String, Error, ServeHTTP…) may be. The dead-code check of
// `make lint` is the gate; this is the list to read when pruning.
func TestExportedUsedOnlyByTests(t *testing.T) {
	type decl struct{ dir, name, pos string }
	fset := token.NewFileSet()
	var decls []decl
	prod, tests := map[string]bool{}, map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			return skipDir(path, name)
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		isTest := strings.HasSuffix(name, "_test.go")
		dir := filepath.ToSlash(filepath.Dir(path))
		own := map[*ast.Ident]bool{} // the names f declares, not uses of them
		if !isTest && !slices.Contains(testSupportDirs, dir) && f.Name.Name != "main" {
			add := func(id *ast.Ident, recv string) {
				own[id] = true
				if id.IsExported() {
					decls = append(decls, decl{dir, recv + id.Name, fset.Position(id.Pos()).String()})
				}
			}
			for _, dl := range f.Decls {
				switch dl := dl.(type) {
				case *ast.FuncDecl:
					add(dl.Name, receiver(dl))
				case *ast.GenDecl:
					for _, s := range dl.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							add(s.Name, "")
						case *ast.ValueSpec:
							for _, n := range s.Names {
								add(n, "")
							}
						}
					}
				}
			}
		}
		uses := prod
		if isTest {
			uses = tests
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && !own[id] {
				uses[id.Name] = true
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(decls) < 100 {
		t.Fatalf("found only %d exported names; is the test run from the module?", len(decls))
	}
	for _, d := range decls {
		name := d.name[strings.LastIndex(d.name, ".")+1:]
		if !prod[name] && tests[name] {
			t.Logf("%s: %s.%s is used only by tests", d.pos, d.dir, d.name)
		}
	}
}

// receiver is "T." for a method of T or *T, "" for a function.
func receiver(f *ast.FuncDecl) string {
	if f.Recv == nil || len(f.Recv.List) == 0 {
		return ""
	}
	t := f.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "."
	}
	return ""
}
