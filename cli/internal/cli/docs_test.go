package cli

import (
	"os"
	"path/filepath"
	"testing"

	"tatara.dev/cli/internal/catalog"
	"tatara.dev/testkit/golden"
)

// docs/tools.md is generated from the catalog; a stale copy fails with the command that fixes it.
func TestToolReferenceUpToDate(t *testing.T) {
	const path = "../../docs/tools.md"
	golden.Check(t, path, []byte(ToolReference()))
}

// TestReadmeProfileTableUpToDate: the README's profile table is the catalog's (make generate
// rewrites it in place, between its markers).
func TestReadmeProfileTableUpToDate(t *testing.T) {
	golden.CheckSection(t, "../../../README.md", profileTableBegin, profileTableEnd, ProfileTable())
}

// TestDocCountsUpToDate: every count the docs state between count markers is the catalog's (make
// update-golden rewrites them), and every marker names a count the catalog has.
func TestDocCountsUpToDate(t *testing.T) {
	docs, err := filepath.Glob("../../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../../../README.md", "../../../operator/README.md", "../../../wrapper/README.md")
	markers := 0
	for _, path := range docs {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		markers += len(countMarker.FindAllString(string(raw), -1))
		want, unknown := UpdateCounts(string(raw))
		if len(unknown) > 0 {
			t.Errorf("%s: count markers with unknown keys %q (want tools, group:<group> or profile:<profile>)", path, unknown)
		}
		if want == string(raw) {
			continue
		}
		if golden.Update() {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s states counts the catalog no longer has; run: make generate\n%s", path, golden.Diff(string(raw), want))
	}
	if markers == 0 {
		t.Fatal("no count marker in the docs: the check checks nothing")
	}
}

func TestCatalogCountKeys(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{"tools", true}, {"group:operator", true}, {"profile:implement", true},
		{"tools:x", false}, {"group:nope", false}, {"profile:nope", false}, {"profile:", false}, {"nope", false},
	} {
		if _, ok := CatalogCount(tc.key); ok != tc.want {
			t.Errorf("CatalogCount(%q) known = %t, want %t", tc.key, ok, tc.want)
		}
	}
	if n, _ := CatalogCount("tools"); n != len(catalog.All()) {
		t.Errorf("tools = %d", n)
	}
}
