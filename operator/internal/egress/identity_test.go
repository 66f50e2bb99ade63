package egress

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// agentPod is an agent pod of project at ips, owned by task when task is not empty, else a
// warm-pool pod.
func agentPod(name, project, task string, phase corev1.PodPhase, created time.Time, ips ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"),
		Labels: AgentPodLabels(project), CreationTimestamp: metav1.NewTime(created)}}
	pod.Status.Phase = phase
	if task == "" {
		pod.Labels[agent.LabelPool] = "implement"
	} else {
		pod.Labels[agent.LabelTask] = task
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: tatarav1.GroupVersion.String(), Kind: "Task",
			Name: task, UID: types.UID(task + "-uid"), Controller: ptr.To(true)}}
	}
	if len(ips) > 0 {
		pod.Status.PodIP = ips[0]
	}
	for _, ip := range ips {
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return pod
}

// TestPodIdentities: a source address is the Project's agent pod that holds it now, with its
// Task from the pod's label (and the Task's UID from its owner reference); a pool pod is a pod
// without a Task; an ended pod's address, another Project's pod and an address no pod holds are
// no one.
func TestPodIdentities(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pods := []client.Object{
		agentPod("task-a-pod", "demo", "task-a", corev1.PodRunning, t0, "10.1.0.5", "fd00::5"),
		agentPod("pool-pod", "demo", "", corev1.PodRunning, t0, "10.1.0.6"),
		// An ended pod whose address a newer pod now holds, and an older pod still holding one.
		agentPod("ended-pod", "demo", "task-old", corev1.PodSucceeded, t0, "10.1.0.7"),
		agentPod("task-b-pod", "demo", "task-b", corev1.PodRunning, t0.Add(time.Minute), "10.1.0.7"),
		agentPod("stale-pod", "demo", "task-stale", corev1.PodRunning, t0, "10.1.0.8"),
		agentPod("task-c-pod", "demo", "task-c", corev1.PodPending, t0.Add(time.Hour), "10.1.0.8"),
		agentPod("other-project-pod", "other", "task-x", corev1.PodRunning, t0, "10.1.0.9"),
	}
	scheme, err := schemeForTest()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pods...).
		WithIndex(&corev1.Pod{}, PodIPIndex, IndexPodIPs).Build()
	ids := &PodIdentities{Reader: c, Namespace: "ns", Project: "demo"}
	for _, tc := range []struct {
		src  string
		want Identity
	}{
		{"10.1.0.5", Identity{Pod: "task-a-pod", PodUID: "task-a-pod-uid", Task: "task-a", TaskUID: "task-a-uid"}},
		{"fd00::5", Identity{Pod: "task-a-pod", PodUID: "task-a-pod-uid", Task: "task-a", TaskUID: "task-a-uid"}},
		{"::ffff:10.1.0.5", Identity{Pod: "task-a-pod", PodUID: "task-a-pod-uid", Task: "task-a", TaskUID: "task-a-uid"}},
		{"10.1.0.6", Identity{Pod: "pool-pod", PodUID: "pool-pod-uid"}},
		{"10.1.0.7", Identity{Pod: "task-b-pod", PodUID: "task-b-pod-uid", Task: "task-b", TaskUID: "task-b-uid"}},
		{"10.1.0.8", Identity{Pod: "task-c-pod", PodUID: "task-c-pod-uid", Task: "task-c", TaskUID: "task-c-uid"}},
		{"10.1.0.9", Identity{}},
		{"10.1.0.10", Identity{}},
	} {
		if got := ids.Identify(context.Background(), netip.MustParseAddr(tc.src)); got != tc.want {
			t.Errorf("Identify(%s) = %+v, want %+v", tc.src, got, tc.want)
		}
	}
}

// TestSlimPodKeepsWhatIdentifies: the cache's pod transform keeps every field Identify reads.
func TestSlimPodKeepsWhatIdentifies(t *testing.T) {
	full := agentPod("p", "demo", "task-a", corev1.PodRunning, time.Now(), "10.1.0.5")
	full.Spec.Containers = []corev1.Container{{Name: "wrapper", Image: "x"}}
	got, err := slimPod(full)
	if err != nil {
		t.Fatal(err)
	}
	slim := got.(*corev1.Pod)
	if len(slim.Spec.Containers) != 0 {
		t.Error("the spec was kept")
	}
	scheme, err := schemeForTest()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(slim).WithIndex(&corev1.Pod{}, PodIPIndex, IndexPodIPs).Build()
	id := (&PodIdentities{Reader: c, Namespace: "ns", Project: "demo"}).Identify(context.Background(), netip.MustParseAddr("10.1.0.5"))
	if want := (Identity{Pod: "p", PodUID: "p-uid", Task: "task-a", TaskUID: "task-a-uid"}); id != want {
		t.Errorf("slim pod identifies as %+v, want %+v", id, want)
	}
}
