package cli

import (
	"os"
	"testing"
)

// docs/tools.md is generated from the catalog; a stale copy fails with the command that fixes it.
func TestToolReferenceUpToDate(t *testing.T) {
	const path = "../../docs/tools.md"
	want := ToolReference()
	if os.Getenv("UPDATE_DOCS") == "1" {
		if err := os.MkdirAll("../../docs", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("cli/docs/tools.md is missing or stale (%v); run: make docs", err)
	}
}
