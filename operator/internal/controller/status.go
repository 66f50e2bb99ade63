package controller

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tatara.dev/cli/pkg/modelusage"
	"tatara.dev/cli/pkg/workspace"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// Status mirroring: the Task's phase, Ready condition and activity derived from its agent pod.

func (r *TaskReconciler) setReady(task *tatarav1.Task, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&task.Status.Conditions, metav1.Condition{
		Type: tatarav1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: task.Generation,
	})
}

// mirrorPod derives phase and the Ready condition from the pod of the current attempt. A pod that
// was lost before it finished ends the attempt, and the Task too unless retry.
func (r *TaskReconciler) mirrorPod(task *tatarav1.Task, pod *corev1.Pod, retry bool) {
	task.Status.PodName = pod.Name
	usage, metered := recordModelUsage(task, pod)
	if reason, msg, lost := podLost(pod); lost {
		r.attemptLost(task, retry, reason, fmt.Sprintf("agent pod %s%s %s", pod.Name, attemptNote(task), msg))
		return
	}
	switch pod.Status.Phase {
	case corev1.PodRunning:
		task.Status.Phase = tatarav1.PhaseRunning
		if podReady(pod) {
			r.setReady(task, metav1.ConditionTrue, tatarav1.ReasonPodRunning, "agent pod is running")
		} else {
			r.setReady(task, metav1.ConditionFalse, tatarav1.ReasonPodPending, "agent pod is running but not ready")
		}
	case corev1.PodSucceeded, corev1.PodFailed:
		if metered && usage.BudgetExceeded {
			r.endTask(task, tatarav1.PhaseFailed, tatarav1.ReasonBudgetExceeded, fmt.Sprintf(
				"the Task spent its token budget (%d tokens used in all): the model gateway of agent pod %s refused the agent's next model request",
				task.Status.Usage.Tokens, pod.Name))
			return
		}
		r.mirrorEnd(task, pod)
	default:
		task.Status.Phase = tatarav1.PhasePending
		r.setReady(task, metav1.ConditionFalse, tatarav1.ReasonPodPending, pendingMessage(pod))
	}
}

// mirrorEnd ends the Task as its ended pod says.
func (r *TaskReconciler) mirrorEnd(task *tatarav1.Task, pod *corev1.Pod) {
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		msg := fmt.Sprintf("agent pod %s", pod.Status.Phase)
		if code, _, ok := wrapperExit(pod); ok {
			msg = fmt.Sprintf("agent pod %s: wrapper exited with code %d", pod.Status.Phase, code)
		}
		r.endTask(task, tatarav1.PhaseSucceeded, tatarav1.ReasonPodSucceeded, msg)
	case corev1.PodFailed:
		reason, msg := podFailure(pod)
		f, ok := workspaceFailure(pod)
		if !ok {
			f, ok = checkoutFailure(task, pod)
		}
		if ok {
			reason = tatarav1.ReasonWorkspaceFailed
			msg = fmt.Sprintf("workspace not prepared, agent not started: %s: %s", f.Reason, f.Message)
			meta.SetStatusCondition(&task.Status.Conditions, metav1.Condition{
				Type: tatarav1.ConditionWorkspaceFailed, Status: metav1.ConditionTrue, Reason: f.Reason,
				Message: f.Message, ObservedGeneration: task.Generation,
			})
		}
		r.endTask(task, tatarav1.PhaseFailed, reason, msg)
	}
}

// recordModelUsage records the current attempt's model usage from the report its pod's model
// gateway leaves as its termination message, once the gateway has ended (a pod lost with its node
// leaves none). It returns the report, and false when there is none yet. An unreadable report is
// noted in the Task's activity, never taken as a count.
func recordModelUsage(task *tatarav1.Task, pod *corev1.Pod) (modelusage.Usage, bool) {
	for _, s := range pod.Status.InitContainerStatuses {
		t := s.State.Terminated
		if s.Name != agent.ModelGatewayContainer || t == nil || t.Message == "" {
			continue
		}
		u, err := modelusage.Parse(t.Message)
		if err != nil {
			if cur := task.Status.CurrentAttempt(); cur != nil && cur.Usage == nil {
				task.Status.AddActivity(metav1.Now(), tatarav1.ActivityPod, fmt.Sprintf("agent pod %s: the model gateway's usage report was unreadable: %v", pod.Name, err))
			}
			return modelusage.Usage{}, false
		}
		task.Status.SetAttemptUsage(tatarav1.ModelUsage{Requests: u.Requests, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheCreationInputTokens: u.CacheCreationInputTokens, CacheReadInputTokens: u.CacheReadInputTokens})
		return u, true
	}
	return modelusage.Usage{}, false
}

// attemptNote names the attempt in a message, e.g. " (attempt 2)"; "" before attempts exist.
func attemptNote(task *tatarav1.Task) string {
	if a := task.Status.CurrentAttempt(); a != nil {
		return fmt.Sprintf(" (attempt %d)", a.Number)
	}
	return ""
}

// podLost tells whether the pod was lost before it finished, and how: being deleted (its deletion
// timestamp counts: it will not finish its work), evicted, or lost with its node. The kubelet's
// status.reason is the most precise account, then the DisruptionTarget condition that the
// eviction API, the scheduler, the kubelet, the node controller and the pod garbage collector set
// before they delete a pod. A pod that succeeded was not lost, whatever came after.
func podLost(pod *corev1.Pod) (reason, msg string, lost bool) {
	if pod.Status.Phase == corev1.PodSucceeded || failedOnItsOwn(pod) {
		return "", "", false
	}
	detail := func(why, message string) string {
		if message == "" {
			return why
		}
		return why + ": " + message
	}
	switch pod.Status.Reason {
	case "Evicted":
		return tatarav1.ReasonEvicted, "was evicted: " + detail(pod.Status.Reason, pod.Status.Message), true
	case "NodeLost":
		return tatarav1.ReasonNodeLost, "was lost with its node: " + detail(pod.Status.Reason, pod.Status.Message), true
	case "Terminated", "Shutdown": // the kubelet's graceful node shutdown
		return tatarav1.ReasonNodeLost, "was stopped by its node's shutdown: " + detail(pod.Status.Reason, pod.Status.Message), true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Reason {
		case "DeletionByTaintManager", "DeletionByPodGC":
			return tatarav1.ReasonNodeLost, "was lost with its node: " + detail(c.Reason, c.Message), true
		case "EvictionByEvictionAPI", "PreemptionByScheduler", "TerminationByKubelet":
			return tatarav1.ReasonEvicted, "was evicted: " + detail(c.Reason, c.Message), true
		}
		if !pod.DeletionTimestamp.IsZero() {
			return tatarav1.ReasonPodDeleted, "was deleted before it finished: " + detail(c.Reason, c.Message), true
		}
		return tatarav1.ReasonEvicted, "was disrupted: " + detail(c.Reason, c.Message), true
	}
	if !pod.DeletionTimestamp.IsZero() {
		return tatarav1.ReasonPodDeleted, "was deleted before it finished", true
	}
	return "", "", false
}

// exceededOwnLimit matches the kubelet's eviction messages for a pod that wrote past its own
// emptyDir sizeLimit or ephemeral-storage limit: the agent filled its disk, the node did not
// fail it.
func exceededOwnLimit(message string) bool {
	for _, m := range []string{"Usage of EmptyDir volume", "exceeded its local ephemeral storage limit", "ephemeral local storage usage exceeds the total limit"} {
		if strings.Contains(message, m) {
			return true
		}
	}
	return false
}

// failedOnItsOwn is true for a pod whose end the agent caused, which is never a loss (so never
// retried), even if the pod is deleted or evicted afterwards: it ran past its deadline, wrote past
// its own storage limits, or the wrapper or an init container exited non-zero.
func failedOnItsOwn(pod *corev1.Pod) bool {
	if pod.Status.Reason == "DeadlineExceeded" || (pod.Status.Reason == "Evicted" && exceededOwnLimit(pod.Status.Message)) {
		return true
	}
	if code, _, ok := wrapperExit(pod); ok && code != 0 {
		return true
	}
	for _, s := range pod.Status.InitContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			return true
		}
	}
	return false
}

// podFailure says why a Failed pod failed: its deadline, the wrapper's exit, or the init
// container that stopped the agent from starting (named, with its exit code or state).
func podFailure(pod *corev1.Pod) (reason, msg string) {
	if pod.Status.Reason == "DeadlineExceeded" {
		deadline := "its activeDeadlineSeconds"
		if d := pod.Spec.ActiveDeadlineSeconds; d != nil {
			deadline = fmt.Sprintf("activeDeadlineSeconds %d (%s)", *d, time.Duration(*d)*time.Second)
		}
		msg = fmt.Sprintf("agent pod ran past its deadline, %s, and was stopped", deadline)
		if pod.Status.Message != "" {
			msg += ": " + pod.Status.Message
		}
		return tatarav1.ReasonDeadlineExceeded, msg
	}
	if pod.Status.Reason == "Evicted" && exceededOwnLimit(pod.Status.Message) {
		return tatarav1.ReasonEvicted, "agent pod was evicted for exceeding its own storage limit (Project spec.agent.storage): " + pod.Status.Message
	}
	if code, why, ok := wrapperExit(pod); ok {
		msg = fmt.Sprintf("agent pod Failed: wrapper exited with code %d", code)
		if why != "" {
			msg += " (" + why + ")"
		}
		return tatarav1.ReasonPodFailed, msg
	}
	for _, s := range pod.Status.InitContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			msg = fmt.Sprintf("init container %s failed with exit code %d", s.Name, t.ExitCode)
			if t.Reason != "" {
				msg += " (" + t.Reason + ")"
			}
			if t.Message != "" {
				msg += ": " + t.Message
			}
			return tatarav1.ReasonInitContainerFailed, msg + "; the agent never started"
		}
	}
	msg = "agent pod Failed"
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		msg = strings.TrimSuffix(fmt.Sprintf("agent pod Failed: %s %s", pod.Status.Reason, pod.Status.Message), " ")
	}
	// The container the pod stopped at, when it never got to the wrapper.
	for _, s := range pod.Status.InitContainerStatuses {
		if w := s.State.Waiting; w != nil && w.Reason != "" {
			return tatarav1.ReasonPodFailed, fmt.Sprintf("%s; init container %s was waiting: %s %s", msg, s.Name, w.Reason, w.Message)
		}
	}
	return tatarav1.ReasonPodFailed, msg
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// wrapperExit is the wrapper container's exit code and the kubelet's reason (e.g. OOMKilled).
func wrapperExit(pod *corev1.Pod) (int32, string, bool) {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == agent.WrapperContainer && s.State.Terminated != nil {
			return s.State.Terminated.ExitCode, s.State.Terminated.Reason, true
		}
	}
	return 0, "", false
}

// workspaceFailure reads why workspace-init failed from its termination message (written by
// `wrapper workspace-init`). An init container that exited non-zero without one, e.g. killed for
// memory, is CloneFailed with the kubelet's reason and exit code.
func workspaceFailure(pod *corev1.Pod) (workspace.Failure, bool) {
	for _, s := range pod.Status.InitContainerStatuses {
		t := s.State.Terminated
		if s.Name != agent.WorkspaceInitContainer || t == nil || t.ExitCode == 0 {
			continue
		}
		if t.Message == "" {
			return workspace.Failure{Reason: workspace.CloneFailed, Message: fmt.Sprintf(
				"%s exited with code %d (%s) and left no message", s.Name, t.ExitCode, t.Reason)}, true
		}
		return workspace.ParseFailure(t.Message), true
	}
	return workspace.Failure{}, false
}

// checkoutFailure reads why a claimed pool pod's wrapper could not check out its Task's ref before
// the agent started (it exited workspace.ExitCheckoutFailed). The wrapper's container is the
// agent's, whose code could write such a message and exit so itself, so only the reason, one of
// workspace.Reasons, is taken from it; the message is the operator's own (git's output is in the
// wrapper's log), and nothing the agent wrote reaches the Task's status.
func checkoutFailure(task *tatarav1.Task, pod *corev1.Pod) (workspace.Failure, bool) {
	if a := task.Status.CurrentAttempt(); a == nil || !a.Warm {
		return workspace.Failure{}, false
	}
	for _, s := range pod.Status.ContainerStatuses {
		t := s.State.Terminated
		if s.Name != agent.WrapperContainer || t == nil || t.ExitCode != workspace.ExitCheckoutFailed {
			continue
		}
		return workspace.Failure{Reason: workspace.ParseFailure(t.Message).Reason, Message: fmt.Sprintf(
			"the claimed pool pod %s could not check out ref %q fetched through its git gateway (the wrapper's log has git's output)",
			pod.Name, task.Spec.Ref)}, true
	}
	return workspace.Failure{}, false
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
