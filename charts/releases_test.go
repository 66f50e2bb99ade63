package charts_test

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"tatara.dev/charts/internal/chartrelease"
	"tatara.dev/testkit/testutil"
)

// TestChartVersionsMoveWithTheirContent: a chart whose files differ from its recorded release
// must get a new, greater version (chart-testing's --check-version-increment). With
// UPDATE_GOLDEN=1 the current version of each chart is recorded, unless it already is.
func TestChartVersionsMoveWithTheirContent(t *testing.T) {
	root := testutil.WorkspaceDir(t)
	record, err := chartrelease.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	update := os.Getenv("UPDATE_GOLDEN") == "1"
	changed := false
	// Every chart of the directory, so a new chart is checked without being listed anywhere.
	charts, err := filepath.Glob(filepath.Join(root, "charts", "*", "Chart.yaml"))
	if err != nil || len(charts) == 0 {
		t.Fatalf("no charts under %s/charts (%v)", root, err)
	}
	for _, chartYAML := range charts {
		dir := filepath.Dir(chartYAML)
		name := filepath.Base(dir)
		var meta struct {
			Version string `json:"version"`
		}
		b, err := os.ReadFile(chartYAML)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		digest, err := chartrelease.Digest(dir)
		if err != nil {
			t.Fatal(err)
		}
		p := record.Check(name, meta.Version, digest)
		switch {
		case p == nil:
		case p.Recordable && update:
			if record[name] == nil {
				record[name] = map[string]string{}
			}
			record[name][meta.Version] = digest
			changed = true
		default:
			t.Error(p)
		}
	}
	if changed {
		if err := record.Save(root); err != nil {
			t.Fatal(err)
		}
	}
}
