package cli

import (
	"os"
	"strings"
	"testing"

	"tatara.dev/cli/pkg/golden"
)

// docs/tools.md is generated from the catalog; a stale copy fails with the command that fixes it.
func TestToolReferenceUpToDate(t *testing.T) {
	const path = "../../docs/tools.md"
	golden.Check(t, path, []byte(ToolReference()))
}

// TestReadmeProfileTableUpToDate: the README's profile table is the catalog's (make update-golden
// rewrites it in place, between its markers).
func TestReadmeProfileTableUpToDate(t *testing.T) {
	const path = "../../../README.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	begin := strings.Index(readme, profileTableBegin)
	end := strings.Index(readme, profileTableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("README.md has no profile table markers %q ... %q", profileTableBegin, profileTableEnd)
	}
	got := readme[begin+len(profileTableBegin) : end]
	want := ProfileTable()
	if golden.Update() {
		if err := os.WriteFile(path, []byte(readme[:begin+len(profileTableBegin)]+want+readme[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != want {
		t.Fatalf("README.md's profile table is stale; run: make update-golden\n%s", golden.Diff(got, want))
	}
}
