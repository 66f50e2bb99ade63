// Package golden compares test output with golden files and rewrites them on request: one
// mechanism for every golden file of the repository. `make generate` sets UPDATE_GOLDEN=1.
package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// EnvUpdate is the variable that makes Check rewrite golden files instead of comparing.
const EnvUpdate = "UPDATE_GOLDEN"

// Update reports whether golden files are being rewritten.
func Update() bool { return os.Getenv(EnvUpdate) == "1" }

// Check compares got with the file at path; with UPDATE_GOLDEN=1 it writes got there instead.
// A mismatch fails t with a line diff, not the whole output.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if Update() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("golden file %s: %v; review, then run: make generate", path, err)
		return
	}
	if string(want) != string(got) {
		t.Errorf("%s is stale; review the diff, then run: make generate\n%s", path, Diff(string(want), string(got)))
	}
}

// CheckSection is Check for the part of a file between the markers begin and end (a generated
// table inside a hand-written doc): it compares that part with want, or with UPDATE_GOLDEN=1
// rewrites only that part. Missing markers fail t.
func CheckSection(t testing.TB, path, begin, end, want string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("golden file %s: %v", path, err)
		return
	}
	doc := string(raw)
	from, to := strings.Index(doc, begin), strings.Index(doc, end)
	if from < 0 || to < from+len(begin) {
		t.Errorf("%s has no section between the markers %q and %q", path, begin, end)
		return
	}
	got := doc[from+len(begin) : to]
	if Update() {
		if err := os.WriteFile(path, []byte(doc[:from+len(begin)]+want+doc[to:]), 0o644); err != nil {
			t.Errorf("golden file %s: %v", path, err)
		}
		return
	}
	if got != want {
		t.Errorf("%s is stale between %q and %q; review the diff, then run: make generate\n%s", path, begin, end, Diff(got, want))
	}
}

// contextLines and MaxDiffLines bound what Diff prints.
const (
	contextLines = 3
	// MaxDiffLines is the most diff lines Diff prints; the rest are counted.
	MaxDiffLines = 40
)

// Diff shows where got departs from want: the lines around the first difference, with "-" for
// want and "+" for got, after the common prefix and before the common suffix.
func Diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	start := 0
	for start < len(w) && start < len(g) && w[start] == g[start] {
		start++
	}
	endW, endG := len(w), len(g)
	for endW > start && endG > start && w[endW-1] == g[endG-1] {
		endW--
		endG--
	}
	var b strings.Builder
	from := max(0, start-contextLines)
	fmt.Fprintf(&b, "@@ line %d @@\n", start+1)
	lines := 0
	emit := func(prefix, line string) {
		if lines < MaxDiffLines {
			b.WriteString(prefix + line + "\n")
		}
		lines++
	}
	for _, l := range w[from:start] {
		emit("  ", l)
	}
	for _, l := range w[start:endW] {
		emit("- ", l)
	}
	for _, l := range g[start:endG] {
		emit("+ ", l)
	}
	for _, l := range w[endW:min(len(w), endW+contextLines)] {
		emit("  ", l)
	}
	if lines > MaxDiffLines {
		fmt.Fprintf(&b, "... %d more lines\n", lines-MaxDiffLines)
	}
	return b.String()
}
