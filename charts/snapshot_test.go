package charts_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"tatara.dev/testkit/testutil"
)

// manifest renders a chart to the text `helm template` prints.
func manifest(t *testing.T, name string, vals map[string]any) string {
	t.Helper()
	chrt, err := loader.Load(chartDir(t, name))
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(&action.Configuration{Log: t.Logf})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = name, namespaceOf[name]
	inst.KubeVersion, _ = chartutil.ParseKubeVersion("v1.34.4")
	if vals == nil {
		vals = map[string]any{}
	}
	rel, err := inst.Run(chrt, vals)
	if err != nil {
		t.Fatal(err)
	}
	// Hooks (the Helm test pod) follow, as `helm template` prints them.
	var b strings.Builder
	b.WriteString(rel.Manifest)
	for _, h := range rel.Hooks {
		b.WriteString("---\n# Source: " + h.Path + "\n" + h.Manifest + "\n")
	}
	// The chart version moves with every bump; the snapshot pins the shape, not the version.
	return strings.ReplaceAll(b.String(), chrt.Metadata.Version, "VERSION")
}

// TestDefaultRenderSnapshots keeps each chart's default render (and the monitoring render) in
// testdata/snapshots, so a template change shows up as a reviewable diff.
// make generate (UPDATE_GOLDEN=1) rewrites them.
func TestDefaultRenderSnapshots(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			got := manifest(t, tc.chart, tc.vals)
			path := filepath.Join(testutil.WorkspaceDir(t), "charts", "testdata", "snapshots", strings.ReplaceAll(tc.name, "/", "_")+".yaml")
			if os.Getenv("UPDATE_GOLDEN") == "1" {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("missing snapshot %s: run `make generate` and review the result", path)
			}
			if string(want) != got {
				t.Fatalf("render of %s differs from %s: review the change, then run `make generate`\n%s", tc.name, path, firstDiff(string(want), got))
			}
		})
	}
}

// firstDiff shows the first differing line with a little context.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n- " + wl + "\n+ " + gl
		}
	}
	return ""
}

// TestRendersAreDeterministic: every chart renders the same manifest twice, a second apart, so
// a sync followed by a diff shows no change (no random or time-dependent value, no lookup).
func TestRendersAreDeterministic(t *testing.T) {
	first := map[string]string{}
	for _, tc := range renderCases() {
		first[tc.name] = manifest(t, tc.chart, tc.vals)
	}
	time.Sleep(1100 * time.Millisecond) // a template using `now` renders another second
	for _, tc := range renderCases() {
		if manifest(t, tc.chart, tc.vals) != first[tc.name] {
			t.Errorf("%s: two renders differ; a template uses a random or time-dependent value", tc.name)
		}
	}
}
