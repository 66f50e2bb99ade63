package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// TestCacheHoldsNoManagedFields: the operator's cache strips managedFields (the largest part of
// a small object, never read by the operator) from the Tasks, pods and Secrets it holds, while
// the API server keeps them.
func TestCacheHoldsNoManagedFields(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "lean", "p", tatarav1.KindImplement)
	waitPod(t, ns, task.Name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objects := map[string]struct {
		key            types.NamespacedName
		cached, server client.Object
	}{
		"Task":   {types.NamespacedName{Namespace: ns, Name: task.Name}, &tatarav1.Task{}, &tatarav1.Task{}},
		"pod":    {types.NamespacedName{Namespace: ns, Name: agent.PodName(task.Name)}, &corev1.Pod{}, &corev1.Pod{}},
		"Secret": {types.NamespacedName{Namespace: ns, Name: agent.SecretName(task.Name)}, &corev1.Secret{}, &corev1.Secret{}},
	}
	for kind, o := range objects {
		if err := op.GetCache().Get(ctx, o.key, o.cached); err != nil {
			t.Fatalf("%s %s from the operator's cache: %v", kind, o.key, err)
		}
		if err := k8s.Get(ctx, o.key, o.server); err != nil {
			t.Fatal(err)
		}
		if n := len(o.server.GetManagedFields()); n == 0 {
			t.Fatalf("%s %s has no managedFields on the API server either: the check proves nothing", kind, o.key)
		}
		if n := len(o.cached.GetManagedFields()); n != 0 {
			t.Errorf("%s %s holds %d managedFields entries in the operator's cache, want none", kind, o.key, n)
		}
	}
}
