//go:build scale || restload

package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// deleteBenchNamespaces deletes what a benchmark run left in its namespaces: envtest has no
// garbage collector, so the pods and token Secrets the Tasks own stay unless deleted, and the next
// run's operator would cache them.
func deleteBenchNamespaces(t *testing.T, namespaces []string) {
	ctx := context.Background()
	for _, ns := range namespaces {
		for _, o := range []client.Object{&tatarav1.Task{}, &corev1.Pod{}, &corev1.Secret{}, &tatarav1.Project{}} {
			if err := k8s.DeleteAllOf(ctx, o, client.InNamespace(ns)); err != nil {
				t.Errorf("failed to delete %T in %s: %v", o, ns, err)
			}
		}
		if err := k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Errorf("failed to delete namespace %s: %v", ns, err)
		}
	}
}
