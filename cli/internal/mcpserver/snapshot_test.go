package mcpserver

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"tatara.dev/cli/internal/catalog"
)

// Every tool's MCP definition is pinned by a snapshot, so a schema change is always a
// reviewed diff. UPDATE_TOOLSNAPS=1 rewrites them.
func TestToolSnapshots(t *testing.T) {
	const dir = "testdata/toolsnaps"
	update := os.Getenv("UPDATE_TOOLSNAPS") == "1"
	want := map[string]bool{}
	for _, tool := range catalog.All() {
		want[tool.Name+".snap"] = true
		got, err := json.MarshalIndent(ToMCPTool(tool), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join(dir, tool.Name+".snap")
		if update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: no snapshot (%v); run: make -C .. update-snapshots (UPDATE_TOOLSNAPS=1 go test ./internal/mcpserver/)", tool.Name, err)
			continue
		}
		if !bytes.Equal(old, got) {
			t.Errorf("%s: schema differs from %s; review the change, then run: UPDATE_TOOLSNAPS=1 go test ./internal/mcpserver/\ngot:\n%s", tool.Name, path, got)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !want[e.Name()] {
			if update {
				_ = os.Remove(filepath.Join(dir, e.Name()))
				continue
			}
			t.Errorf("stale snapshot %s for a tool that no longer exists; run: UPDATE_TOOLSNAPS=1 go test ./internal/mcpserver/", e.Name())
		}
	}
}
