package charts_test

import (
	"testing"
)

// TestOperatorRollout: a rolling update starts a new pod before it stops an old one, the old one
// keeps serving through a preStop sleep inside its grace period, and two replicas get a
// PodDisruptionBudget of one unavailable pod (one replica gets none: it would block every drain).
func TestOperatorRollout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vals    map[string]any
		wantPDB bool
	}{
		{"one replica", map[string]any{}, false},
		{"two replicas", map[string]any{"replicas": 2}, true},
		{"two replicas, budget off", map[string]any{"replicas": 2, "podDisruptionBudget": map[string]any{"enabled": false}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, "tatara-operator", tc.vals)
			d := r.find("Deployment", "")
			if d == nil {
				t.Fatalf("no Deployment in %v", r.kinds())
			}
			ru := nested(t, d, "spec", "strategy", "rollingUpdate").(map[string]any)
			if ru["maxUnavailable"] != int64(0) || ru["maxSurge"] != int64(1) {
				t.Errorf("rollingUpdate = %v, want maxUnavailable 0, maxSurge 1", ru)
			}
			spec := nested(t, d, "spec", "template", "spec").(map[string]any)
			c := spec["containers"].([]any)[0].(map[string]any)
			sleep, _ := c["lifecycle"].(map[string]any)["preStop"].(map[string]any)["sleep"].(map[string]any)["seconds"].(int64)
			grace, _ := spec["terminationGracePeriodSeconds"].(int64)
			if sleep != 5 || grace != 30 {
				t.Errorf("preStop sleep %d s, grace %d s; want 5 and 30", sleep, grace)
			}
			if got := r.find("PodDisruptionBudget", "") != nil; got != tc.wantPDB {
				t.Errorf("PodDisruptionBudget rendered: %v, want %v", got, tc.wantPDB)
			}
			if pdb := r.find("PodDisruptionBudget", ""); pdb != nil {
				if mu := nested(t, pdb, "spec", "maxUnavailable"); mu != int64(1) {
					t.Errorf("PodDisruptionBudget maxUnavailable = %v, want 1", mu)
				}
				sel := nested(t, pdb, "spec", "selector", "matchLabels").(map[string]any)
				podLabels := nested(t, d, "spec", "template", "metadata", "labels").(map[string]any)
				for k, v := range sel {
					if podLabels[k] != v {
						t.Errorf("the budget selects %s=%v, which the operator pods lack", k, v)
					}
				}
			}
		})
	}
}
