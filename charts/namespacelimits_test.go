package charts_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestNamespaceLimitsFollowTheirSwitch: the LimitRange and ResourceQuota are on by default, carry
// the values, and one switch turns both off.
func TestNamespaceLimitsFollowTheirSwitch(t *testing.T) {
	r := mustRender(t, "tatara-project", map[string]any{"name": "alpha",
		"namespaceLimits": map[string]any{"quota": map[string]any{"pods": "7", "requests.memory": nil}}})
	lr, quota := r.find("LimitRange", "alpha-limits"), r.find("ResourceQuota", "alpha-quota")
	if lr == nil || quota == nil {
		t.Fatalf("want LimitRange alpha-limits and ResourceQuota alpha-quota, got %v", r.kinds())
	}
	wantHard := map[string]any{"pods": "7", "requests.cpu": "32", "limits.memory": "512Gi"}
	if got := nested(t, quota, "spec", "hard"); !reflect.DeepEqual(got, wantHard) {
		t.Errorf("quota hard %v, want %v (pods overridden, requests.memory dropped)", got, wantHard)
	}
	limits := nested(t, lr, "spec", "limits").([]any)
	if len(limits) != 1 || limits[0].(map[string]any)["type"] != "Container" {
		t.Fatalf("LimitRange limits %v, want one Container entry", limits)
	}
	off := mustRender(t, "tatara-project", map[string]any{"namespaceLimits": map[string]any{"enabled": false}})
	for _, kind := range []string{"LimitRange", "ResourceQuota"} {
		if o := off.find(kind, ""); o != nil {
			t.Errorf("namespaceLimits.enabled=false still renders %s %s", kind, o.GetName())
		}
	}
}

// TestLimitRangeBoundsContainers applies the chart's LimitRange to a namespace of a real API
// server: a container without resources gets the defaults, and one that asks more than the
// maximum is refused, by the API server's own LimitRanger admission.
func TestLimitRangeBoundsContainers(t *testing.T) {
	c := apiServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "limits-test"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	lr := mustRender(t, "tatara-project", nil).find("LimitRange", "")
	if lr == nil {
		t.Fatal("the default render has no LimitRange")
	}
	lr.SetNamespace(ns.Name)
	if err := c.Create(ctx, lr); err != nil {
		t.Fatalf("failed to create the chart's LimitRange: %v", err)
	}

	pod := func(name string, res corev1.ResourceRequirements) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/x:1", Resources: res}}}}
	}
	bare := pod("bare", corev1.ResourceRequirements{})
	if err := c.Create(ctx, bare, client.DryRunAll); err != nil {
		t.Fatalf("a pod without resources was refused: %v", err)
	}
	got := bare.Spec.Containers[0].Resources
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	for _, l := range []struct {
		name      string
		got, want corev1.ResourceList
	}{{"requests", got.Requests, want.Requests}, {"limits", got.Limits, want.Limits}} {
		if len(l.got) != len(l.want) {
			t.Errorf("defaulted %s %v, want %v", l.name, l.got, l.want)
		}
		for k, q := range l.want {
			if g, ok := l.got[k]; !ok || g.Cmp(q) != 0 {
				t.Errorf("defaulted %s[%s] = %v, want %v", l.name, k, l.got[k], q.String())
			}
		}
	}

	greedy := pod("greedy", corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Gi")}})
	err := c.Create(ctx, greedy, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "maximum memory usage per Container is 32Gi") {
		t.Errorf("a container asking 64Gi of memory: %v, want refused with the LimitRange's maximum 32Gi", err)
	}
}
