package upgradeprobe

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"tatara.dev/operator/config/crd/bases"
)

func builtCRD(t *testing.T, file string) apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := fs.ReadFile(bases.FS, file)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestApply: the Tasks CRD gains the field and the kind in every version, the Projects CRD is
// untouched, and a second application is refused instead of adding the kind twice.
func TestApply(t *testing.T) {
	tasks := builtCRD(t, "tatara.dev_tasks.yaml")
	if err := Apply(&tasks); err != nil {
		t.Fatal(err)
	}
	for _, v := range tasks.Spec.Versions {
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if spec.Properties[Field].Type != "string" {
			t.Errorf("%s: spec.%s = %+v, want an optional string", v.Name, Field, spec.Properties[Field])
		}
		if slices.Contains(spec.Required, Field) {
			t.Errorf("%s: spec.%s is required; the upgrade's field must be optional", v.Name, Field)
		}
		var kinds []string
		for _, e := range spec.Properties["kind"].Enum {
			kinds = append(kinds, string(e.Raw))
		}
		if !slices.Contains(kinds, `"`+Kind+`"`) {
			t.Errorf("%s: spec.kind enum %v lacks %q", v.Name, kinds, Kind)
		}
	}
	if err := Apply(&tasks); err == nil || !strings.Contains(err.Error(), "already has") {
		t.Errorf("a second Apply = %v, want a refusal", err)
	}

	projects := builtCRD(t, "tatara.dev_projects.yaml")
	before := projects.DeepCopy()
	if err := Apply(&projects); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(before, &projects) {
		t.Error("Apply changed the Projects CRD")
	}
}
