// Package v1alpha1 contains the Tatara API types (Project and Task) of group tatara.dev.
// It depends only on k8s.io/api and k8s.io/apimachinery, so other modules can import it cheaply.
// +kubebuilder:object:generate=true
// +groupName=tatara.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "tatara.dev", Version: "v1alpha1"}

	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Project{}, &ProjectList{}, &Task{}, &TaskList{}, &InternalIssue{}, &InternalIssueList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
