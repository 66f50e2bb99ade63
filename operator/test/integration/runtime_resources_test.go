package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"tatara.dev/cli/pkg/agentpod"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/controller"
)

// TestRuntimeConfigMapsSetContainerResources: the resources in the runtime ConfigMaps reach the
// agent pod's containers, and a malformed value is a
// RuntimeConfigInvalid condition naming the key, with no pod, until it is fixed.
func TestRuntimeConfigMapsSetContainerResources(t *testing.T) {
	ctx := context.Background()
	runtimeNS := "runtime-" + rand.String(6)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: runtimeNS}}); err != nil {
		t.Fatal(err)
	}
	cli := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: controller.CLIRuntimeConfigMap, Namespace: runtimeNS},
		Data: map[string]string{controller.ImageKey: cliImage, controller.CLIResourcesKey: `{"requests":{"cpu":"25m","memory":"40Mi"},"limits":{"memory":"300Mi"}}`}}
	wrapper := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: controller.WrapperRuntimeConfigMap, Namespace: runtimeNS},
		Data: map[string]string{controller.ImageKey: wrapperImage, agentpod.FeaturesKey: runtimeFeatures[controller.WrapperRuntimeConfigMap],
			controller.AgentResourcesKey: `{"requests":{"cpu":"1"`}}
	for _, cm := range []*corev1.ConfigMap{cli, wrapper} {
		if err := k8s.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	startOperator(t, withRuntimeNamespace(runtimeNS))
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "sized", "p", tatarav1.KindImplement)

	got := waitReason(t, ns, task.Name, tatarav1.ReasonRuntimeConfigInvalid)
	if c := readyCondition(got); !strings.Contains(c.Message, controller.AgentResourcesKey) || !strings.Contains(c.Message, controller.WrapperRuntimeConfigMap) {
		t.Fatalf("condition %+v should name the ConfigMap and its malformed key", c)
	}
	if n := len(agentPods(t, ns, task.Name)); n != 0 {
		t.Fatalf("%d pods built from a malformed runtime ConfigMap", n)
	}

	wrapper.Data[controller.AgentResourcesKey] = `{"requests":{"cpu":"200m","memory":"1Gi"},"limits":{"memory":"6Gi"}}`
	if err := k8s.Update(ctx, wrapper); err != nil {
		t.Fatal(err)
	}
	pod := waitPod(t, ns, task.Name)
	for _, tc := range []struct {
		container string
		limit     string
	}{
		{agent.CLIContainer, "300Mi"},
		{agent.WrapperContainer, "6Gi"},
	} {
		var c corev1.Container
		for _, x := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
			if x.Name == tc.container {
				c = x
			}
		}
		if q := c.Resources.Limits[corev1.ResourceMemory]; q.Cmp(resource.MustParse(tc.limit)) != 0 {
			t.Errorf("container %s memory limit %s, want %s", tc.container, q.String(), tc.limit)
		}
	}
}
