package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
)

// The Task lifecycle beyond the happy path: cancel cascading to subtasks, pods that end badly or
// are lost, and the attempt record that keeps a Task from running twice unannounced.

// holdFinalizer keeps a deleted pod in the API server with its deletion timestamp set, as a pod
// does while its kubelet stops it (or forever, when its node is gone); envtest has no kubelet, and
// deletes an unscheduled pod at once without it.
const holdFinalizer = "test.tatara.dev/hold"

func holdPod(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"finalizers":[%q]}}`, holdFinalizer))
	if err := k8s.Patch(context.Background(), pod, patch); err != nil {
		t.Fatalf("failed to add a finalizer to pod %s: %v", pod.Name, err)
	}
	t.Cleanup(func() {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := k8s.Patch(context.Background(), pod, patch); client.IgnoreNotFound(err) != nil {
			t.Errorf("failed to release pod %s: %v", pod.Name, err)
		}
	})
}

// releasePod removes holdFinalizer now, so the held pod goes.
func releasePod(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if err := k8s.Patch(context.Background(), pod, patch); client.IgnoreNotFound(err) != nil {
		t.Fatalf("failed to release pod %s: %v", pod.Name, err)
	}
}

func setPodStatus(t testing.TB, pod *corev1.Pod, mutate func(*corev1.PodStatus)) {
	t.Helper()
	var fresh corev1.Pod
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), &fresh); err != nil {
		t.Fatal(err)
	}
	mutate(&fresh.Status)
	if err := k8s.Status().Update(context.Background(), &fresh); err != nil {
		t.Fatalf("failed to write the status of pod %s: %v", pod.Name, err)
	}
}

func deletePod(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	if err := k8s.Delete(context.Background(), pod); client.IgnoreNotFound(err) != nil {
		t.Fatalf("failed to delete pod %s: %v", pod.Name, err)
	}
}

// waitEnded waits for the Task's terminal phase and Ready reason.
func waitEnded(t testing.TB, ns, name string, phase tatarav1.TaskPhase, reason string) *tatarav1.Task {
	t.Helper()
	var task *tatarav1.Task
	eventually(t, 20*time.Second, fmt.Sprintf("task %s %s with reason %s", name, phase, reason), func() error {
		task = getTask(t, ns, name)
		if c := readyCondition(task); task.Status.Phase != phase || c == nil || c.Reason != reason {
			return fmt.Errorf("phase %s, ready condition %+v", task.Status.Phase, c)
		}
		return nil
	})
	return task
}

func newSubtask(t testing.TB, ns, name, parent string) *tatarav1.Task {
	t.Helper()
	task := &tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: tatarav1.TaskSpec{Kind: tatarav1.KindImplement, ProjectRef: tatarav1.ProjectReference{Name: "p"},
			Repo: "operator", Directive: "part of " + parent, Parent: parent},
	}
	if err := k8s.Create(context.Background(), task); err != nil {
		t.Fatalf("failed to create subtask %s: %v", name, err)
	}
	return task
}

func podGone(ns, task string) error {
	var pod corev1.Pod
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: agent.PodName(task)}, &pod)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("pod %s (uid %s) still exists", pod.Name, pod.UID)
}

// TestCancelCascadesToDescendants: cancelling a Task cancels every descendant that has not
// finished, through finished ones too, and each says whose cancellation ended it; finished
// descendants and unrelated Tasks keep their phase.
func TestCancelCascadesToDescendants(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	root := newTask(t, ns, "root", "p", tatarav1.KindIssueLifecycle)
	newSubtask(t, ns, "c1", "root") // running
	newSubtask(t, ns, "g1", "c1")   // under a running child
	newSubtask(t, ns, "c2", "root") // succeeds before the cancel
	newSubtask(t, ns, "g2", "c2")   // running under a finished child
	newSubtask(t, ns, "c3", "root") // fails before the cancel
	newTask(t, ns, "other", "p", tatarav1.KindReview)
	for _, name := range []string{"root", "c1", "g1", "c2", "g2", "c3", "other"} {
		waitPod(t, ns, name)
	}
	for name, phase := range map[string]corev1.PodPhase{"c2": corev1.PodSucceeded, "c3": corev1.PodFailed} {
		pod := waitPod(t, ns, name)
		setPodStatus(t, &pod, func(s *corev1.PodStatus) { s.Phase = phase })
	}
	waitEnded(t, ns, "c2", tatarav1.PhaseSucceeded, tatarav1.ReasonPodSucceeded)
	waitEnded(t, ns, "c3", tatarav1.PhaseFailed, tatarav1.ReasonPodFailed)

	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":{"reason":"superseded"}}}`))
	if err := k8s.Patch(context.Background(), root, patch); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		task       string
		phase      tatarav1.TaskPhase
		reason     string
		wantInMsgs []string
	}{
		{"root", tatarav1.PhaseCancelled, tatarav1.ReasonCancelled, []string{"superseded"}},
		{"c1", tatarav1.PhaseCancelled, tatarav1.ReasonParentCancelled, []string{`parent task "root"`, "superseded"}},
		{"g1", tatarav1.PhaseCancelled, tatarav1.ReasonParentCancelled, []string{`parent task "c1"`}},
		{"g2", tatarav1.PhaseCancelled, tatarav1.ReasonParentCancelled, []string{`"root"`, `"c2"`}},
		{"c2", tatarav1.PhaseSucceeded, tatarav1.ReasonPodSucceeded, nil},
		{"c3", tatarav1.PhaseFailed, tatarav1.ReasonPodFailed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.task, func(t *testing.T) {
			got := waitEnded(t, ns, tt.task, tt.phase, tt.reason)
			msg := readyCondition(got).Message
			for _, want := range tt.wantInMsgs {
				if !strings.Contains(msg, want) {
					t.Errorf("ready message %q does not contain %s", msg, want)
				}
			}
			if tt.phase == tatarav1.PhaseCancelled {
				eventually(t, 10*time.Second, "pod of "+tt.task+" deleted", func() error { return podGone(ns, tt.task) })
			}
		})
	}
	if p := getTask(t, ns, "other").Status.Phase; p.Terminal() {
		t.Fatalf("an unrelated Task ended %s", p)
	}
}

// TestPodEndMapsToTaskReason plays the kubelet, the eviction API and the node controller, and
// checks that each way an agent pod ends or is lost ends the Task with a reason saying which, and
// a message naming what failed.
func TestPodEndMapsToTaskReason(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	newProject(t, ns, "image", func(p *tatarav1.Project) { p.Spec.Agent.Image = "agent:it" })
	tests := []struct {
		name       string
		project    string
		end        func(t *testing.T, pod *corev1.Pod)
		reason     string
		wantInMsgs []string
	}{
		{"deleted", "p", func(t *testing.T, pod *corev1.Pod) {
			holdPod(t, pod)
			deletePod(t, pod)
		}, tatarav1.ReasonPodDeleted, []string{"deleted"}},
		{"evicted through the API", "p", func(t *testing.T, pod *corev1.Pod) {
			holdPod(t, pod)
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
			if err := k8s.SubResource("eviction").Create(context.Background(), pod, ev); err != nil {
				t.Fatalf("eviction: %v", err)
			}
		}, tatarav1.ReasonEvicted, []string{"EvictionByEvictionAPI"}},
		{"evicted by the kubelet", "p", func(t *testing.T, pod *corev1.Pod) {
			setPodStatus(t, pod, func(s *corev1.PodStatus) {
				s.Phase, s.Reason, s.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
			})
		}, tatarav1.ReasonEvicted, []string{"low on resource: memory"}},
		{"lost with its node", "p", func(t *testing.T, pod *corev1.Pod) {
			holdPod(t, pod)
			setPodStatus(t, pod, func(s *corev1.PodStatus) {
				s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
					Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint", LastTransitionTime: metav1.Now()})
			})
			deletePod(t, pod)
		}, tatarav1.ReasonNodeLost, []string{"DeletionByTaintManager"}},
		{"deadline exceeded", "p", func(t *testing.T, pod *corev1.Pod) {
			// Pods may get a deadline, or a shorter one, after creation; pod.go may set its own.
			deadline := int64(600)
			if d := pod.Spec.ActiveDeadlineSeconds; d != nil && *d < deadline {
				deadline = *d
			}
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"activeDeadlineSeconds":%d}}`, deadline))
			if err := k8s.Patch(context.Background(), pod, patch); err != nil {
				t.Fatalf("failed to set activeDeadlineSeconds: %v", err)
			}
			setPodStatus(t, pod, func(s *corev1.PodStatus) {
				s.Phase, s.Reason, s.Message = corev1.PodFailed, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
			})
		}, tatarav1.ReasonDeadlineExceeded, []string{"activeDeadlineSeconds"}},
		{"wrapper-install failed", "image", func(t *testing.T, pod *corev1.Pod) {
			setPodStatus(t, pod, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodFailed
				s.InitContainerStatuses = []corev1.ContainerStatus{{Name: agent.WrapperInstallContainer, Image: wrapperImage,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
						Message: "cp: can't create '/opt/tatara/wrapper': Read-only file system"}}}}
			})
		}, tatarav1.ReasonInitContainerFailed, []string{agent.WrapperInstallContainer, "exit code 1", "Read-only file system"}},
		{"wrapper OOMKilled", "p", func(t *testing.T, pod *corev1.Pod) {
			setPodStatus(t, pod, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodFailed
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: agent.WrapperContainer, Image: wrapperImage,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
			})
		}, tatarav1.ReasonPodFailed, []string{"code 137", "OOMKilled"}},
		{"cli sidecar restarted", "p", func(t *testing.T, pod *corev1.Pod) {
			setPodStatus(t, pod, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodRunning
				s.InitContainerStatuses = []corev1.ContainerStatus{{Name: agent.CLIContainer, Image: "cli:it", RestartCount: 1,
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
			})
		}, tatarav1.ReasonSidecarRestarted, []string{"sidecar cli", "1 restarts", "stopped"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := newTask(t, ns, fmt.Sprintf("end-%d", i), tt.project, tatarav1.KindImplement)
			pod := waitPod(t, ns, task.Name)
			tt.end(t, &pod)
			got := waitEnded(t, ns, task.Name, tatarav1.PhaseFailed, tt.reason)
			msg := readyCondition(got).Message
			for _, want := range tt.wantInMsgs {
				if !strings.Contains(msg, want) {
					t.Errorf("ready message %q does not contain %q", msg, want)
				}
			}
			a := got.Status.CurrentAttempt()
			if len(got.Status.Attempts) != 1 || a.PodUID != pod.UID || a.Reason != tt.reason || a.FinishedAt == nil {
				t.Errorf("attempts %+v, want one, of pod %s, ended %s", got.Status.Attempts, pod.UID, tt.reason)
			}
			if tt.reason == tatarav1.ReasonSidecarRestarted {
				eventually(t, 10*time.Second, "the pod of a restarted sidecar deleted", func() error { return podGone(ns, task.Name) })
			}
		})
	}
}

// TestRetryOnPodLoss: with spec.agent.retryOnPodLoss a lost pod gets one successor (with a fresh
// token) once it is gone, and the Task records both attempts; a second loss, or a pod that failed
// on its own, ends the Task.
func TestRetryOnPodLoss(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p", func(p *tatarav1.Project) { p.Spec.Agent.RetryOnPodLoss = true })

	task := newTask(t, ns, "retried", "p", tatarav1.KindImplement)
	first := waitPod(t, ns, task.Name)
	firstToken := token(t, ns, task.Name)
	setPodStatus(t, &first, func(s *corev1.PodStatus) {
		s.Phase, s.Reason, s.Message = corev1.PodFailed, "Evicted", "The node was low on resource: ephemeral-storage."
	})
	var second corev1.Pod
	eventually(t, 20*time.Second, "a second pod", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(&first), &second); err != nil {
			return err
		}
		if second.UID == first.UID {
			return fmt.Errorf("still the first pod")
		}
		return nil
	})
	var got *tatarav1.Task
	eventually(t, 20*time.Second, "two attempts recorded", func() error {
		got = getTask(t, ns, task.Name)
		a := got.Status.Attempts
		if len(a) != 2 || a[0].PodUID != first.UID || a[0].Reason != tatarav1.ReasonEvicted || a[1].PodUID != second.UID || a[1].Finished() {
			return fmt.Errorf("attempts %+v", a)
		}
		return nil
	})
	if got.Status.Phase.Terminal() {
		t.Fatalf("a retried Task ended %s", got.Status.Phase)
	}
	if tok := token(t, ns, task.Name); tok == firstToken {
		t.Fatal("the retry runs with the lost pod's token")
	}

	holdPod(t, &second)
	deletePod(t, &second)
	got = waitEnded(t, ns, task.Name, tatarav1.PhaseFailed, tatarav1.ReasonPodDeleted)
	if msg := readyCondition(got).Message; !strings.Contains(msg, "attempt 2") {
		t.Fatalf("ready message %q should say the retry was lost too", msg)
	}
	releasePod(t, &second)
	if err := podGone(ns, task.Name); err != nil {
		eventually(t, 10*time.Second, "the second pod gone", func() error { return podGone(ns, task.Name) })
	}
	// No third attempt.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := podGone(ns, task.Name); err != nil {
			t.Fatalf("a third pod: %v", err)
		}
	}

	failing := newTask(t, ns, "fails", "p", tatarav1.KindImplement)
	pod := waitPod(t, ns, failing.Name)
	setPodStatus(t, &pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: agent.WrapperContainer, Image: wrapperImage,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	})
	got = waitEnded(t, ns, failing.Name, tatarav1.PhaseFailed, tatarav1.ReasonPodFailed)
	if n := len(got.Status.Attempts); n != 1 {
		t.Fatalf("a pod that failed on its own was retried: %d attempts", n)
	}
}

// loseStatusWritesNamingAPod makes the API server refuse every status write of a Task in ns that
// names its pod (status.podName): the operator can create the pod but not record it, as when it
// stops right after the create. It returns a function that lifts the refusal. A probe Task proves
// the policy is in force (and lifted) before the function returns, since the API server loads
// policies asynchronously.
func loseStatusWritesNamingAPod(t *testing.T, ns string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	name := "lose-pod-status-" + ns
	nsSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: nsSelector,
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{tatarav1.GroupVersion.Group}, APIVersions: []string{tatarav1.GroupVersion.Version},
						Resources: []string{"tasks/status"}},
				}}},
			},
			Validations: []admissionv1.Validation{{
				Expression: "!has(object.status) || !has(object.status.podName)",
				Message:    "test: a status write naming the pod is lost",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: nsSelector},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("failed to create %s: %v", o.GetName(), err)
		}
	}
	probe := &tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec:       tatarav1.TaskSpec{Kind: tatarav1.KindReview, ProjectRef: tatarav1.ProjectReference{Name: "no-such-project"}, Directive: "d"},
	}
	if err := k8s.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	writePodName := func() error {
		var p tatarav1.Task
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(probe), &p); err != nil {
			return err
		}
		p.Status.PodName = "probe-pod"
		return k8s.Status().Update(ctx, &p)
	}
	eventually(t, 20*time.Second, "the policy in force", func() error {
		if err := writePodName(); err == nil || !strings.Contains(err.Error(), "is lost") {
			return fmt.Errorf("status write naming a pod: %w", err)
		}
		return nil
	})
	lifted := false
	lift = func() {
		if lifted {
			return
		}
		lifted = true
		for _, o := range []client.Object{binding, policy} {
			if err := k8s.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				t.Errorf("failed to delete %s: %v", o.GetName(), err)
			}
		}
		eventually(t, 20*time.Second, "the policy lifted", writePodName)
		if err := k8s.Delete(ctx, probe); client.IgnoreNotFound(err) != nil {
			t.Errorf("failed to delete the probe: %v", err)
		}
	}
	t.Cleanup(lift)
	return lift
}

// TestRestartAfterLostStatusWrite: the operator creates the pod but its status write naming the
// pod is lost, it stops, and the pod is deleted. The next operator must not run the Task again
// unannounced: the attempt recorded before the create shows a pod may have run, so the Task fails
// saying so, or, when the Project allows a retry, runs a second attempt that its status records.
func TestRestartAfterLostStatusWrite(t *testing.T) {
	tests := []struct {
		name  string
		retry bool
	}{
		{"no retry", false},
		{"retry allowed", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNamespace(t)
			lift := loseStatusWritesNamingAPod(t, ns)
			first := startOperator(t)
			newProject(t, ns, "p", func(p *tatarav1.Project) { p.Spec.Agent.RetryOnPodLoss = tt.retry })
			task := newTask(t, ns, "once", "p", tatarav1.KindImplement)
			pod := waitPod(t, ns, task.Name)
			// Give the operator time to try, and fail, to record the pod.
			eventually(t, 10*time.Second, "the operator's status writes refused", func() error {
				if n := testutil.ToFloat64(first.Metrics.TaskReconciles.WithLabelValues("error")); n < 1 {
					return fmt.Errorf("%v failed reconciles", n)
				}
				return nil
			})
			first.stop()
			deletePod(t, &pod)
			eventually(t, 10*time.Second, "the pod gone", func() error { return podGone(ns, task.Name) })
			lift()

			second := startOperator(t)
			if !tt.retry {
				got := waitEnded(t, ns, task.Name, tatarav1.PhaseFailed, tatarav1.ReasonPodMissing)
				if msg := readyCondition(got).Message; !strings.Contains(msg, "attempt 1") {
					t.Errorf("ready message %q should name the attempt", msg)
				}
				if a := got.Status.Attempts; len(a) != 1 || a[0].Reason != tatarav1.ReasonPodMissing {
					t.Errorf("attempts %+v, want the first, ended PodMissing", a)
				}
				for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
					if err := podGone(ns, task.Name); err != nil {
						t.Fatalf("a second pod without a retry: %v", err)
					}
				}
				if n := testutil.ToFloat64(second.Metrics.AgentPodsCreated); n != 0 {
					t.Fatalf("the restarted operator created %v pods", n)
				}
				return
			}
			retried := waitPod(t, ns, task.Name)
			if retried.UID == pod.UID {
				t.Fatal("the first pod is back")
			}
			eventually(t, 20*time.Second, "both attempts recorded", func() error {
				a := getTask(t, ns, task.Name).Status.Attempts
				if len(a) != 2 || a[0].Reason != tatarav1.ReasonPodMissing || a[1].PodUID != retried.UID {
					return fmt.Errorf("attempts %+v", a)
				}
				return nil
			})
			if n := testutil.ToFloat64(second.Metrics.AgentPodsCreated); n != 1 {
				t.Fatalf("the restarted operator created %v pods, want the one retry", n)
			}
		})
	}
}
