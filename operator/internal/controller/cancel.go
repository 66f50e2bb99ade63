package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/index"
)

// Cancel: spec.cancel ends a Task, and the cancellation cascades to every descendant (spec.parent
// chain) that has not finished, through finished ones. Each descendant's own reconcile ends it,
// from the ancestor it finds cancelled, so the cascade needs no write to any other Task and
// survives an operator restart half-way.

// maxAncestry bounds the walk up spec.parent (the REST API nests subtasks 2 deep; Tasks made by
// hand could form a loop).
const maxAncestry = 16

// maxCascade bounds the descendants one cancelled Task enqueues.
const maxCascade = 1000

// cancel deletes the pod (if any) and ends the Task as Cancelled.
func (r *TaskReconciler) cancel(ctx context.Context, task *tatarav1.Task) error {
	msg := "cancelled"
	if task.Spec.Cancel.Reason != "" {
		msg = "cancelled: " + task.Spec.Cancel.Reason
	}
	return r.endCancelled(ctx, task, tatarav1.ReasonCancelled, msg)
}

func (r *TaskReconciler) endCancelled(ctx context.Context, task *tatarav1.Task, reason, msg string) error {
	return r.endWithPod(ctx, task, tatarav1.PhaseCancelled, reason, msg)
}

func (r *TaskReconciler) endWithPod(ctx context.Context, task *tatarav1.Task, phase tatarav1.TaskPhase, reason, msg string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: task.Namespace, Name: agent.PodName(task.Name)}}
	if cur := task.Status.CurrentAttempt(); cur != nil && cur.Warm {
		// A pool pod goes only as the Task's own, that very pod: a claim that was never made
		// leaves it to its pool (or to the Task that did claim it).
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: task.Namespace, Name: cur.PodName}, pod); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to get pod %q: %w", cur.PodName, err)
		}
		if pod.UID == "" || !ownedBy(pod, task) {
			r.endTask(task, phase, reason, msg)
			return nil
		}
		uid := pod.UID
		if err := r.Delete(ctx, pod, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete pod %q: %w", pod.Name, err)
		}
		r.endTask(task, phase, reason, msg)
		return nil
	}
	if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete pod %q: %w", pod.Name, err)
	}
	r.endTask(task, phase, reason, msg)
	return nil
}

// cancelIfAncestorCancelled ends the Task as Cancelled (ParentCancelled) when its nearest ancestor
// that is not finished, or the first one past finished ones, is cancelled.
func (r *TaskReconciler) cancelIfAncestorCancelled(ctx context.Context, task *tatarav1.Task) (bool, error) {
	if task.Spec.Parent == "" {
		return false, nil
	}
	var parent, ancestor *tatarav1.Task
	seen := map[string]bool{task.Name: true}
	for name := task.Spec.Parent; name != "" && !seen[name] && len(seen) <= maxAncestry; {
		seen[name] = true
		var t tatarav1.Task
		if err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: name}, &t); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if parent == nil {
			parent = &t
		}
		if t.Spec.Cancel != nil || t.Status.Phase == tatarav1.PhaseCancelled {
			ancestor = &t
			break
		}
		if !t.Status.Phase.Terminal() {
			// A live ancestor: if it gets cancelled, its own cancellation reaches this Task.
			return false, nil
		}
		name = t.Spec.Parent
	}
	if ancestor == nil {
		return false, nil
	}
	msg := fmt.Sprintf("cancelled because its parent task %q was cancelled", parent.Name)
	if ancestor != parent {
		msg = fmt.Sprintf("cancelled because task %q, an ancestor, was cancelled (its parent task %q had already finished)", ancestor.Name, parent.Name)
	}
	if c := ancestor.Spec.Cancel; c != nil && c.Reason != "" {
		msg += ": " + c.Reason
	}
	return true, r.endCancelled(ctx, task, tatarav1.ReasonParentCancelled, msg)
}

// descendantsOfCancelled maps a cancelled (or cancel-requested) Task to its descendants that have
// not finished, found through the spec.parent index, so each reconciles and cancels itself.
func (r *TaskReconciler) descendantsOfCancelled(ctx context.Context, o client.Object) []reconcile.Request {
	task, ok := o.(*tatarav1.Task)
	if !ok || (task.Spec.Cancel == nil && task.Status.Phase != tatarav1.PhaseCancelled) {
		return nil
	}
	var out []reconcile.Request
	seen := map[string]bool{task.Name: true}
	for queue := []string{task.Name}; len(queue) > 0 && len(seen) <= maxCascade; queue = queue[1:] {
		var children tatarav1.TaskList
		if err := r.List(ctx, &children, client.InNamespace(task.Namespace), client.MatchingFields{index.TaskParent: queue[0]}); err != nil {
			logf.FromContext(ctx).Error(err, "failed to list subtasks", "task", queue[0])
			return out
		}
		for i := range children.Items {
			c := &children.Items[i]
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			queue = append(queue, c.Name)
			if !c.Status.Phase.Terminal() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
			}
		}
	}
	return out
}
