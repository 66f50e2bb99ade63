package mcpserver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"tatara.dev/cli/internal/catalog"
	"tatara.dev/testkit/golden"
)

// Every tool's MCP definition is pinned by a snapshot, so a schema change is always a
// reviewed diff. make generate rewrites them.
func TestToolSnapshots(t *testing.T) {
	const dir = "testdata/toolsnaps"
	update := golden.Update()
	want := map[string]bool{}
	for _, tool := range catalog.All() {
		want[tool.Name+".snap"] = true
		got, err := json.MarshalIndent(ToMCPTool(tool), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		golden.Check(t, filepath.Join(dir, tool.Name+".snap"), got)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !want[e.Name()] {
			if update {
				_ = os.Remove(filepath.Join(dir, e.Name()))
				continue
			}
			t.Errorf("stale snapshot %s for a tool that no longer exists; run: make generate", e.Name())
		}
	}
}
