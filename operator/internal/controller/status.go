package controller

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// Status mirroring: the Task's phase, Ready condition and activity derived from its agent pod.

func (r *TaskReconciler) setReady(task *tatarav1.Task, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&task.Status.Conditions, metav1.Condition{
		Type: tatarav1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: task.Generation,
	})
}

// mirrorPod derives phase and the Ready condition from the pod.
func (r *TaskReconciler) mirrorPod(task *tatarav1.Task, pod *corev1.Pod) {
	task.Status.PodName = pod.Name
	switch pod.Status.Phase {
	case corev1.PodRunning:
		task.Status.Phase = tatarav1.PhaseRunning
		if podReady(pod) {
			r.setReady(task, metav1.ConditionTrue, tatarav1.ReasonPodRunning, "agent pod is running")
		} else {
			r.setReady(task, metav1.ConditionFalse, tatarav1.ReasonPodPending, "agent pod is running but not ready")
		}
	case corev1.PodSucceeded, corev1.PodFailed:
		phase, reason := tatarav1.PhaseSucceeded, tatarav1.ReasonPodSucceeded
		if pod.Status.Phase == corev1.PodFailed {
			phase, reason = tatarav1.PhaseFailed, tatarav1.ReasonPodFailed
		}
		task.Status.Phase = phase
		msg := fmt.Sprintf("agent pod %s", pod.Status.Phase)
		if code, ok := wrapperExitCode(pod); ok {
			msg = fmt.Sprintf("agent pod %s: wrapper exited with code %d", pod.Status.Phase, code)
		}
		r.setReady(task, metav1.ConditionFalse, reason, msg)
		task.Status.AddActivity(metav1.Now(), tatarav1.ActivityPod, msg)
		r.event(task, reason, "Finish", msg)
	default:
		task.Status.Phase = tatarav1.PhasePending
		r.setReady(task, metav1.ConditionFalse, tatarav1.ReasonPodPending, pendingMessage(pod))
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func wrapperExitCode(pod *corev1.Pod) (int32, bool) {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == agent.WrapperContainer && s.State.Terminated != nil {
			return s.State.Terminated.ExitCode, true
		}
	}
	return 0, false
}

// pendingMessage names the first waiting container's reason (e.g. ImagePullBackOff).
func pendingMessage(pod *corev1.Pod) string {
	for _, s := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if w := s.State.Waiting; w != nil && w.Reason != "" {
			return fmt.Sprintf("container %s waiting: %s %s", s.Name, w.Reason, w.Message)
		}
	}
	return "agent pod is pending"
}
