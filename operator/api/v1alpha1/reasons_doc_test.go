package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestREADMEListsEveryTaskReason: the operator README's table of Ready reasons is where a user
// looks up what a Task's reason means, so every Reason constant of task_types.go is in it.
func TestREADMEListsEveryTaskReason(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "task_types.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if !strings.HasPrefix(name.Name, "Reason") || i >= len(spec.Values) {
				continue
			}
			if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				reasons = append(reasons, v)
			}
		}
		return true
	})
	if len(reasons) < 10 {
		t.Fatalf("found %d Reason constants in task_types.go: the parse missed them", len(reasons))
	}
	for _, r := range reasons {
		if !strings.Contains(string(readme), "| `"+r+"`") && !strings.Contains(string(readme), ", `"+r+"`") {
			t.Errorf("operator/README.md's table of Ready reasons lacks %s", r)
		}
	}
}
