package testkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDocsArchitectureListsEveryPackage: two lists of docs/architecture.md are complete and name
// nothing else: the module table's testkit row names every binary that links testkit, and the
// cli/pkg import map every package of cli/pkg.
func TestDocsArchitectureListsEveryPackage(t *testing.T) {
	root := filepath.Join("..")
	raw, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		claim   string
		section func(doc string) string // the part of the doc that makes the claim
		named   *regexp.Regexp          // a path it names (group 1)
		want    []string
	}{
		{"the testkit row names every binary that links testkit", regexp.MustCompile("(?m)^\\| `testkit/` \\|.*$").FindString, regexp.MustCompile("`([a-z0-9-]+/cmd/[a-z0-9-]+)`"), testkitMains(t, root)},
		{"the import map names every package of cli/pkg", codeBlockWith("cli/pkg/"), regexp.MustCompile(`\b(cli/pkg/[a-z0-9]+)`), cliPkgs(t, root)},
	} {
		section := c.section(string(raw))
		if section == "" || len(c.want) == 0 {
			t.Fatalf("docs/architecture.md: %s, but found no such part of the doc or nothing to name (%v): the check no longer matches the doc", c.claim, c.want)
		}
		var named []string
		for _, m := range c.named.FindAllStringSubmatch(section, -1) {
			named = append(named, m[1])
		}
		for _, p := range c.want {
			if !slices.Contains(named, p) {
				t.Errorf("docs/architecture.md: %s, but it does not name %s", c.claim, p)
			}
		}
		for _, p := range named {
			if !slices.Contains(c.want, p) {
				t.Errorf("docs/architecture.md: %s, but it names %s, which is not one", c.claim, p)
			}
		}
	}
}

// codeBlockWith returns the first fenced code block of a doc that contains s.
func codeBlockWith(s string) func(doc string) string {
	return func(doc string) string {
		for i, part := range strings.Split(doc, "\n```") {
			if i%2 == 1 && strings.Contains(part, s) {
				return part
			}
		}
		return ""
	}
}

// testkitMains lists the directories of the repository's main packages that are in testkit or
// whose non-test files import a testkit package directly (a binary that reaches testkit only
// through another package is not found).
func testkitMains(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	fset := token.NewFileSet()
	err := walkGoFiles(root, func(path string) error {
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		links := strings.HasPrefix(rel, "testkit/")
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			links = links || p == "tatara.dev/testkit" || strings.HasPrefix(p, "tatara.dev/testkit/")
		}
		if f.Name.Name == "main" && links && !slices.Contains(dirs, rel) {
			dirs = append(dirs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// cliPkgs lists the directories under cli/pkg that hold non-test Go files.
func cliPkgs(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, "cli", "pkg"))
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, e := range entries {
		files, _ := filepath.Glob(filepath.Join(root, "cli", "pkg", e.Name(), "*.go"))
		if e.IsDir() && slices.ContainsFunc(files, func(f string) bool { return !strings.HasSuffix(f, "_test.go") }) {
			pkgs = append(pkgs, "cli/pkg/"+e.Name())
		}
	}
	return pkgs
}

// goTestCmd is a `go test` command in a doc, up to a comment, a backtick or a shell separator.
var goTestCmd = regexp.MustCompile("(?m)(?:^|[\\s`(])go test((?:[ \\t]+[^\\s`#;&|)]+)*)")

// goTestFlags are the go command's build flags and go test's and the testing package's flags, each
// with whether it takes a value (so the word after it is no package).
var goTestFlags = map[string]bool{
	"a": false, "n": false, "x": false, "v": false, "race": false, "msan": false, "asan": false, "cover": false,
	"work": false, "trimpath": false, "linkshared": false, "modcacherw": false, "buildvcs": false,
	"json": false, "c": false, "benchmem": false, "failfast": false, "short": false, "fullpath": false,
	"p": true, "asmflags": true, "buildmode": true, "compiler": true, "gccgoflags": true, "gcflags": true,
	"installsuffix": true, "ldflags": true, "mod": true, "modfile": true, "overlay": true, "pgo": true,
	"pkgdir": true, "tags": true, "toolexec": true, "C": true, "o": true, "exec": true, "vet": true,
	"covermode": true, "coverpkg": true, "coverprofile": true, "run": true, "skip": true, "bench": true,
	"benchtime": true, "count": true, "cpu": true, "fuzz": true, "fuzztime": true, "fuzzminimizetime": true,
	"list": true, "parallel": true, "shuffle": true, "timeout": true, "outputdir": true, "trace": true,
	"cpuprofile": true, "memprofile": true, "memprofilerate": true, "blockprofile": true,
	"blockprofilerate": true, "mutexprofile": true, "mutexprofilefraction": true,
}

// TestDocsGoTestFlagsExist: a `go test` command in a doc passes only flags that exist: the go
// command's and the testing package's, or flags the named packages' tests declare
// (flag.Bool("update", ...)), here or in a testkit package they import directly. The test binary
// refuses any other, so a doc's command would fail as typed.
func TestDocsGoTestFlagsExist(t *testing.T) {
	root := filepath.Join("..")
	cmds := 0
	for _, doc := range markdownDocs(t, root) {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, m := range goTestCmd.FindAllStringSubmatch(string(raw), -1) {
			cmds++
			declared := map[string]bool{}
			var flags []string
			words, args := strings.Fields(m[1]), false
			for i := 0; i < len(words); i++ {
				if !strings.HasPrefix(words[i], "-") {
					if args {
						continue // after -args, a word is the test binary's
					}
					dir, ok := packageDir(root, filepath.Dir(doc), words[i])
					if !ok {
						t.Errorf("%s: `go test%s` names package %s, which does not exist", rel, m[1], words[i])
						continue
					}
					for _, f := range testFlags(t, root, dir, strings.HasSuffix(words[i], "...")) {
						declared[f] = true
					}
					continue
				}
				name, _, withValue := strings.Cut(strings.TrimPrefix(strings.TrimLeft(words[i], "-"), "test."), "=")
				if name == "args" {
					args = true // the rest goes to the test binary as it is
					continue
				}
				flags = append(flags, name)
				if goTestFlags[name] && !withValue {
					i++ // the flag's value
				}
			}
			for _, f := range flags {
				if _, std := goTestFlags[f]; !std && !declared[f] {
					t.Errorf("%s: `go test%s` passes -%s, which neither go test nor the package's tests declare", rel, m[1], f)
				}
			}
		}
	}
	if cmds == 0 {
		t.Fatalf("found no `go test` command in the docs: the pattern (%s) no longer matches them", goTestCmd)
	}
}

// packageDir resolves a go test package argument (./x/y, x/..., or tatara.dev/x/y) to a
// directory: from the repository root as go.work allows, or from the doc's own directory.
func packageDir(root, docDir, arg string) (string, bool) {
	arg = strings.TrimSuffix(strings.TrimPrefix(arg, "tatara.dev/"), "...")
	for _, base := range []string{root, docDir} {
		dir := filepath.Join(base, arg)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir, true
		}
	}
	return "", false
}

// testFlags lists the flags declared with the flag package (the name is the call's first string
// argument) by the _test.go files in dir (and below it, for a pattern ending in ...), and by the
// testkit packages those import directly.
func testFlags(t *testing.T, root, dir string, below bool) []string {
	t.Helper()
	var flags []string
	fset := token.NewFileSet()
	scan := func(dir string, tests bool) (imports []string) {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") != tests {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "tatara.dev/testkit/") {
					imports = append(imports, strings.TrimPrefix(p, "tatara.dev/"))
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || !isIdent(sel.X, "flag") {
					return true
				}
				for _, arg := range call.Args {
					if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						name, _ := strconv.Unquote(lit.Value)
						flags = append(flags, name)
						break
					}
				}
				return true
			})
		}
		return imports
	}
	_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return err
		}
		if path != dir && !below {
			return filepath.SkipDir
		}
		for _, imp := range scan(path, true) {
			scan(filepath.Join(root, imp), false)
		}
		return nil
	})
	return flags
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// logSourced is a script's line that sources hack/lib/log.sh; logCalled a call of its log or die.
var (
	logSourced = regexp.MustCompile(`(?m)^\s*(?:source|\.)\s+[^\n#]*/lib/log\.sh`)
	logCalled  = regexp.MustCompile(`(?m)(?:^\s*|[;&|{(]\s*|\b(?:then|else|do)\s+)(?:log|die)\s`)
)

// TestDocsHackScriptsLog: hack/README.md's lib/ row says log.sh is the log and die of every
// script but the ones it names: those are exactly the scripts that do not source it, and none of
// them calls log or die.
func TestDocsHackScriptsLog(t *testing.T) {
	hack := filepath.Join("..", "hack")
	raw, err := os.ReadFile(filepath.Join(hack, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `lib/` \\|.*$").FindString(string(raw))
	if !strings.Contains(row, "`log.sh`") {
		t.Fatalf("hack/README.md has no `lib/` row that describes `log.sh`: the check no longer matches the doc")
	}
	exceptions := map[string]bool{}
	for _, m := range backticked.FindAllStringSubmatch(row, -1) {
		if _, err := os.Stat(filepath.Join(hack, m[1])); err == nil && strings.HasSuffix(m[1], ".sh") {
			exceptions[m[1]] = true // a script of hack/, not of hack/lib/
		}
	}
	scripts, err := filepath.Glob(filepath.Join(hack, "*.sh"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no hack/*.sh: %v", err)
	}
	sourcing := 0
	for _, path := range scripts {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, sources := filepath.Base(path), logSourced.Match(src)
		switch {
		case sources && exceptions[name]:
			t.Errorf("hack/README.md's lib/ row names %s as a script without log.sh's log and die, but it sources lib/log.sh", name)
		case !sources && !exceptions[name]:
			t.Errorf("hack/README.md's lib/ row says log.sh is every script's log and die, but %s does not source it and the row does not name it", name)
		case !sources && logCalled.Match(src):
			t.Errorf("hack/%s calls log or die without sourcing lib/log.sh", name)
		}
		if sources {
			sourcing++
		}
	}
	if sourcing < 5 {
		t.Fatalf("only %d of %d hack scripts source lib/log.sh: the pattern (%s) no longer matches them", sourcing, len(scripts), logSourced)
	}
}
