package testkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goDecls is every top-level name each Go file of the repository declares (functions, methods
// both as Name and Recv.Name, types, constants, variables), by path and by base name.
type goDecls struct {
	byPath map[string]map[string]bool
	byBase map[string][]string
	// tests are the Test, Benchmark and Fuzz functions of every _test.go file.
	tests map[string]bool
}

func scanGoDecls(t *testing.T, root string) goDecls {
	t.Helper()
	d := goDecls{byPath: map[string]map[string]bool{}, byBase: map[string][]string{}, tests: map[string]bool{}}
	fset := token.NewFileSet()
	err := walkGoFiles(root, func(path string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		names := map[string]bool{}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				names[decl.Name.Name] = true
				if decl.Recv != nil && len(decl.Recv.List) == 1 {
					names[receiverName(decl.Recv.List[0].Type)+"."+decl.Name.Name] = true
				} else if strings.HasSuffix(path, "_test.go") && regexp.MustCompile(`^(Test|Benchmark|Fuzz)[A-Z_]`).MatchString(decl.Name.Name) {
					d.tests[decl.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						names[spec.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
		d.byPath[filepath.ToSlash(rel)] = names
		d.byBase[filepath.Base(rel)] = append(d.byBase[filepath.Base(rel)], filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func receiverName(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

var (
	// symbolsInFile is "`BuildPod` in `pod.go`", or a list: "`Env`, `wrapperEnv` and `X` in `env.go`".
	symbolsInFile = regexp.MustCompile("((?:`[A-Za-z_][A-Za-z0-9_.]*(?:\\(\\))?`(?:, and |, | and | or ))*`[A-Za-z_][A-Za-z0-9_.]*(?:\\(\\))?`) (?:is |are )?in `([A-Za-z0-9_./-]+\\.go)`")
	snakeCase     = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)+$`)
	// testName is a backticked Go test, benchmark or fuzz target: `TestWrapperExitCodes`.
	testName = regexp.MustCompile("`((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)`")
)

// TestDocsNameExistingSymbols: a doc that says a symbol is in a file ("`BuildPod` in `pod.go`",
// the file by its repository path or, when that is unambiguous enough, its base name) is right,
// and every test a doc names in backticks exists. A renamed or moved function cannot leave the
// docs pointing at nothing.
func TestDocsNameExistingSymbols(t *testing.T) {
	root := filepath.Join("..")
	decls := scanGoDecls(t, root)
	docs := markdownDocs(t, root)
	claims, tests := 0, 0
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(raw)), " ") // a claim may wrap across lines
		rel, _ := filepath.Rel(root, doc)
		for _, m := range symbolsInFile.FindAllStringSubmatch(text, -1) {
			file := m[2]
			candidates := []string{file}
			if !strings.Contains(file, "/") {
				candidates = decls.byBase[file]
			} else if _, ok := decls.byPath[file]; !ok {
				// A module's README names its paths relative to the module.
				dir, _ := filepath.Rel(root, filepath.Dir(doc))
				candidates = []string{filepath.ToSlash(filepath.Join(dir, file))}
			}
			for _, s := range backticked.FindAllStringSubmatch(m[1], -1) {
				sym := strings.TrimSuffix(s[1], "()")
				if snakeCase.MatchString(sym) {
					continue // a metric, label or key the file writes as a string, not a Go name
				}
				claims++
				found := false
				for _, c := range candidates {
					if decls.byPath[c][sym] {
						found = true
					}
				}
				if !found {
					t.Errorf("%s says `%s` is in `%s`, but no such file declares it (looked in %v)", rel, sym, file, candidates)
				}
			}
		}
		for _, m := range testName.FindAllStringSubmatch(text, -1) {
			tests++
			if !decls.tests[m[1]] {
				t.Errorf("%s names the test `%s`, which does not exist", rel, m[1])
			}
		}
	}
	if claims < 5 || tests < 20 {
		t.Fatalf("only %d symbol claims and %d test names found in %d docs: the patterns no longer match the docs", claims, tests, len(docs))
	}
	t.Logf("%d symbol-in-file claims and %d test names checked in %d docs", claims, tests, len(docs))
}

// markdownDocs lists every .md file of the repository, outside dot directories and build output.
func markdownDocs(t *testing.T, root string) []string {
	t.Helper()
	var docs []string
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && path != root && (strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules" || e.Name() == "e2e-logs") {
			return filepath.SkipDir
		}
		if !e.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// walkGoFiles calls fn for every .go file of the repository under root, skipping hidden
// directories, node_modules, e2e-logs and testdata.
func walkGoFiles(root string, fn func(path string) error) error {
	return filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if name := e.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "e2e-logs" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		return fn(path)
	})
}
