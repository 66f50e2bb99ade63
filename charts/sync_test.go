package charts_test

import (
	"slices"
	"testing"

	"tatara.dev/charts/internal/opsync"
)

// TestOperatorChartIsInSyncWithTheOperator: crds/ and the ClusterRole rules are exactly what the
// operator generates from its markers (`make sync-crds` fixes a failure).
func TestOperatorChartIsInSyncWithTheOperator(t *testing.T) {
	if err := opsync.Check(repoRoot(t)); err != nil {
		t.Fatal(err)
	}
}

// TestOperatorRolesGrantTheNarrowedRules: what the chart moved out of the ClusterRole is granted
// by its namespaced Roles, in the namespaces the operator uses them in.
func TestOperatorRolesGrantTheNarrowedRules(t *testing.T) {
	_, narrowed, err := opsync.ClusterRules(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	r := mustRender(t, "tatara-operator", map[string]any{"runtimeNamespace": "tatara-runtime"})
	roleNS := map[string]string{"configmaps": "tatara-runtime", "leases": "tatara-system"}
	for _, rule := range narrowed {
		for _, res := range rule.Resources {
			granted := map[string]bool{}
			for _, o := range r.objects {
				if o.GetKind() != "Role" || o.GetNamespace() != roleNS[res] {
					continue
				}
				for _, pr := range nested(t, o, "rules").([]any) {
					pr := pr.(map[string]any)
					if slices.Contains(pr["resources"].([]any), any(res)) {
						for _, v := range pr["verbs"].([]any) {
							granted[v.(string)] = true
						}
					}
				}
			}
			for _, v := range rule.Verbs {
				if !granted[v] {
					t.Errorf("the operator's markers need %s %s, which no Role in namespace %s grants", v, res, roleNS[res])
				}
			}
		}
	}
	for _, o := range r.objects {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		for _, pr := range nested(t, o, "rules").([]any) {
			for _, res := range pr.(map[string]any)["resources"].([]any) {
				if res == "configmaps" || res == "leases" {
					t.Errorf("ClusterRole grants %s cluster-wide", res)
				}
			}
		}
	}
}
