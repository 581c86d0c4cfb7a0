package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sourceFile is one parsed non-test file of a package.
type sourceFile struct {
	*ast.File
	fset    *token.FileSet
	imports map[string]string // each import's local name → its path
}

// pos is where p is, as file:line:column.
func (f sourceFile) pos(p token.Pos) string { return f.fset.Position(p).String() }

// sourceFiles yields the non-test files of the package in dir, parsed, with
// the local name of each import (its own, else its path's last element).
func sourceFiles(t *testing.T, dir string) iter.Seq[sourceFile] {
	t.Helper()
	return func(yield func(sourceFile) bool) {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		fset := token.NewFileSet()
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			imports := map[string]string{}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				local := path[strings.LastIndexByte(path, '/')+1:]
				if imp.Name != nil {
					local = imp.Name.Name
				}
				imports[local] = path
			}
			if !yield(sourceFile{File: f, fset: fset, imports: imports}) {
				return
			}
		}
	}
}

// internalMentions parses the non-test files of the package in dir and
// returns each exported declaration that names a type of a package under
// internal/ (a user could not write that type's name, and every change to it
// would be a change of the public API).
func internalMentions(t *testing.T, dir string) []string {
	t.Helper()
	var leaks []string
	for f := range sourceFiles(t, dir) {
		internal := map[string]string{}
		for local, path := range f.imports {
			if strings.HasPrefix(path, module+"/internal/") {
				internal[local] = path
			}
		}
		if len(internal) == 0 {
			continue
		}
		check := func(where string, n ast.Node) {
			if n == nil {
				return
			}
			ast.Inspect(n, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && internal[x.Name] != "" {
						leaks = append(leaks, fmt.Sprintf("%s: %s mentions %s.%s", f.pos(sel.Pos()), where, internal[x.Name], sel.Sel.Name))
					}
				}
				return true
			})
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
					continue
				}
				check(d.Name.Name, d.Type)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							checkType(s.Name.Name, s.Type, check)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								check(n.Name, s.Type)
								for _, v := range s.Values {
									// An exported constant or variable set
									// to an internal value carries its type.
									check(n.Name, v)
								}
							}
						}
					}
				}
			}
		}
	}
	return leaks
}

// checkType checks what a user sees of a type: its exported fields and
// methods of interfaces, all of an alias or another type expression.
func checkType(name string, typ ast.Expr, check func(string, ast.Node)) {
	switch tt := typ.(type) {
	case *ast.StructType:
		for _, f := range tt.Fields.List {
			exported := len(f.Names) == 0 // embedded: its name is its type
			for _, n := range f.Names {
				exported = exported || n.IsExported()
			}
			if exported {
				check(name, f.Type)
			}
		}
	case *ast.InterfaceType:
		for _, m := range tt.Methods.List {
			check(name, m.Type)
		}
	default:
		check(name, typ)
	}
}

func exportedRecv(fl *ast.FieldList) bool {
	if len(fl.List) == 0 {
		return false
	}
	t := fl.List[0].Type
	for {
		switch tt := t.(type) {
		case *ast.StarExpr:
			t = tt.X
		case *ast.IndexExpr:
			t = tt.X
		case *ast.IndexListExpr:
			t = tt.X
		case *ast.Ident:
			return tt.IsExported()
		default:
			return false
		}
	}
}

// resourcesMentions parses the non-test files of the package in dir and
// returns each place that names natsjs.Resources, whatever the import's
// local name.
func resourcesMentions(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	for f := range sourceFiles(t, dir) {
		for local, path := range f.imports {
			if path != module+"/internal/natsjs" {
				continue
			}
			ast.Inspect(f.File, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Resources" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == local {
						found = append(found, f.pos(sel.Pos()))
					}
				}
				return true
			})
		}
	}
	return found
}
