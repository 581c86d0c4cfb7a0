package archtest

import (
	"fmt"
	"go/ast"
	"strings"
	"testing"
)

// Whatever starts stops within a deadline: every type of the module with a
// Start(ctx context.Context, ...) method has Stop(ctx context.Context)
// error, the shape of internal/startstop, so that whoever stops it (serve on
// SIGTERM, a dispatcher stopping its broker, a test) can bound the wait and
// learn that it ran out.
func TestWhatStartsStopsWithinADeadline(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	for path := range pkgs {
		if !strings.HasPrefix(path, module+"/") {
			continue
		}
		dir := "../../" + strings.TrimPrefix(path, module+"/")
		for _, bad := range startWithoutStop(t, dir) {
			t.Errorf("%s: %s", path, bad)
		}
	}
}

// startWithoutStop parses the package in dir and names each type whose
// Start takes a context first but whose Stop is missing or is not
// Stop(ctx context.Context) error.
func startWithoutStop(t *testing.T, dir string) []string {
	t.Helper()
	type method struct {
		f    sourceFile
		decl *ast.FuncDecl
	}
	methods := map[string]map[string]method{} // receiver type → name → method
	for f := range sourceFiles(t, dir) {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			recv := receiverName(fd.Recv.List[0].Type)
			if methods[recv] == nil {
				methods[recv] = map[string]method{}
			}
			methods[recv][fd.Name.Name] = method{f, fd}
		}
	}
	var bad []string
	for recv, ms := range methods {
		start, ok := ms["Start"]
		if !ok || !firstParamIsContext(start.f, start.decl.Type) {
			continue
		}
		stop, ok := ms["Stop"]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s: %s has Start(ctx) but no Stop(ctx) error", start.f.pos(start.decl.Pos()), recv))
		case !isStopWithDeadline(stop.f, stop.decl.Type):
			bad = append(bad, fmt.Sprintf("%s: %s.Stop must be Stop(ctx context.Context) error", stop.f.pos(stop.decl.Pos()), recv))
		}
	}
	return bad
}

func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr: // a generic type's receiver
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return fmt.Sprintf("%T", e)
}

// isContext: the expression names context.Context in f.
func isContext(f sourceFile, e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Context" {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && f.imports[x.Name] == "context"
}

func firstParamIsContext(f sourceFile, ft *ast.FuncType) bool {
	return ft.Params != nil && len(ft.Params.List) > 0 && isContext(f, ft.Params.List[0].Type)
}

// isStopWithDeadline: func(ctx context.Context) error, the one parameter
// named or not.
func isStopWithDeadline(f sourceFile, ft *ast.FuncType) bool {
	if ft.Params == nil || len(ft.Params.List) != 1 || len(ft.Params.List[0].Names) > 1 || !isContext(f, ft.Params.List[0].Type) {
		return false
	}
	if ft.Results == nil || len(ft.Results.List) != 1 || len(ft.Results.List[0].Names) > 1 {
		return false
	}
	id, ok := ft.Results.List[0].Type.(*ast.Ident)
	return ok && id.Name == "error"
}
