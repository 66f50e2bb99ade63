package charts_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yamlv3 "gopkg.in/yaml.v3"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/downloader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"tatara.dev/charts/internal/pins"
	"tatara.dev/testkit/testutil"
)

// chartNames are the charts this module checks, in rollout order.
var chartNames = []string{"tatara-cli", "tatara-wrapper", "tatara-operator", "tatara-project"}

// namespaceOf is where helmfile installs each chart.
var namespaceOf = map[string]string{
	"tatara-cli":      "tatara-system",
	"tatara-wrapper":  "tatara-system",
	"tatara-operator": "tatara-system",
	"tatara-project":  "tatara-agents",
}

// monitoringCharts have the monitoring switch.
var monitoringCharts = []string{"tatara-cli", "tatara-wrapper", "tatara-operator"}

func chartDir(t testing.TB, name string) string {
	return filepath.Join(testutil.WorkspaceDir(t), "charts", name)
}

// buildDependencies does what `helm dependency build` (and helmfile before a sync) does for every
// chart: it packs the tatara-common library chart, at the version its Chart.lock pins, into the
// chart's charts/ directory (git ignores it). A Chart.lock out of step with Chart.yaml, or a
// library whose version no longer matches the pin, fails here with helm's own message.
func buildDependencies(root string) error {
	// No repository file: the only dependency is a file:// one, which needs no repository (and the
	// user's helm configuration stays out of the tests).
	repos := filepath.Join(os.TempDir(), "tatara-charts-test-no-repositories.yaml")
	for _, name := range chartNames {
		dir := filepath.Join(root, "charts", name)
		m := &downloader.Manager{Out: io.Discard, ChartPath: dir, SkipUpdate: true, RepositoryConfig: repos, RepositoryCache: os.TempDir()}
		if err := m.Build(); err != nil {
			return fmt.Errorf("helm dependency build %s: %w", dir, err)
		}
	}
	return nil
}

// rendered is one chart render: its objects (CRDs included), its hooks (the Helm test pod) and
// NOTES.txt.
type rendered struct {
	objects []*unstructured.Unstructured
	crds    []*unstructured.Unstructured
	hooks   []*unstructured.Unstructured
	notes   string
}

// render renders a chart as `helm template` does (client only), schema validation included.
func render(t testing.TB, name string, vals map[string]any) (*rendered, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir(t, name))
	if err != nil {
		t.Fatalf("failed to load chart %q: %v", name, err)
	}
	cfg := &action.Configuration{Log: func(format string, args ...any) { t.Logf(format, args...) }}
	inst := action.NewInstall(cfg)
	inst.DryRun = true
	inst.ClientOnly = true
	inst.Replace = true
	inst.ReleaseName = name
	inst.Namespace = namespaceOf[name]
	inst.IncludeCRDs = false
	kv, err := chartutil.ParseKubeVersion("v1.34.4")
	if err != nil {
		t.Fatal(err)
	}
	inst.KubeVersion = kv
	if vals == nil {
		vals = map[string]any{}
	}
	rel, err := inst.Run(chrt, vals)
	if err != nil {
		return nil, err
	}
	out := &rendered{notes: rel.Info.Notes}
	out.objects = decodeObjects(t, rel.Manifest)
	for _, h := range rel.Hooks {
		out.hooks = append(out.hooks, decodeObjects(t, h.Manifest)...)
	}
	for _, f := range chrt.CRDObjects() {
		out.crds = append(out.crds, decodeObjects(t, string(f.File.Data))...)
	}
	return out, nil
}

func mustRender(t testing.TB, name string, vals map[string]any) *rendered {
	t.Helper()
	r, err := render(t, name, vals)
	if err != nil {
		t.Fatalf("failed to render chart %q with %v: %v", name, vals, err)
	}
	return r
}

// decodeObjects splits a multi-document manifest into objects, skipping empty documents. A
// mapping key given twice fails the test: the apimachinery decoder keeps the last silently, and
// which one the cluster keeps depends on the client.
func decodeObjects(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	for strict := yamlv3.NewDecoder(strings.NewReader(manifest)); ; {
		var doc any // a Node would not check the keys
		if err := strict.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("rendered manifest is not valid YAML: %v\n%s", err, manifest)
		}
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(manifest), 4096)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("failed to decode rendered manifest: %v\n%s", err, manifest)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		// Unstructured's own JSON decoding keeps integers as int64, as the API machinery does.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatalf("failed to decode rendered object: %v\n%s", err, raw)
		}
		objs = append(objs, u)
	}
}

func (r *rendered) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.objects {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

func (r *rendered) kinds() []string {
	var ks []string
	for _, o := range r.objects {
		ks = append(ks, o.GetKind()+"/"+o.GetName())
	}
	return ks
}

// monitoringOn is the values of the monitoring switch.
func monitoringOn() map[string]any {
	return map[string]any{"monitoring": map[string]any{"enabled": true}}
}

// loadPins reads the repository's pins.
func loadPins(t testing.TB) *pins.State {
	t.Helper()
	st, err := pins.Load(testutil.WorkspaceDir(t))
	if err != nil {
		t.Fatalf("failed to load pins: %v", err)
	}
	return st
}

func componentVersion(t testing.TB, st *pins.State, name string) string {
	t.Helper()
	c, err := pins.ComponentByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Version(c)
}

// requireTool returns the path of a pinned tool the Makefile passes in env, failing (never
// skipping) when it is missing: `make test` installs it.
func requireTool(t testing.TB, env, target string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Fatalf("%s is not set: run the chart tests through `make test` (it installs the pinned tool with `make %s`)", env, target)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s=%q: %v", env, p, err)
	}
	return p
}

func nested(t testing.TB, o *unstructured.Unstructured, fields ...string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(o.Object, fields...)
	if err != nil || !found {
		t.Fatalf("%s/%s has no %s (err %v)", o.GetKind(), o.GetName(), strings.Join(fields, "."), err)
	}
	return v
}

func describe(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}
