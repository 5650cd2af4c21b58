package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxDBMethods bounds DB's own methods (exported or not): opening,
// closing, transactions, migrations, the group registry and the checks
// that span every table. A query on one table goes on that table's query
// type (queries.go), not here.
const maxDBMethods = 15

// maxQueryMethods bounds every other type's methods: a query type that
// outgrows it is split by concern.
const maxQueryMethods = 20

// DB and Tx stay small and each query type stays within its bound.
func TestMethodCounts(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	got := map[string]int{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				got[id.Name]++
			}
		}
	}
	if got["DB"] == 0 || got["TaskQuery"] == 0 || got["TaskTx"] == 0 {
		t.Fatalf("no methods of DB, TaskQuery or TaskTx found: %v", got)
	}
	for typ, n := range got {
		limit := maxQueryMethods
		if typ == "DB" || typ == "Tx" {
			limit = maxDBMethods
		}
		if n > limit {
			t.Errorf("%s has %d methods, over its bound of %d: move the queries of one table or concern to its query type", typ, n, limit)
		} else {
			t.Logf("%s: %d methods (bound %d)", typ, n, limit)
		}
	}
}
