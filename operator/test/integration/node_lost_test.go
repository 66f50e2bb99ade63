package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/manager"
)

// nodeLostAfter is the bound of the test operator: short, so the test waits little, and long
// enough that a loss seen before it would show in the attempt's end time.
const nodeLostAfter = 3 * time.Second

// newNode creates a Ready node (envtest has no node controller: the test writes its conditions).
func newNode(t *testing.T) *corev1.Node {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "lost-"}}
	if err := k8s.Create(context.Background(), node); err != nil {
		t.Fatalf("failed to create a node: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	setNodeReady(t, node, corev1.ConditionTrue, "KubeletReady", time.Now())
	return node
}

func setNodeReady(t *testing.T, node *corev1.Node, status corev1.ConditionStatus, reason string, since time.Time) {
	t.Helper()
	var fresh corev1.Node
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(node), &fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason,
		LastHeartbeatTime: metav1.NewTime(since), LastTransitionTime: metav1.NewTime(since)}}
	if err := k8s.Status().Update(context.Background(), &fresh); err != nil {
		t.Fatalf("failed to write the status of node %s: %v", node.Name, err)
	}
}

// bindRunning binds the Task's pod to node, as the scheduler does, and marks it Running.
func bindRunning(t *testing.T, pod *corev1.Pod, node *corev1.Node) {
	t.Helper()
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target: corev1.ObjectReference{Kind: "Node", Name: node.Name}}
	if err := k8s.SubResource("binding").Create(context.Background(), pod, binding); err != nil {
		t.Fatalf("failed to bind pod %s to node %s: %v", pod.Name, node.Name, err)
	}
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Phase, s.StartTime = corev1.PodRunning, &metav1.Time{Time: time.Now()}
	})
}

// TestLostNodeEndsOrRetriesItsTask: a node that stops being Ready takes the attempts of the pods
// bound to it with it once it has not been Ready for the operator's bound, not before: the Task
// fails with NodeLost, or, where its Project allows a retry, runs a second pod with a new token.
// The lost pod is deleted without a grace period (a bound pod deleted gracefully would stay
// Terminating for ever: no kubelet confirms its end), and the pods of another node are not
// touched.
func TestLostNodeEndsOrRetriesItsTask(t *testing.T) {
	startOperator(t, func(o *manager.Options) { o.Controller.NodeLostAfter = nodeLostAfter })
	ns := newNamespace(t)
	newProject(t, ns, "once", func(p *tatarav1.Project) { p.Spec.Agent.RetryOnPodLoss = false })
	newProject(t, ns, "retry", func(p *tatarav1.Project) { p.Spec.Agent.RetryOnPodLoss = true })
	node, other, back := newNode(t), newNode(t), newNode(t)

	ends := newTask(t, ns, "ends", "once", tatarav1.KindImplement)
	retried := newTask(t, ns, "retried", "retry", tatarav1.KindImplement)
	stays := newTask(t, ns, "stays", "once", tatarav1.KindImplement)
	endsPod, retriedPod, staysPod := waitPod(t, ns, ends.Name), waitPod(t, ns, retried.Name), waitPod(t, ns, stays.Name)
	bindRunning(t, &endsPod, node)
	bindRunning(t, &retriedPod, node)
	bindRunning(t, &staysPod, other)
	firstToken := token(t, ns, retried.Name)

	// Whole seconds: the attempt's end time is recorded to the second.
	lostAt := time.Now().Truncate(time.Second)
	setNodeReady(t, node, corev1.ConditionUnknown, "NodeStatusUnknown", lostAt)

	got := waitEnded(t, ns, ends.Name, tatarav1.PhaseFailed, tatarav1.ReasonNodeLost)
	msg := readyCondition(got).Message
	for _, want := range []string{endsPod.Name, "lost with its node " + node.Name, "not Ready (Unknown: NodeStatusUnknown)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ready message %q does not say %q", msg, want)
		}
	}
	if end := got.Status.Attempts[0].FinishedAt; end == nil || end.Time.Before(lostAt.Add(nodeLostAfter)) {
		t.Errorf("attempt ended at %v, before the node had been not Ready for %s (since %v)", end, nodeLostAfter, lostAt)
	}
	eventually(t, 20*time.Second, "the lost pod deleted at once", func() error { return podGone(ns, ends.Name) })

	eventually(t, 20*time.Second, "a second attempt in a new pod", func() error {
		task := getTask(t, ns, retried.Name)
		a := task.Status.Attempts
		if len(a) != 2 || a[0].Reason != tatarav1.ReasonNodeLost || a[1].PodUID == "" || a[1].PodUID == retriedPod.UID || a[1].Finished() {
			return fmt.Errorf("phase %s, attempts %+v", task.Status.Phase, a)
		}
		return nil
	})
	if tok := token(t, ns, retried.Name); tok == firstToken {
		t.Error("the retry runs with the lost pod's token")
	}

	// A pod bound to a node whose Ready condition the cache still shows false from long before (the
	// scheduler saw the node back first): its loss counts from its binding, not from the node's
	// old transition.
	setNodeReady(t, back, corev1.ConditionUnknown, "NodeStatusUnknown", time.Now().Add(-time.Minute))
	late := newTask(t, ns, "late", "once", tatarav1.KindImplement)
	latePod := waitPod(t, ns, late.Name)
	boundAt := time.Now().Truncate(time.Second)
	bindRunning(t, &latePod, back)
	got = waitEnded(t, ns, late.Name, tatarav1.PhaseFailed, tatarav1.ReasonNodeLost)
	if end := got.Status.Attempts[0].FinishedAt; end == nil || end.Time.Before(boundAt.Add(nodeLostAfter)) {
		t.Errorf("the pod bound at %v to a node not Ready for a minute was lost at %v, before %s had passed since its binding", boundAt, end, nodeLostAfter)
	}

	if task := getTask(t, ns, stays.Name); task.Status.Phase.Terminal() || len(task.Status.Attempts) != 1 || task.Status.Attempts[0].Finished() {
		t.Errorf("the Task on the node that stayed Ready: phase %s, attempts %+v", task.Status.Phase, task.Status.Attempts)
	}
}
