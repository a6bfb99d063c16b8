package semconv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDocumented: every name defined in this package appears in docs/semconv.md (as `name`), so the document
// stays the single source of truth. Stream names, span type values and scope names are checked the same way.
func TestDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "semconv.md"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(node ast.Node) bool {
			vs, ok := node.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				s, _ := strconv.Unquote(lit.Value)
				n++
				if !strings.Contains(string(doc), "`"+s+"`") && !strings.Contains(string(doc), "`"+s+"=") &&
					!strings.Contains(string(doc), "`"+s+"/") && !strings.Contains(string(doc), "**`"+s+"`**") &&
					!strings.Contains(string(doc), s+"`") {
					t.Errorf("%s = %q is not documented in docs/semconv.md", vs.Names[i].Name, s)
				}
			}
			return true
		})
	}
	if n < 50 {
		t.Fatalf("only %d names found: the parser is not reading this package", n)
	}
}
