package charts_test

import (
	"slices"
	"strings"
	"testing"
)

// operatorArgs renders the operator chart with vals and returns the operator container's args.
func operatorArgs(t *testing.T, vals map[string]any) []string {
	t.Helper()
	r := mustRender(t, "tatara-operator", vals)
	dep := r.find("Deployment", "tatara-operator")
	if dep == nil {
		t.Fatalf("no Deployment tatara-operator in %v", r.kinds())
	}
	containers := nested(t, dep, "spec", "template", "spec", "containers").([]any)
	for _, c := range containers {
		c := c.(map[string]any)
		if c["name"] != "operator" {
			continue
		}
		var args []string
		for _, a := range c["args"].([]any) {
			args = append(args, a.(string))
		}
		return args
	}
	t.Fatalf("no container operator in the Deployment")
	return nil
}

// TestOperatorArgsCarryWorkersAndRateLimit: maxConcurrentReconciles and apiRateLimit become the
// operator's flags, by default the defaults of operator/cmd/main.go, and numbers stay numbers the
// flag package parses (no 1e+06).
func TestOperatorArgsCarryWorkersAndRateLimit(t *testing.T) {
	tests := []struct {
		name string
		vals map[string]any
		want []string
	}{
		{"defaults", nil, []string{"--max-concurrent-reconciles=8", "--api-rate-limit=20", "--api-rate-burst=40"}},
		{"set", map[string]any{"maxConcurrentReconciles": 8, "apiRateLimit": map[string]any{"perSecond": 0.5, "burst": 1000000}},
			[]string{"--max-concurrent-reconciles=8", "--api-rate-limit=0.5", "--api-rate-burst=1000000"}},
		{"limit off", map[string]any{"apiRateLimit": map[string]any{"perSecond": 0, "burst": 0}},
			[]string{"--api-rate-limit=0", "--api-rate-burst=0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := operatorArgs(t, tc.vals)
			for _, w := range tc.want {
				if !slices.Contains(args, w) {
					t.Errorf("args %v lack %s", args, w)
				}
			}
		})
	}
}

// TestSchemaRejectsBadWorkersAndRateLimit: values the operator would refuse at start are refused
// by values.schema.json at install instead.
func TestSchemaRejectsBadWorkersAndRateLimit(t *testing.T) {
	tests := []struct {
		name string
		vals map[string]any
		want string
	}{
		{"no workers", map[string]any{"maxConcurrentReconciles": 0}, "/maxConcurrentReconciles"},
		{"fractional workers", map[string]any{"maxConcurrentReconciles": 1.5}, "/maxConcurrentReconciles"},
		{"negative rate", map[string]any{"apiRateLimit": map[string]any{"perSecond": -1}}, "/apiRateLimit/perSecond"},
		{"fractional burst", map[string]any{"apiRateLimit": map[string]any{"burst": 2.5}}, "/apiRateLimit/burst"},
		{"typo", map[string]any{"apiRateLimit": map[string]any{"perSecnd": 5}}, "perSecnd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, "tatara-operator", tc.vals)
			if err == nil {
				t.Fatalf("the chart accepted %v", tc.vals)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
				t.Errorf("error %q does not come from values.schema.json naming %q", err, tc.want)
			}
		})
	}
}
