package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// TestCacheHoldsNoManagedFields: the operator's cache strips managedFields (the largest part of
// a small object, never read by the operator) from the Tasks, pods and Secrets it holds, while
// the API server keeps them; and of a pod's spec it keeps only what the operator reads.
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
		// The cache follows the API server by a watch: what the server already has may not be in it yet.
		eventually(t, 10*time.Second, fmt.Sprintf("%s %s in the operator's cache", kind, o.key), func() error {
			return op.GetCache().Get(ctx, o.key, o.cached)
		})
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

	// The cached pod keeps what the operator reads of its spec, and not the rest.
	cached, server := objects["pod"].cached.(*corev1.Pod), objects["pod"].server.(*corev1.Pod)
	names := func(cs []corev1.Container) (out []string) {
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	if got, want := names(cached.Spec.InitContainers), names(server.Spec.InitContainers); !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("cached pod's init containers %v, want %v", got, want)
	}
	for i, c := range cached.Spec.InitContainers {
		if !equality.Semantic.DeepEqual(c.RestartPolicy, server.Spec.InitContainers[i].RestartPolicy) {
			t.Errorf("cached init container %s has restartPolicy %v, the pod %v", c.Name, c.RestartPolicy, server.Spec.InitContainers[i].RestartPolicy)
		}
		if len(c.Env) != 0 || len(c.VolumeMounts) != 0 || c.Image != "" {
			t.Errorf("cached init container %s keeps env, mounts or image: %+v", c.Name, c)
		}
	}
	if got, want := names(cached.Spec.Containers), names(server.Spec.Containers); !slices.Equal(got, want) {
		t.Errorf("cached pod's containers %v, want %v", got, want)
	}
	if !equality.Semantic.DeepEqual(cached.Spec.ActiveDeadlineSeconds, server.Spec.ActiveDeadlineSeconds) || cached.Spec.ActiveDeadlineSeconds == nil {
		t.Errorf("cached pod's activeDeadlineSeconds %v, the pod's %v", cached.Spec.ActiveDeadlineSeconds, server.Spec.ActiveDeadlineSeconds)
	}
	if len(cached.Spec.Volumes) != 0 || len(server.Spec.Volumes) == 0 {
		t.Errorf("cached pod holds %d volumes (the pod %d), want none", len(cached.Spec.Volumes), len(server.Spec.Volumes))
	}
	if !equality.Semantic.DeepEqual(cached.Labels, server.Labels) || !equality.Semantic.DeepEqual(cached.OwnerReferences, server.OwnerReferences) {
		t.Errorf("cached pod's labels or owners differ from the pod's")
	}
}
