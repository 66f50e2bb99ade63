package releasecheck

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
)

// crdDiff names the field where the cluster's CRD and this build's part: the failure a pipeline
// meets when Helm left an older CRD in place (a field added to the Project since), and the
// reverse after a rollback.
func TestCRDDiffNamesTheField(t *testing.T) {
	built, err := BuiltCRDs()
	if err != nil {
		t.Fatal(err)
	}
	var project apiextensionsv1.CustomResourceDefinition
	for _, c := range built {
		if c.Name == "projects.tatara.dev" {
			project = c
		}
	}
	if project.Name == "" {
		t.Fatalf("no projects.tatara.dev among the built CRDs %d", len(built))
	}
	agentProps := func(c *apiextensionsv1.CustomResourceDefinition) map[string]apiextensionsv1.JSONSchemaProps {
		return c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["agent"].Properties
	}
	const base = "spec.versions[v1alpha1].schema.openAPIV3Schema.properties.spec.properties.agent.properties."
	for _, tt := range []struct {
		name   string
		change func(cluster *apiextensionsv1.CustomResourceDefinition)
		want   string
	}{
		{"the same", func(*apiextensionsv1.CustomResourceDefinition) {}, ""},
		{"a field the cluster lacks (Helm never upgraded crds/)", func(c *apiextensionsv1.CustomResourceDefinition) {
			delete(agentProps(c), "toolSearch")
		}, base + "toolSearch: in this operator's CRD, not in the cluster's"},
		{"a field only the cluster has (a newer CRD after a rollback)", func(c *apiextensionsv1.CustomResourceDefinition) {
			agentProps(c)["futureField"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}, base + "futureField: in the cluster's CRD, not in this operator's"},
		{"an enum value the cluster lacks", func(c *apiextensionsv1.CustomResourceDefinition) {
			p := agentProps(c)["toolSearch"]
			p.Enum = p.Enum[:1]
			agentProps(c)["toolSearch"] = p
		}, base + "toolSearch.enum: this operator's CRD has"},
		{"another version", func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Name = "v1beta1"
		}, "versions: the build has [v1alpha1], the cluster [v1beta1]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cluster := project.DeepCopy()
			tt.change(cluster)
			got := crdDiff(project, *cluster)
			if tt.want == "" && got != "" || tt.want != "" && !strings.HasPrefix(got, tt.want) {
				t.Fatalf("crdDiff = %q, want %q", got, tt.want)
			}
		})
	}
}

// Nothing to compare is a failure, not a pass: a check wired without its client or the build's
// CRDs must not report the cluster's CRDs as equal.
func TestCRDsMatchRefusesNothingToCompare(t *testing.T) {
	built, err := BuiltCRDs()
	if err != nil || len(built) != 3 {
		t.Fatalf("BuiltCRDs = %d CRDs, %v; want the Project, Task and InternalIssue CRDs", len(built), err)
	}
	if err := crdsMatch(context.Background(), nil, built); err == nil {
		t.Error("crdsMatch without a client = nil")
	}
	if err := crdsMatch(context.Background(), apiextensionsfake.NewClientset(), nil); err == nil {
		t.Error("crdsMatch without CRDs to compare = nil")
	}
}
