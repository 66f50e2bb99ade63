package charts_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tatara.dev/charts/internal/chartdoc"
	"tatara.dev/testkit/golden"
)

// TestChartReadmesUpToDate keeps each chart's README.md equal to what chartdoc renders from its
// Chart.yaml and the `# --` comments of its values.yaml. make generate (UPDATE_GOLDEN=1)
// rewrites them.
func TestChartReadmesUpToDate(t *testing.T) {
	for _, name := range chartNames {
		t.Run(name, func(t *testing.T) {
			got, err := chartdoc.RenderDir(chartDir(t, name), namespaceOf[name])
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(chartDir(t, name), "README.md")
			if os.Getenv("UPDATE_GOLDEN") == "1" {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("missing %s: run `make generate` and review the result", path)
			}
			if msg := staleMessage(path, string(want), string(got)); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// TestChartValuesAreDocumented: every leaf key of every values.yaml has a `# --` comment, so the
// README lists every value a user can set.
func TestChartValuesAreDocumented(t *testing.T) {
	for _, name := range chartNames {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(chartDir(t, name), "values.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			values, err := chartdoc.ParseValues(src)
			if err != nil {
				t.Fatal(err)
			}
			if len(values) == 0 {
				t.Fatal("values.yaml has no keys")
			}
			for _, key := range chartdoc.Undocumented(values) {
				t.Errorf("%s/values.yaml: %s has no `# --` comment above it (the README documents values from those)", name, key)
			}
		})
	}
}

// staleMessage is the failure of a README that differs from its render: what to run, and the
// first differing lines only.
func staleMessage(path, want, got string) string {
	if want == got {
		return ""
	}
	return fmt.Sprintf("%s is stale: review the change, then run `make generate`\n%s", path, golden.Diff(want, got))
}

func TestStaleReadmeMessage(t *testing.T) {
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "| `key%d` | string | `\"\"` | Value %d. |\n", i, i)
	}
	want := b.String()
	got := strings.Replace(want, "Value 150.", "Value one hundred and fifty.", 1)
	msg := staleMessage("charts/demo/README.md", want, got)
	for _, s := range []string{
		"charts/demo/README.md is stale", "make generate", "@@ line 151 @@",
		"  | `key149`", "- | `key150` | string | `\"\"` | Value 150. |", "+ | `key150` | string | `\"\"` | Value one hundred and fifty. |",
	} {
		if !strings.Contains(msg, s) {
			t.Errorf("message lacks %q:\n%s", s, msg)
		}
	}
	if strings.Contains(msg, "key0`") || strings.Contains(msg, "key160`") {
		t.Errorf("message shows unchanged lines far from the change:\n%s", msg)
	}
	if staleMessage("x", want, want) != "" {
		t.Error("an up-to-date README is reported stale")
	}

	// A rewrite of the whole file is cut short.
	msg = staleMessage("x", want, strings.ReplaceAll(want, "Value", "Setting"))
	if n := strings.Count(msg, "\n"); n > golden.MaxDiffLines+3 || !strings.Contains(msg, "more lines") {
		t.Errorf("diff of a rewritten file is not cut (%d lines):\n%s", n, msg)
	}
}
