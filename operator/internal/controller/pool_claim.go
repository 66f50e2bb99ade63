package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/metrics"
)

// claimWarm starts the Task's first attempt in a ready pod of its Project's warm pool, if there is
// one it may use; nil, nil means the Task starts a pod of its own. The attempt is recorded before
// the claim, as before a create, so a pod never serves a Task without a record; the claim itself
// is a patch under the pod's resourceVersion, so of two Tasks that chose the same pod one wins and
// the other tries another (at most maxClaimTries), then starts cold. See pool_controller.go for
// the pool's lifecycle.
func (r *TaskReconciler) claimWarm(ctx context.Context, task *tatarav1.Task, project *tatarav1.Project, cfg agent.Config, persist func() error) (*corev1.Pod, error) {
	pool, ok := warmPoolFor(project, task, cfg.ClaimFetchesRef)
	if !ok {
		return nil, nil
	}
	var lost []string
	for range maxClaimTries {
		pod, err := r.claimablePod(ctx, project, pool, cfg, lost)
		if err != nil {
			return nil, err
		}
		if pod == nil {
			break
		}
		claimed, err := r.claim(ctx, task, project, pod, persist)
		if err != nil || claimed {
			return pod, err
		}
		lost = append(lost, pod.Name)
	}
	// The Task starts cold, in this reconcile: its attempt 1 replaces any recorded claim.
	task.Status.Attempts = task.Status.Attempts[:0]
	if len(lost) > 0 {
		r.countClaim(task, metrics.ClaimLostRace)
	} else {
		r.countClaim(task, metrics.ClaimEmpty)
	}
	return nil, nil
}

// maxClaimTries bounds the pool pods one Task tries to claim before it starts cold: each try
// that another Task won costs a status write and a patch.
const maxClaimTries = 3

// claim records attempt 1 in pod, then makes the Task pod's controller; false (and no error) when
// another Task claimed it first or the pool replaced it.
func (r *TaskReconciler) claim(ctx context.Context, task *tatarav1.Task, project *tatarav1.Project, pod *corev1.Pod, persist func() error) (bool, error) {
	task.Status.Attempts = []tatarav1.TaskAttempt{{Number: 1, PodName: pod.Name, Warm: true, StartedAt: metav1.Now()}}
	if err := persist(); err != nil {
		if apierrors.IsConflict(err) {
			return false, err
		}
		return false, fmt.Errorf("failed to record attempt 1 of task %q: %w", task.Name, err)
	}
	orig := pod.DeepCopy()
	agent.ClaimPoolPod(pod, task, project, metav1.Now())
	if err := r.Patch(ctx, pod, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, nil
		}
		// The claim may have been made: the next reconcile looks (checkClaimMade).
		return false, fmt.Errorf("failed to claim pool pod %q: %w", pod.Name, err)
	}
	r.countClaim(task, metrics.ClaimClaimed)
	profile := agent.ToolProfileForKind(task.Spec.Kind)
	logf.FromContext(ctx).Info("claimed pool pod", "pod", pod.Name, "attempt", 1, "kind", task.Spec.Kind, "profile", profile)
	task.Status.CurrentAttempt().PodUID = pod.UID
	task.Status.PodName = pod.Name
	task.Status.AddActivity(metav1.Now(), tatarav1.ActivityPod, fmt.Sprintf("agent pod %s claimed from the warm pool (attempt 1, profile %q)", pod.Name, profile))
	r.event(task, "PodClaimed", "Claim", fmt.Sprintf("claimed agent pod %s from the warm pool (attempt 1)", pod.Name))
	return true, nil
}

// warmPoolFor is the Project's pool a Task may take a pod from: of its kind, cloning its repo (or
// none, when it names none). A Task asking for another ref than the pool's checkout may take one
// when the repo has push configured and the pool's cli and wrapper images handle a claim's ref
// (fetchesRef): the pod's wrapper fetches the ref through its git gateway once claimed
// (agent.RefToFetch). Otherwise the Task starts a pod of its own, as a retry does (a pool pod's
// branch is the first attempt's).
func warmPoolFor(project *tatarav1.Project, task *tatarav1.Task, fetchesRef bool) (tatarav1.WarmPool, bool) {
	pool, ok := poolOf(project, task.Spec.Kind)
	if !ok || pool.Repo != task.Spec.Repo {
		return pool, false
	}
	if task.Spec.Repo == "" {
		return pool, true
	}
	repo := project.Repo(task.Spec.Repo)
	if repo == nil {
		return pool, false
	}
	return pool, agent.RefToFetch(task, repo) == "" || (repo.Push != nil && fetchesRef)
}

// claimablePod picks a ready pod of pool, built from what the pool is built from now, other than
// except (those another Task won), at random, so that Tasks reconciled side by side seldom choose
// the same one.
func (r *TaskReconciler) claimablePod(ctx context.Context, project *tatarav1.Project, pool tatarav1.WarmPool, cfg agent.Config, except []string) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(project.Namespace),
		client.MatchingLabels{agent.LabelProject: project.Name, agent.LabelPool: string(pool.Kind)}); err != nil {
		return nil, fmt.Errorf("failed to list pool pods of project %q: %w", project.Name, err)
	}
	template := poolTemplate(project, pool, cfg)
	var ready []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if agent.Claimable(p, project, template) && !slices.Contains(except, p.Name) {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return nil, nil
	}
	return ready[rand.IntN(len(ready))].DeepCopy(), nil
}

func (r *TaskReconciler) countClaim(task *tatarav1.Task, result string) {
	if r.Metrics != nil {
		r.Metrics.WarmPoolClaims.WithLabelValues(string(task.Spec.Kind), result).Inc()
	}
}
