package charts_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestOperatorChartRendersItsCRDs: the CRDs are release objects (so an upgrade applies them), kept
// on uninstall, with exactly the spec the operator generated (files/crds, which
// TestOperatorChartIsInSyncWithTheOperator ties to operator/config/crd/bases). Helm's crds/ folder,
// which Helm never upgrades, is not used.
func TestOperatorChartRendersItsCRDs(t *testing.T) {
	if _, err := os.Stat(filepath.Join(chartDir(t, "tatara-operator"), "crds")); !os.IsNotExist(err) {
		t.Fatalf("charts/tatara-operator/crds exists (%v): Helm would install it once and never upgrade it", err)
	}
	files, err := filepath.Glob(filepath.Join(chartDir(t, "tatara-operator"), "files", "crds", "*.yaml"))
	if err != nil || len(files) != 3 {
		t.Fatalf("files/crds holds %v (%v), want the Project, Task and InternalIssue CRDs", files, err)
	}
	for _, tc := range []struct {
		name     string
		vals     map[string]any
		wantCRDs int
		wantKeep bool
	}{
		{"defaults", nil, 3, true},
		{"not kept", map[string]any{"crds": map[string]any{"keep": false}}, 3, false},
		{"installed elsewhere", map[string]any{"crds": map[string]any{"enabled": false}}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, "tatara-operator", tc.vals)
			got := 0
			for _, o := range r.objects {
				if o.GetKind() != "CustomResourceDefinition" {
					continue
				}
				got++
				if keep := o.GetAnnotations()["helm.sh/resource-policy"] == "keep"; keep != tc.wantKeep {
					t.Errorf("%s keep annotation %v, want %v", o.GetName(), keep, tc.wantKeep)
				}
				if o.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
					t.Errorf("%s labels %v lack the chart's", o.GetName(), o.GetLabels())
				}
				raw, err := os.ReadFile(filepath.Join(chartDir(t, "tatara-operator"), "files", "crds", "tatara.dev_"+o.GetName()[:len(o.GetName())-len(".tatara.dev")]+".yaml"))
				if err != nil {
					t.Fatal(err)
				}
				var want map[string]any
				if err := yaml.Unmarshal(raw, &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(asJSON(t, o.Object["spec"]), asJSON(t, want["spec"])) {
					t.Errorf("%s: the rendered spec differs from files/crds", o.GetName())
				}
			}
			if got != tc.wantCRDs || len(r.crds) != 0 {
				t.Errorf("%d CRDs rendered as objects and %d from crds/, want %d and 0", got, len(r.crds), tc.wantCRDs)
			}
		})
	}
}
