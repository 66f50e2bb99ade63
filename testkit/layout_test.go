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

// TestModuleLayoutsNameEveryPackage: a module README's layout names every Go package of the
// module, and everything it names exists, so the layout cannot drift from the code.
func TestModuleLayoutsNameEveryPackage(t *testing.T) {
	for _, tc := range []struct {
		module string
		layout func(readme string) []string
	}{
		{"operator", tableUnder("## Layout")},
		{"wrapper", firstCodeBlock},
		{"testkit", tableUnder("# testkit")},
	} {
		t.Run(tc.module, func(t *testing.T) {
			dir := filepath.Join("..", tc.module)
			readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
			if err != nil {
				t.Fatal(err)
			}
			entries := tc.layout(string(readme))
			if len(entries) == 0 {
				t.Fatalf("%s/README.md: no layout found", tc.module)
			}
			for _, e := range entries {
				if _, err := os.Stat(filepath.Join(dir, e)); err != nil {
					t.Errorf("%s/README.md names %q, which does not exist", tc.module, e)
				}
			}
			for _, pkg := range packageDirs(t, dir) {
				named := slices.ContainsFunc(entries, func(e string) bool { return e == pkg || filepath.Dir(e) == pkg && strings.HasSuffix(e, ".go") })
				if !named && pkg != "." {
					t.Errorf("%s/README.md's layout does not name package %s", tc.module, pkg)
				}
			}
		})
	}
}

// packageDirs lists the module's Go package directories, relative to it.
func packageDirs(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", "./...")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, d := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(abs, d)
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, rel)
	}
	return pkgs
}

var backticked = regexp.MustCompile("`([^`]+)`")

// tableUnder reads the first cell of each row of the first table after heading: its backticked
// paths.
func tableUnder(heading string) func(string) []string {
	return func(readme string) []string {
		var entries []string
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
				if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
					continue
				}
				for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
					entries = append(entries, m[1])
				}
			case seenTable:
				return entries
			}
		}
		return entries
	}
}

// firstCodeBlock reads the first word of each line of the README's first fenced block.
func firstCodeBlock(readme string) []string {
	var entries []string
	in := false
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "```") {
			if in {
				return entries
			}
			in = true
			continue
		}
		if f := strings.Fields(line); in && len(f) > 0 {
			entries = append(entries, f[0])
		}
	}
	return entries
}
