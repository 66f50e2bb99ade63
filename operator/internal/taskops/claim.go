package taskops

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"tatara.dev/cli/pkg/claim"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// PoolPod is the pod a reviewed ServiceAccount token was bound to (rest reviews the token).
type PoolPod struct {
	Namespace, Name string
	UID             types.UID
}

// ClaimOf is the answer for a claimed pool pod, with when its claim was recorded; nil while the
// pod is unclaimed, or while the cache does not show all of the claim yet (the Task's attempt,
// its token Secret). A pod that will never serve a Task (gone, deleted unclaimed, its Task ended)
// is Gone; a pod that is not a pool pod is Forbidden.
func (s *Service) ClaimOf(ctx context.Context, pp PoolPod) (*claim.Answer, time.Time, *Error) {
	var pod corev1.Pod
	if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: pp.Namespace, Name: pp.Name}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, time.Time{}, errorf(Gone, "pod %s/%s is gone", pp.Namespace, pp.Name)
		}
		return nil, time.Time{}, errorf(Internal, "failed to get pod %s/%s: %v", pp.Namespace, pp.Name, err)
	}
	if pod.UID != pp.UID {
		return nil, time.Time{}, errorf(Gone, "pod %s/%s (uid %s) is gone", pp.Namespace, pp.Name, pp.UID)
	}
	if pod.Labels[agent.LabelPool] == "" {
		return nil, time.Time{}, errorf(Forbidden, "pod %s/%s is not a warm pool pod", pp.Namespace, pp.Name)
	}
	owner := metav1.GetControllerOf(&pod)
	if owner == nil || owner.Kind != "Task" || owner.APIVersion != tatarav1.GroupVersion.String() {
		if !pod.DeletionTimestamp.IsZero() {
			return nil, time.Time{}, errorf(Gone, "pool pod %s/%s is being deleted unclaimed", pp.Namespace, pp.Name)
		}
		return nil, time.Time{}, nil
	}
	var task tatarav1.Task
	if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: owner.Name}, &task); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, time.Time{}, errorf(Gone, "task %q, which claimed pod %s, is gone", owner.Name, pod.Name)
		}
		return nil, time.Time{}, errorf(Internal, "failed to get task %q: %v", owner.Name, err)
	}
	if task.UID != owner.UID {
		return nil, time.Time{}, errorf(Gone, "task %q, which claimed pod %s, is gone", owner.Name, pod.Name)
	}
	if task.Spec.Cancel != nil || task.Status.Phase.Terminal() {
		return nil, time.Time{}, errorf(Gone, "task %q, which claimed pod %s, has ended", task.Name, pod.Name)
	}
	cur := task.Status.CurrentAttempt()
	if cur == nil || !cur.Warm || cur.PodName != pod.Name || (cur.PodUID != "" && cur.PodUID != pod.UID) {
		return nil, time.Time{}, nil
	}
	if cur.Finished() {
		return nil, time.Time{}, errorf(Gone, "attempt %d of task %q, in pod %s, has ended", cur.Number, task.Name, pod.Name)
	}
	var project tatarav1.Project
	if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: task.Spec.ProjectRef.Name}, &project); err != nil {
		return nil, time.Time{}, errorf(Internal, "failed to get project %q: %v", task.Spec.ProjectRef.Name, err)
	}
	tok, err := s.MintedToken(ctx, &task)
	if err != nil {
		if err.Code == Unauthenticated {
			return nil, time.Time{}, nil // the Secret is not in the cache yet
		}
		return nil, time.Time{}, err
	}
	claimedAt := cur.StartedAt.Time
	if at, err := time.Parse(time.RFC3339Nano, pod.Annotations[claim.AnnotationClaimedAt]); err == nil {
		claimedAt = at // to the nanosecond; the attempt's start has whole seconds
	}
	return &claim.Answer{Assignment: agent.Assignment(&task, &project), Token: tok, ClaimedAt: claimedAt}, claimedAt, nil
}
