package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// Attempts: every agent pod is recorded in status.attempts before it is created, so the operator
// can always tell whether a Task already ran (or may have), even after it lost the status write
// that named the pod. A Task gets a second pod only when its Project allows one retry after a
// lost pod, and its status then shows both.

// retryAllowed reports whether a Task whose current pod was lost may start another attempt.
func retryAllowed(project *tatarav1.Project, task *tatarav1.Task) bool {
	return project.Spec.Agent.RetryOnPodLoss && len(task.Status.Attempts) < tatarav1.MaxAttemptsWithRetry
}

// ensurePod returns the current attempt's pod, starting the first attempt, or a retry once the
// lost pod is gone. nil, nil means the Task waits (its condition says why) or its attempt ended
// without a pod to mirror (the status says how). persist writes the status before a pod is
// created; a conflict from it, or errStaleCache, asks the caller to requeue.
func (r *TaskReconciler) ensurePod(ctx context.Context, task *tatarav1.Task, project *tatarav1.Project, persist func() error) (*corev1.Pod, error) {
	name := agent.PodName(task.Name)
	if len(task.Status.Attempts) == 0 && task.Status.PodName != "" {
		// A pod created by an operator that did not record attempts.
		task.Status.Attempts = []tatarav1.TaskAttempt{{Number: 1, PodName: task.Status.PodName, StartedAt: task.CreationTimestamp}}
	}
	if cur := task.Status.CurrentAttempt(); cur != nil && cur.Warm {
		name = cur.PodName
		if !cur.Finished() && cur.PodUID == "" {
			if err := r.checkClaimMade(ctx, task); err != nil {
				return nil, err
			}
		}
	}
	pod, err := r.getPod(ctx, task, name, r.Client)
	if err != nil {
		return nil, err
	}
	cur := task.Status.CurrentAttempt()
	switch {
	case cur == nil && pod == nil:
		return r.startAttempt(ctx, task, project, persist)

	case cur == nil:
		// A pod this Task controls but no attempt: created by an operator that lost its status
		// write before attempts were recorded. It is the first attempt.
		task.Status.Attempts = []tatarav1.TaskAttempt{{Number: 1, PodName: name, PodUID: pod.UID, StartedAt: pod.CreationTimestamp}}
		return pod, nil

	case !cur.Finished():
		if pod == nil || pod.UID != cur.PodUID {
			// The cache may lag behind our own create, or still hold a previous attempt's pod:
			// ask the API server before concluding anything.
			if pod, err = r.getPod(ctx, task, name, r.APIReader); err != nil {
				return nil, err
			}
		}
		switch {
		case pod == nil:
			msg := fmt.Sprintf("agent pod %s (attempt %d) was deleted before it finished", name, cur.Number)
			// Only an attempt recorded by an operator that predates attempts (the first, with
			// status.podName already set) has no uid and was seen.
			if cur.PodUID == "" && (cur.Number > 1 || task.Status.PodName == "") {
				msg = fmt.Sprintf("agent pod %s (attempt %d) is gone and was never recorded: the operator stopped between "+
					"creating it and recording it, so it may have run", name, cur.Number)
			}
			r.attemptLost(task, retryAllowed(project, task), tatarav1.ReasonPodMissing, msg)
			return nil, nil
		case cur.PodUID == "":
			cur.PodUID = pod.UID
		case cur.PodUID != pod.UID:
			// Not the pod this attempt created: it must not run unrecorded.
			if err := r.confirmFresh(ctx, task); err != nil {
				return nil, err
			}
			if err := r.deletePod(ctx, pod); err != nil {
				return nil, err
			}
			r.attemptLost(task, retryAllowed(project, task), tatarav1.ReasonPodMissing, fmt.Sprintf(
				"agent pod %s (attempt %d, uid %s) was replaced by a pod the operator did not record (uid %s), which it deleted",
				name, cur.Number, cur.PodUID, pod.UID))
			return nil, nil
		}
		task.Status.PodName = name
		return pod, nil

	default:
		// The current attempt was lost and a retry is due: once the lost pod is gone, since the
		// next one has the same name. Read live: the cache may still hold a pod that is gone, and
		// nothing else would requeue this Task.
		if pod, err = r.getPod(ctx, task, name, r.APIReader); err != nil {
			return nil, err
		}
		if pod != nil {
			switch {
			case cur.Reason == tatarav1.ReasonNodeLost && pod.UID == cur.PodUID:
				// Its node will never confirm a graceful end (node_lost.go): deleting it
				// gracefully, or the eviction that did, would leave it Terminating for ever.
				if err := r.forceDeletePod(ctx, pod); err != nil {
					return nil, err
				}
			case pod.DeletionTimestamp.IsZero():
				// Make sure it is the lost pod, not a newer attempt's that a stale cached Task
				// does not show yet.
				if err := r.confirmFresh(ctx, task); err != nil {
					return nil, err
				}
				if err := r.deletePod(ctx, pod); err != nil {
					return nil, err
				}
			}
			r.setReady(task, metav1.ConditionFalse, tatarav1.ReasonRetrying, fmt.Sprintf(
				"attempt %d ended (%s); attempt %d starts once pod %s is gone", cur.Number, cur.Reason, cur.Number+1, name))
			return nil, nil // the pod's deletion requeues this Task
		}
		if !retryAllowed(project, task) {
			// The Project stopped allowing the retry while the lost pod went.
			r.endTask(task, tatarav1.PhaseFailed, cur.Reason, cur.Message+"; no retry: the project no longer allows one")
			return nil, nil
		}
		return r.startAttempt(ctx, task, project, persist)
	}
}

// errClaimNotMade makes the controller start the Task again: its attempt named a pool pod that
// it never claimed.
var errClaimNotMade = errors.New("the recorded claim of a pool pod was never made; starting again")

// checkClaimMade looks, live, at the pool pod the current attempt recorded without a uid: the
// operator stopped, or the claim's write failed, between recording the attempt and seeing the
// claim. A pod that another owner controls was never claimed (a claimed pod never changes hands):
// the attempt is dropped and errClaimNotMade returned. A pod this Task controls is the attempt's;
// a pod that is gone may have run, and the generic path below treats it as lost.
func (r *TaskReconciler) checkClaimMade(ctx context.Context, task *tatarav1.Task) error {
	cur := task.Status.CurrentAttempt()
	var pod corev1.Pod
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: cur.PodName}, &pod)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to get pool pod %q: %w", cur.PodName, err)
	}
	if ownedBy(&pod, task) {
		return nil
	}
	task.Status.Attempts = task.Status.Attempts[:len(task.Status.Attempts)-1]
	if task.Status.PodName == cur.PodName {
		task.Status.PodName = ""
	}
	return errClaimNotMade
}

// getPod reads the Task's pod through reader; nil when there is none. A pod of the Task's own name
// that the Task does not control (left over from a deleted Task of the same name, or planted) is
// deleted; a warm attempt's pool pod it does not control is only not the Task's.
func (r *TaskReconciler) getPod(ctx context.Context, task *tatarav1.Task, name string, reader client.Reader) (*corev1.Pod, error) {
	var pod corev1.Pod
	err := reader.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: name}, &pod)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get pod %q: %w", name, err)
	}
	if !ownedBy(&pod, task) {
		if name != agent.PodName(task.Name) {
			// A warm attempt's pool pod that the reader does not show as claimed (yet): not the
			// Task's to delete.
			return nil, nil
		}
		return nil, r.deleteStale(ctx, &pod)
	}
	return &pod, nil
}

// deletePod deletes that very pod (a uid precondition), not a successor of the same name.
func (r *TaskReconciler) deletePod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	if err := r.Delete(ctx, pod, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("failed to delete pod %q: %w", pod.Name, err)
	}
	return nil
}

// confirmFresh returns errStaleCache when the cached Task is older than the API server's: a pod is
// deleted only on a decision taken from the current status.
func (r *TaskReconciler) confirmFresh(ctx context.Context, task *tatarav1.Task) error {
	var fresh tatarav1.Task
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(task), &fresh); err != nil {
		return fmt.Errorf("failed to get task %q: %w", task.Name, err)
	}
	if fresh.ResourceVersion != task.ResourceVersion {
		return errStaleCache
	}
	return nil
}

// startAttempt records the next attempt (and a freshly minted token's hash) in the status, then
// creates its pod. The record comes first so that a pod always has one, whatever the operator loses
// afterwards; an attempt whose create the API server refused is dropped again, since no pod exists.
func (r *TaskReconciler) startAttempt(ctx context.Context, task *tatarav1.Task, project *tatarav1.Project, persist func() error) (*corev1.Pod, error) {
	name := agent.PodName(task.Name)
	if task.Status.TokenHash == "" {
		// Unreachable by construction (ensureSecret comes first); a pod must never run with a
		// token whose hash is not recorded.
		return nil, fmt.Errorf("task %q has no recorded token hash; not creating its pod", task.Name)
	}
	cfg, ok, err := r.podConfig(ctx, task)
	if err != nil || !ok {
		return nil, err
	}
	if project.Spec.Agent.Model != nil && !cfg.ModelGateway {
		r.setReady(task, metav1.ConditionFalse, tatarav1.ReasonRuntimeConfigInvalid, modelGatewayMissing())
		return nil, nil // the ConfigMap watch requeues this Task
	}
	if len(task.Status.Attempts) == 0 {
		if pod, err := r.claimWarm(ctx, task, project, cfg, persist); err != nil || pod != nil {
			return pod, err
		}
	}
	desired := agent.BuildPod(task, project, cfg)

	n := int32(len(task.Status.Attempts)) + 1
	task.Status.Attempts = append(task.Status.Attempts, tatarav1.TaskAttempt{Number: n, PodName: name, StartedAt: metav1.Now()})
	if err := persist(); err != nil {
		if apierrors.IsConflict(err) {
			return nil, err
		}
		return nil, fmt.Errorf("failed to record attempt %d of task %q: %w", n, task.Name, err)
	}
	dropAttempt := func() { task.Status.Attempts = task.Status.Attempts[:n-1] }

	if err := r.Create(ctx, desired); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Created by an earlier reconcile the cache has not seen yet, or not the Task's.
			pod, gerr := r.getPod(ctx, task, name, r.APIReader)
			if gerr != nil || pod == nil {
				dropAttempt()
				return nil, gerr
			}
			task.Status.CurrentAttempt().PodUID = pod.UID
			task.Status.PodName = name
			return pod, nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			// The API server refused the pod (e.g. a Project extraEnv it rejects, Pod Security,
			// a quota): say so on the Task. Invalid stays until the Task or Project changes (both
			// watched); Forbidden may pass (quota), so it is retried with backoff.
			dropAttempt()
			r.setReady(task, metav1.ConditionFalse, tatarav1.ReasonPodRejected, fmt.Sprintf("the API server rejected agent pod %q: %v", name, err))
			if apierrors.IsForbidden(err) {
				return nil, fmt.Errorf("failed to create pod %q: %w", name, err)
			}
			return nil, nil
		}
		var status apierrors.APIStatus
		if errors.As(err, &status) && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) {
			dropAttempt() // the API server answered: nothing was created
		}
		// Otherwise the pod may exist: the open attempt makes the next reconcile look for it.
		return nil, fmt.Errorf("failed to create pod %q: %w", name, err)
	}
	if r.Metrics != nil {
		r.Metrics.AgentPodsCreated.Inc()
	}
	profile := agent.ToolProfileForKind(task.Spec.Kind)
	logf.FromContext(ctx).Info("created agent pod", "pod", name, "attempt", n, "kind", task.Spec.Kind, "profile", profile)
	task.Status.CurrentAttempt().PodUID = desired.UID
	task.Status.PodName = name
	task.Status.AddActivity(metav1.Now(), tatarav1.ActivityPod, fmt.Sprintf("agent pod %s created (attempt %d, profile %q)", name, n, profile))
	r.event(task, "PodCreated", "Create", fmt.Sprintf("created agent pod %s (attempt %d)", name, n))
	return desired, nil
}

// attemptLost ends the current attempt, whose pod was lost before it finished. With a retry
// allowed the Task waits for the next attempt, and the lost pod's token stops authenticating (the
// retry gets a new one: the lost pod may still run, on a node the cluster cannot reach);
// otherwise the Task fails with the loss's reason.
func (r *TaskReconciler) attemptLost(task *tatarav1.Task, retry bool, reason, msg string) {
	cur := task.Status.CurrentAttempt()
	if cur == nil || cur.Finished() {
		r.endTask(task, tatarav1.PhaseFailed, reason, msg)
		return
	}
	if !retry {
		r.endTask(task, tatarav1.PhaseFailed, reason, msg)
		return
	}
	cur.Finish(metav1.Now(), reason, msg)
	task.Status.Phase = tatarav1.PhasePending
	task.Status.TokenHash = ""
	note := fmt.Sprintf("%s; the project allows a retry: attempt %d starts once the pod is gone", msg, cur.Number+1)
	r.setReady(task, metav1.ConditionFalse, tatarav1.ReasonRetrying, note)
	task.Status.AddActivity(metav1.Now(), tatarav1.ActivityPod, note)
	r.warn(task, reason, "Retry", note)
}

// endTask ends the Task (and its current attempt) with phase, reason and message.
func (r *TaskReconciler) endTask(task *tatarav1.Task, phase tatarav1.TaskPhase, reason, msg string) {
	if cur := task.Status.CurrentAttempt(); cur != nil && !cur.Finished() {
		cur.Finish(metav1.Now(), reason, msg)
	}
	task.Status.Phase = phase
	r.setReady(task, metav1.ConditionFalse, reason, msg)
	task.Status.AddActivity(metav1.Now(), tatarav1.ActivityPod, msg)
	if phase == tatarav1.PhaseSucceeded || phase == tatarav1.PhaseCancelled {
		r.event(task, reason, "Finish", msg)
	} else {
		r.warn(task, reason, "Finish", msg)
	}
}

func (r *TaskReconciler) warn(task *tatarav1.Task, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, reason, action, "%s", note)
	}
}
