package testkit_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestModuleLayoutsNameEveryPackage: every module of the workspace has a README whose layout
// table names each of its Go packages, and everything the table names exists: the paths of the
// first column, and the Go files the second column names for a package. Every package with
// non-test code has a doc comment, which is what the table's rows summarise.
func TestModuleLayoutsNameEveryPackage(t *testing.T) {
	layout := tableUnder("## Layout")
	for _, dir := range workspaceModules(t) {
		module := filepath.Base(dir)
		t.Run(module, func(t *testing.T) {
			readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
			if err != nil {
				t.Fatalf("module %s has no README with a layout: %v", module, err)
			}
			rows := layout(string(readme))
			if len(rows) == 0 {
				t.Fatalf("%s/README.md: no table under %q", module, "## Layout")
			}
			var entries []string
			for _, row := range rows {
				entries = append(entries, row.paths...)
				for _, p := range row.paths {
					if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
						t.Errorf("%s/README.md names %q, which does not exist", module, p)
					}
				}
				for _, f := range row.goFiles {
					if _, err := os.Stat(filepath.Join(dir, row.paths[0], f)); err != nil {
						t.Errorf("%s/README.md says %s has %s, which does not exist", module, row.paths[0], f)
					}
				}
				if filepath.Base(row.paths[0]) == "testdata" {
					checkTestdataRow(t, module, dir, row)
				}
			}
			for _, pkg := range packages(t, dir) {
				named := slices.ContainsFunc(entries, func(e string) bool { return e == pkg.dir || filepath.Dir(e) == pkg.dir && strings.HasSuffix(e, ".go") })
				if !named && pkg.dir != "." {
					t.Errorf("%s/README.md's layout does not name package %s", module, pkg.dir)
				}
				if pkg.hasCode && pkg.doc == "" {
					t.Errorf("%s: package %s has no doc comment", module, pkg.dir)
				}
			}
		})
	}
}

// workspaceModules lists the directories of the go.work modules, as the go command reads them.
func workspaceModules(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	mods := strings.Fields(string(out))
	if len(mods) < 2 {
		t.Fatalf("go list -m found modules %v: not the workspace", mods)
	}
	return mods
}

type pkgInfo struct {
	dir     string // relative to the module
	doc     string
	hasCode bool // non-test Go files
}

// packages lists the module's Go packages (the e2e build tag included, so the suite counts).
func packages(t *testing.T, dir string) []pkgInfo {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "e2e", "-f", "{{.Dir}}\t{{len .GoFiles}}\t{{.Doc}}", "./...")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []pkgInfo
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			t.Fatalf("go list line %q", line)
		}
		rel, err := filepath.Rel(abs, f[0])
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, pkgInfo{dir: rel, hasCode: f[1] != "0", doc: f[2]})
	}
	return pkgs
}

var backticked = regexp.MustCompile("`([^`]+)`")

// layoutRow is one row of a layout table: the backticked paths of its first cell, the Go files
// (backticked names ending in .go, without a slash) its second cell says the first path holds,
// and the text of that cell.
type layoutRow struct {
	paths   []string
	goFiles []string
	what    string
}

// checkTestdataRow: a testdata row describes files, not a package, so it names each entry of the
// directory in backticks (a directory with a trailing slash: `snapshots/`), and every directory
// it names is there. A kind of data cannot come or go without the row.
func checkTestdataRow(t *testing.T, module, dir string, row layoutRow) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, row.paths[0]))
	if err != nil {
		t.Errorf("%s/README.md names %q: %v", module, row.paths[0], err)
		return
	}
	named := map[string]bool{}
	for _, m := range backticked.FindAllStringSubmatch(row.what, -1) {
		named[m[1]] = true
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		if !named[name] {
			t.Errorf("%s/README.md's row for %s does not name `%s`, which it holds (its row says: %s)", module, row.paths[0], name, row.what)
		}
		delete(named, name)
	}
	for name := range named {
		if strings.HasSuffix(name, "/") {
			t.Errorf("%s/README.md's row for %s names `%s`, which it does not hold", module, row.paths[0], name)
		}
	}
}

// tableUnder reads the rows of the first table after heading.
func tableUnder(heading string) func(string) []layoutRow {
	return func(readme string) []layoutRow {
		var rows []layoutRow
		in, seenTable := false, false
		sc := bufio.NewScanner(strings.NewReader(readme))
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, heading):
				in = true
			case !in:
			case strings.HasPrefix(line, "|"):
				seenTable = true
				cells := strings.Split(line, "|")
				if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
					continue
				}
				row := layoutRow{what: strings.TrimSpace(strings.Join(cells[2:len(cells)-1], "|"))}
				for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
					row.paths = append(row.paths, m[1])
				}
				for _, m := range backticked.FindAllStringSubmatch(strings.Join(cells[2:], "|"), -1) {
					if strings.HasSuffix(m[1], ".go") && !strings.Contains(m[1], "/") {
						row.goFiles = append(row.goFiles, m[1])
					}
				}
				if len(row.paths) > 0 {
					rows = append(rows, row)
				}
			case seenTable:
				return rows
			}
		}
		return rows
	}
}
