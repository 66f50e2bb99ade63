package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

func TestMirrorPod(t *testing.T) {
	ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	terminated := func(code int32) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: agent.WrapperContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code},
		}}}
	}
	tests := []struct {
		name        string
		status      corev1.PodStatus
		wantPhase   tatarav1.TaskPhase
		wantReason  string
		wantReady   metav1.ConditionStatus
		wantMessage string
		wantLog     bool
	}{
		{"no status yet", corev1.PodStatus{}, tatarav1.PhasePending, tatarav1.ReasonPodPending, metav1.ConditionFalse, "pending", false},
		{"image pull backoff is named", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{
			Name: agent.CLIContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}},
		}}}, tatarav1.PhasePending, tatarav1.ReasonPodPending, metav1.ConditionFalse, "container cli waiting: ImagePullBackOff", false},
		{"running, not ready", corev1.PodStatus{Phase: corev1.PodRunning}, tatarav1.PhaseRunning, tatarav1.ReasonPodPending, metav1.ConditionFalse, "not ready", false},
		{"running and ready", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready}, tatarav1.PhaseRunning, tatarav1.ReasonPodRunning, metav1.ConditionTrue, "running", false},
		{"succeeded", corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: terminated(0)}, tatarav1.PhaseSucceeded, tatarav1.ReasonPodSucceeded, metav1.ConditionFalse, "exited with code 0", true},
		{"failed with exit code", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: terminated(3)}, tatarav1.PhaseFailed, tatarav1.ReasonPodFailed, metav1.ConditionFalse, "exited with code 3", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tatara-agent-t"}, Status: tt.status}
			(&TaskReconciler{}).mirrorPod(task, pod)
			c := meta.FindStatusCondition(task.Status.Conditions, tatarav1.ConditionReady)
			if task.Status.Phase != tt.wantPhase || c == nil || c.Reason != tt.wantReason || c.Status != tt.wantReady {
				t.Fatalf("phase %s condition %+v, want %s %s %s", task.Status.Phase, c, tt.wantPhase, tt.wantReason, tt.wantReady)
			}
			if !strings.Contains(c.Message, tt.wantMessage) {
				t.Fatalf("message %q, want it to contain %q", c.Message, tt.wantMessage)
			}
			if got := len(task.Status.Activity) > 0; got != tt.wantLog {
				t.Fatalf("activity logged = %v, want %v", got, tt.wantLog)
			}
			if task.Status.PodName != pod.Name {
				t.Fatalf("podName %q", task.Status.PodName)
			}
		})
	}
}
