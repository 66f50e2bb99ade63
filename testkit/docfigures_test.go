package testkit_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestREADMEFiguresMatchTheDocs: the CI and e2e wall times the README states are the ones
// docs/kind.md's table measured, so a re-measured table cannot leave an old figure in the README.
func TestREADMEFiguresMatchTheDocs(t *testing.T) {
	read := func(name string) string {
		raw, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	readme, kind := read("README.md"), read(filepath.Join("docs", "kind.md"))
	for _, fig := range []struct {
		name          string
		readme, table *regexp.Regexp
	}{
		{"cold CI", regexp.MustCompile("cold\\s+`bash \\.ci/run`\\s+took\\s+(\\d+)\\s+min"), regexp.MustCompile("(?m)^\\| cold `bash .ci/run`[^|]*\\| (\\d+) min \\|")},
		{"warm e2e", regexp.MustCompile("warm\\s+`make e2e`\\s+(\\d+)\\s+min"), regexp.MustCompile("(?m)^\\| warm `make e2e`[^|]*\\| (\\d+) min \\|")},
	} {
		inREADME, inTable := fig.readme.FindStringSubmatch(readme), fig.table.FindStringSubmatch(kind)
		switch {
		case inREADME == nil:
			t.Errorf("README.md states no %s figure (%s)", fig.name, fig.readme)
		case inTable == nil:
			t.Errorf("docs/kind.md's table has no %s row (%s)", fig.name, fig.table)
		case inREADME[1] != inTable[1]:
			t.Errorf("%s: README.md says %s min, docs/kind.md's table %s min", fig.name, inREADME[1], inTable[1])
		}
	}
}
