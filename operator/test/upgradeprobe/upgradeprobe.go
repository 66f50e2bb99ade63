// Package upgradeprobe is the CRD change that the e2e suite's upgrade release carries: one
// optional field in the Task spec, and one Task kind that no operator build has a profile for.
// The suite applies it to a copy of the operator chart's CRDs, and the operator built with the
// tag e2eupgrade (make upgrade-image) applies it to its embedded CRDs, so the upgrade's chart and
// image agree the way a real release's do. Nothing else links it.
package upgradeprobe

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

const (
	// CRD is the CRD the change applies to.
	CRD = "tasks.tatara.dev"
	// Field is the optional spec field the upgrade adds.
	Field = "upgradeProbe"
	// Kind is the Task kind the upgrade's CRD admits and no operator runs: after a rollback, the
	// older operator meets it and must refuse it.
	Kind = "upgradeProbe"
)

// Apply adds Field and Kind to every version of the Tasks CRD; other CRDs are left alone. It
// fails when the CRD lacks the schema it extends, or already has the change.
func Apply(crd *apiextensionsv1.CustomResourceDefinition) error {
	if crd.Name != CRD {
		return nil
	}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return fmt.Errorf("%s %s has no schema", CRD, v.Name)
		}
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return fmt.Errorf("%s %s has no spec in its schema", CRD, v.Name)
		}
		if _, ok := spec.Properties[Field]; ok {
			return fmt.Errorf("%s %s already has spec.%s", CRD, v.Name, Field)
		}
		kind, ok := spec.Properties["kind"]
		if !ok || len(kind.Enum) == 0 {
			return fmt.Errorf("%s %s has no spec.kind enum", CRD, v.Name)
		}
		spec.Properties[Field] = apiextensionsv1.JSONSchemaProps{
			Type:        "string",
			MaxLength:   ptr(int64(64)),
			Description: "Test-only: the e2e suite's upgrade release adds this field, and checks that objects keep it.",
		}
		kind.Enum = append(kind.Enum, apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", Kind))})
		spec.Properties["kind"] = kind
		v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
