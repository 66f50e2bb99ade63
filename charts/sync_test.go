package charts_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"tatara.dev/charts/internal/opsync"
	"tatara.dev/testkit/testutil"
)

// TestOperatorChartIsInSyncWithTheOperator: crds/ and the ClusterRole rules are exactly what the
// operator generates from its markers (`make generate` fixes a failure).
func TestOperatorChartIsInSyncWithTheOperator(t *testing.T) {
	if err := opsync.Check(testutil.WorkspaceDir(t)); err != nil {
		t.Fatal(err)
	}
}

// The operator's ClusterRoles, for what is cluster-scoped: create TokenReviews, for the warm pool's
// claims, and read nodes, for the lost nodes' Tasks.
const (
	tokenReviewRole   = "tatara-operator-token-review"
	nodeReadinessRole = "tatara-operator-node-readiness"
)

// clusterRoleRules are the rules each ClusterRole of the operator's grants, exactly.
var clusterRoleRules = map[string]string{
	tokenReviewRole:   `[{"apiGroups":["authentication.k8s.io"],"resources":["tokenreviews"],"verbs":["create"]}]`,
	nodeReadinessRole: `[{"apiGroups":[""],"resources":["nodes"],"verbs":["get","list","watch"]}]`,
}

// TestOperatorRolesGrantTheNarrowedRules: what the operator's markers ask for is granted by the
// chart's Roles, in the namespaces the operator uses it in (ConfigMaps in the runtime namespace,
// Leases in the release namespace, the rest in each agent namespace), and by no ClusterRole but
// the one that creates TokenReviews and the one that reads nodes.
func TestOperatorRolesGrantTheNarrowedRules(t *testing.T) {
	agentRules, narrowed, err := opsync.ClusterRules(testutil.WorkspaceDir(t))
	if err != nil {
		t.Fatal(err)
	}
	r := mustRender(t, "tatara-operator", map[string]any{
		"runtimeNamespace": "tatara-runtime",
		"agentNamespaces":  map[string]any{"tatara-agents": nil, "team-b": map[string]any{}, "team-a": map[string]any{}},
	})
	// A cluster-scoped resource (TokenReviews, nodes) is granted by its ClusterRole (clusterRoleOf).
	roleNS := map[string]string{"configmaps": "tatara-runtime", "leases": "tatara-system", "tokenreviews": "", "nodes": ""}
	clusterRoleOf := map[string]string{"tokenreviews": tokenReviewRole, "nodes": nodeReadinessRole}
	type need struct{ res, ns string }
	var needs []need
	var verbs [][]string
	for _, rule := range narrowed {
		for _, res := range rule.Resources {
			needs, verbs = append(needs, need{res, roleNS[res]}), append(verbs, rule.Verbs)
		}
	}
	for _, ns := range []string{"team-a", "team-b"} {
		for _, rule := range agentRules {
			for _, res := range rule.Resources {
				needs, verbs = append(needs, need{res, ns}), append(verbs, rule.Verbs)
			}
		}
	}
	for i, n := range needs {
		granted := map[string]bool{}
		for _, o := range r.objects {
			if n.ns == "" && (o.GetKind() != "ClusterRole" || o.GetName() != clusterRoleOf[n.res]) {
				continue
			}
			if n.ns != "" && (o.GetKind() != "Role" || o.GetNamespace() != n.ns) {
				continue
			}
			for _, pr := range nested(t, o, "rules").([]any) {
				pr := pr.(map[string]any)
				if slices.Contains(pr["resources"].([]any), any(n.res)) {
					for _, v := range pr["verbs"].([]any) {
						granted[v.(string)] = true
					}
				}
			}
		}
		for _, v := range verbs[i] {
			if !granted[v] {
				t.Errorf("the operator's markers need %s %s, which no Role in namespace %s grants", v, n.res, n.ns)
			}
		}
	}
	for _, o := range r.objects {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding":
			// The release check (a helm test pod, not the operator) may get the three CRDs; the
			// operator may create TokenReviews and read nodes, nothing else.
			if want, ok := clusterRoleRules[o.GetName()]; ok {
				if o.GetKind() == "ClusterRole" {
					if got, _ := json.Marshal(nested(t, o, "rules")); string(got) != want {
						t.Errorf("%s grants %s, want exactly %s", describe(o), got, want)
					}
				}
			} else if !strings.HasPrefix(o.GetName(), "tatara-operator-release-check-") {
				t.Errorf("the chart renders %s: the operator must get no cluster-wide RBAC", describe(o))
			} else if o.GetKind() == "ClusterRole" {
				want := `[{"apiGroups":["apiextensions.k8s.io"],"resourceNames":["projects.tatara.dev","tasks.tatara.dev","internalissues.tatara.dev"],"resources":["customresourcedefinitions"],"verbs":["get"]}]`
				if got, _ := json.Marshal(nested(t, o, "rules")); string(got) != want {
					t.Errorf("%s grants %s, want exactly %s", describe(o), got, want)
				}
			}
		case "Role", "RoleBinding":
			if ns := o.GetNamespace(); ns != "team-a" && ns != "team-b" && ns != "tatara-runtime" && ns != "tatara-system" {
				t.Errorf("%s is in namespace %s, outside the agent, runtime and release namespaces", describe(o), ns)
			}
		}
	}
	c := nested(t, r.find("Deployment", "tatara-operator"), "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	if !slices.Contains(c["args"].([]any), any("--agent-namespaces=team-a,team-b")) {
		t.Errorf("operator args %v lack --agent-namespaces=team-a,team-b (sorted, without the nulled default)", c["args"])
	}
}
