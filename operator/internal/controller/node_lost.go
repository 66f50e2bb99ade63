package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/index"
)

// A lost node: its kubelet stops answering (the machine died, was preempted, or is cut off), the
// node controller sets its Ready condition to Unknown after its grace period
// (--node-monitor-grace-period), and nothing about the pods on it changes any more. Kubernetes
// alone would evict them after their toleration of the unreachable taint (300 s by default) and
// leave them Terminating until the node comes back or its object is deleted; with every node of a
// zone lost (a one-node cluster, a zone outage) it evicts nothing at all. A Task would wait that
// long, or for ever, with its token valid.
//
// So the operator watches the nodes its pods run on: once a node has not been Ready for
// Config.NodeLostAfter, the attempt whose pod runs there is lost (ReasonNodeLost): the Task fails,
// or, where its Project allows a retry, goes back to Pending with a new token (attemptLost), and
// the pod is deleted at once (grace period 0): it will never finish on its own, and a retry's pod
// has its name. A node that comes back kills the containers of a pod that no longer exists.

// DefaultNodeLostAfter is how long a node may not be Ready before its agent pods are lost. Added
// to the node controller's grace period (50 s by default), a Task ends or retries about 80 s after
// its node stopped answering. A node that is only slow to report (an overloaded kubelet) rarely
// stays not Ready that long, and an attempt lost in error is retried where the Project allows.
const DefaultNodeLostAfter = 30 * time.Second

// nodeLoss says whether pod's node has not been Ready for at least after: lost with a message
// naming the node and since when, or not yet lost with how long until it would be (0 when the
// node is Ready, unknown to the cache, or the pod is not bound yet).
func (r *TaskReconciler) nodeLoss(ctx context.Context, pod *corev1.Pod, now time.Time) (msg string, lost bool, recheck time.Duration, err error) {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return "", false, 0, nil
	}
	var node corev1.Node
	if err := r.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, &node); err != nil {
		// A deleted node's pods are the pod garbage collector's (DeletionByPodGC, podLost).
		return "", false, 0, client.IgnoreNotFound(err)
	}
	ready := nodeReady(&node)
	if ready == nil || ready.Status == corev1.ConditionTrue {
		return "", false, 0, nil
	}
	after := r.Config.NodeLostAfter
	if after <= 0 {
		after = DefaultNodeLostAfter
	}
	// A pod bound after its node stopped being Ready was placed there by a scheduler that saw the
	// node back (its kubelet answered again), before this cache did: its time counts from then.
	since := ready.LastTransitionTime.Time
	if bound := boundAt(pod); bound.After(since) {
		since = bound
	}
	if wait := since.Add(after).Sub(now); wait > 0 {
		return "", false, wait, nil
	}
	return fmt.Sprintf("was lost with its node %s: not Ready (%s: %s) since %s, %s or more", node.Name, ready.Status,
		ready.Reason, ready.LastTransitionTime.UTC().Format(time.RFC3339), after), true, 0, nil
}

// boundAt is when pod was bound to its node: its PodScheduled condition's last transition, else
// its start time (zero when neither is known).
func boundAt(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return time.Time{}
}

func nodeReady(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// forceDeletePod deletes that very pod without a grace period: its node is lost, so nothing would
// ever confirm a graceful end.
func (r *TaskReconciler) forceDeletePod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	err := r.Delete(ctx, pod, client.Preconditions{UID: &uid}, client.GracePeriodSeconds(0))
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("failed to delete pod %q of a lost node: %w", pod.Name, err)
	}
	logf.FromContext(ctx).Info("deleted the agent pod of a lost node", "pod", pod.Name, "node", pod.Spec.NodeName)
	return nil
}

// tasksOnNode maps a node to the Tasks whose pods are bound to it.
func (r *TaskReconciler) tasksOnNode(ctx context.Context, o client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.MatchingFields{index.PodNode: o.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "failed to list the pods of node", "node", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range pods.Items {
		if owner := controllerTask(&pods.Items[i]); owner != "" {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pods.Items[i].Namespace, Name: owner}})
		}
	}
	return out
}

// controllerTask is the name of the Task that controls pod, "" for none.
func controllerTask(pod *corev1.Pod) string {
	if o := metav1.GetControllerOf(pod); o != nil && o.Kind == "Task" && o.APIVersion == tatarav1.GroupVersion.String() {
		return o.Name
	}
	return ""
}

// nodeReadinessChanged passes a node's updates that change its Ready condition's status: the
// rest (heartbeats, images, addresses) concerns no Task.
var nodeReadinessChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		was, is := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
		if was == nil || is == nil {
			return false
		}
		status := func(n *corev1.Node) corev1.ConditionStatus {
			if c := nodeReady(n); c != nil {
				return c.Status
			}
			return ""
		}
		return status(was) != status(is)
	},
}
