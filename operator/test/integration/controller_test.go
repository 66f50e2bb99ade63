package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/controller"
	tokenpkg "tatara.dev/operator/internal/token"
)

func agentPods(t testing.TB, ns, task string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{agent.LabelTask: task}); err != nil {
		t.Fatalf("failed to list pods: %v", err)
	}
	return pods.Items
}

func waitPod(t testing.TB, ns, task string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	eventually(t, 20*time.Second, "agent pod of "+task, func() error {
		return k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: agent.PodName(task)}, &pod)
	})
	return pod
}

func getTask(t testing.TB, ns, name string) *tatarav1.Task {
	t.Helper()
	var task tatarav1.Task
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &task); err != nil {
		t.Fatalf("failed to get task %s: %v", name, err)
	}
	return &task
}

func readyCondition(task *tatarav1.Task) *metav1.Condition {
	return meta.FindStatusCondition(task.Status.Conditions, tatarav1.ConditionReady)
}

func waitReason(t testing.TB, ns, name, reason string) *tatarav1.Task {
	t.Helper()
	var task *tatarav1.Task
	eventually(t, 20*time.Second, fmt.Sprintf("task %s condition Ready reason %s", name, reason), func() error {
		task = getTask(t, ns, name)
		c := readyCondition(task)
		if c == nil || c.Reason != reason {
			return fmt.Errorf("ready condition %+v", c)
		}
		return nil
	})
	return task
}

// pokeAndWaitReconciled makes the operator reconcile the Task (an annotation change is an update
// event) and waits until a reconcile has finished after it. Not a spec change: every spec field
// but cancel is immutable, so a new generation cannot serve as the proof.
func pokeAndWaitReconciled(t testing.TB, op *operator, task *tatarav1.Task, i int) {
	t.Helper()
	reconciles := func() float64 {
		return testutil.ToFloat64(op.Metrics.TaskReconciles.WithLabelValues("ok")) +
			testutil.ToFloat64(op.Metrics.TaskReconciles.WithLabelValues("error"))
	}
	before := reconciles()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"test.tatara.dev/poke":"%d"}}}`, i))
	if err := k8s.Patch(context.Background(), task, patch); err != nil {
		t.Fatalf("failed to patch task: %v", err)
	}
	eventually(t, 20*time.Second, "a reconcile after the poke", func() error {
		if n := reconciles(); n <= before {
			return fmt.Errorf("%v reconciles, %v before the poke", n, before)
		}
		return nil
	})
}

func initContainer(t testing.TB, pod corev1.Pod, name string) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("pod %s has no init container %s", pod.Name, name)
	}
	return pod.Spec.InitContainers[i]
}

// profileOf is the container's first TATARA_TOOL_PROFILE, the one from the Task kind.
func profileOf(c corev1.Container) string {
	for _, e := range c.Env {
		if e.Name == "TATARA_TOOL_PROFILE" {
			return e.Value
		}
	}
	return ""
}

func envNames(env []corev1.EnvVar) []string {
	var out []string
	for _, e := range env {
		out = append(out, e.Name)
	}
	return out
}

// TestReconcileCreatesExactlyOnePod: one Task, one pod (accepted by an API server enforcing
// the restricted Pod Security Standard), with the contract's env; re-reconciles add none.
func TestReconcileCreatesExactlyOnePod(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p", func(p *tatarav1.Project) {
		p.Spec.Agent.ExtraEnvs = []corev1.EnvVar{{Name: "TATARA_TOOL_PROFILE", Value: "review"}, {Name: "EXTRA", Value: "1"}}
	})
	task := newTask(t, ns, "impl-1", "p", tatarav1.KindImplement)

	pod := waitPod(t, ns, task.Name)
	contract := []string{"TATARA_PROJECT", "TATARA_TASK", "TATARA_TASK_KIND", "TATARA_OPERATOR_URL",
		"TATARA_MEMORY_URL", "TATARA_CHAT_URL", "TATARA_TOKEN", "TATARA_TOOL_PROFILE"}
	// The Task names a repo: workspace-init clones it before the cli sidecar starts.
	if n := pod.Spec.InitContainers[0].Name; n != agent.WorkspaceInitContainer {
		t.Fatalf("first init container %s, want %s", n, agent.WorkspaceInitContainer)
	}
	cli := pod.Spec.InitContainers[1]
	if cli.Name != agent.CLIContainer || cli.Image != cliImage || cli.RestartPolicy == nil || *cli.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("second init container must be the cli native sidecar from %s, got %s %s", cliImage, cli.Name, cli.Image)
	}
	if got, want := envNames(cli.Env), append(slices.Clone(contract), "TATARA_TOOL_PROFILE", "EXTRA"); !slices.Equal(got, want) {
		t.Fatalf("cli env %v, want %v", got, want)
	}
	w := pod.Spec.Containers[0]
	if w.Name != agent.WrapperContainer || w.Image != wrapperImage {
		t.Fatalf("main container must be the wrapper from %s, got %s %s", wrapperImage, w.Name, w.Image)
	}
	// The wrapper (where the agent runs) gets the contract without the token: only the cli has it.
	noToken := slices.DeleteFunc(slices.Clone(contract), func(n string) bool { return n == "TATARA_TOKEN" })
	if got := envNames(w.Env); !slices.Equal(got[:7], noToken) || !slices.Equal(got[len(got)-2:], []string{"TATARA_TOOL_PROFILE", "EXTRA"}) ||
		slices.Contains(got, "TATARA_TOKEN") {
		t.Fatalf("wrapper env %v: want the contract without TATARA_TOKEN first and the extras last", got)
	}
	if p := profileOf(w); p != "implement" {
		t.Fatalf("TATARA_TOOL_PROFILE from the kind = %q, want implement", p)
	}
	if owner := metav1.GetControllerOf(&pod); owner == nil || owner.UID != task.UID {
		t.Fatalf("pod owner %+v, want the Task", owner)
	}

	var secret corev1.Secret
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: agent.SecretName(task.Name)}, &secret); err != nil {
		t.Fatalf("token secret: %v", err)
	}
	if tok := string(secret.Data["token"]); !tokenpkg.Valid(tok) {
		t.Fatalf("token %q does not have the shape tatara_<64 hex>", tok)
	}

	got := waitReason(t, ns, task.Name, tatarav1.ReasonPodPending)
	if got.Status.PodName != pod.Name || got.Status.Phase != tatarav1.PhasePending || got.Status.SecretName != secret.Name ||
		got.Status.TokenHash != tokenpkg.Hash(string(secret.Data["token"])) {
		t.Fatalf("status %+v", got.Status)
	}

	// Force more reconciles of THIS Task (the namespace's only one) and wait until they are processed.
	for i := range 2 {
		pokeAndWaitReconciled(t, op, got, i)
	}
	if n := len(agentPods(t, ns, task.Name)); n != 1 {
		t.Fatalf("%d agent pods for one Task, want 1", n)
	}
	if n := testutil.ToFloat64(op.Metrics.AgentPodsCreated); n != 1 {
		t.Fatalf("agent_pods_created_total = %v, want 1", n)
	}
}

// TestRestartCreatesNoPod: a second operator (the first one stopped) reconciles the existing
// Task and creates neither a pod nor a new token.
func TestRestartCreatesNoPod(t *testing.T) {
	first := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "restart", "p", tatarav1.KindReview)
	pod := waitPod(t, ns, task.Name)
	var secret corev1.Secret
	eventually(t, 10*time.Second, "token secret", func() error {
		return k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: agent.SecretName(task.Name)}, &secret)
	})
	first.stop()

	second := startOperator(t)
	// Proof that the new operator reconciled this Task, the only one there is.
	pokeAndWaitReconciled(t, second, getTask(t, ns, task.Name), 0)
	if n := testutil.ToFloat64(second.Metrics.AgentPodsCreated); n != 0 {
		t.Fatalf("restarted operator created %v pods, want 0", n)
	}
	if n := testutil.ToFloat64(second.Metrics.TokenSecretsCreated); n != 0 {
		t.Fatalf("restarted operator created %v token secrets, want 0", n)
	}
	pods := agentPods(t, ns, task.Name)
	if len(pods) != 1 || pods[0].UID != pod.UID {
		t.Fatalf("want the original pod %s only, got %d pods", pod.UID, len(pods))
	}
	var after corev1.Secret
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(&secret), &after); err != nil {
		t.Fatal(err)
	}
	if after.UID != secret.UID || string(after.Data["token"]) != string(secret.Data["token"]) {
		t.Fatal("the restarted operator replaced the Task's token")
	}
}

func TestMissingProjectIsAConditionUntilCreated(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	task := newTask(t, ns, "orphan", "later", tatarav1.KindTriageIssue)
	got := waitReason(t, ns, task.Name, tatarav1.ReasonProjectNotFound)
	if c := readyCondition(got); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `"later"`) {
		t.Fatalf("condition %+v should name the missing project", c)
	}
	if n := len(agentPods(t, ns, task.Name)); n != 0 {
		t.Fatalf("%d pods without a project", n)
	}
	newProject(t, ns, "later")
	pod := waitPod(t, ns, task.Name)
	if v := profileOf(pod.Spec.Containers[0]); v != "triage" {
		t.Fatalf("profile %q, want triage", v)
	}
}

// A pod the API server refuses is a condition that names the problem, not a silent retry loop.
func TestRejectedPodIsACondition(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "bad-env", func(p *tatarav1.Project) {
		p.Spec.Agent.ExtraEnvs = []corev1.EnvVar{{Name: "NOT=VALID", Value: "x"}}
	})
	task := newTask(t, ns, "rejected", "bad-env", tatarav1.KindReview)
	got := waitReason(t, ns, task.Name, tatarav1.ReasonPodRejected)
	if c := readyCondition(got); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "NOT=VALID") {
		t.Fatalf("condition %+v should carry the API server's reason", c)
	}
	if n := len(agentPods(t, ns, task.Name)); n != 0 {
		t.Fatalf("%d pods for a rejected pod spec", n)
	}
}

func TestMissingRuntimeConfigMapIsAConditionUntilCreated(t *testing.T) {
	emptyNS := "runtime-" + rand.String(6)
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: emptyNS}}); err != nil {
		t.Fatal(err)
	}
	startOperator(t, withRuntimeNamespace(emptyNS))
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "waits", "p", tatarav1.KindIncident)
	got := waitReason(t, ns, task.Name, tatarav1.ReasonRuntimeConfigMissing)
	if c := readyCondition(got); !strings.Contains(c.Message, controller.CLIRuntimeConfigMap) {
		t.Fatalf("condition %+v should name the missing ConfigMap", c)
	}
	if n := len(agentPods(t, ns, task.Name)); n != 0 {
		t.Fatalf("%d pods without runtime images", n)
	}
	if err := createRuntimeConfigMaps(context.Background(), emptyNS); err != nil {
		t.Fatal(err)
	}
	pod := waitPod(t, ns, task.Name)
	if c := initContainer(t, pod, agent.CLIContainer); c.Image != cliImage {
		t.Fatalf("cli image %q", c.Image)
	}
}

// TestStatusFollowsPod plays the kubelet's part (writing pod status through the API server)
// and checks the Task phase, Ready condition and activity log follow.
func TestStatusFollowsPod(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "lifecycle", "p", tatarav1.KindIssueLifecycle)
	pod := waitPod(t, ns, task.Name)

	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(context.Background(), &pod); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, ns, task.Name, tatarav1.ReasonPodRunning)
	if got.Status.Phase != tatarav1.PhaseRunning || readyCondition(got).Status != metav1.ConditionTrue {
		t.Fatalf("status %+v", got.Status)
	}

	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: agent.WrapperContainer, Image: wrapperImage,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
	}}
	if err := k8s.Status().Update(context.Background(), &pod); err != nil {
		t.Fatal(err)
	}
	got = waitReason(t, ns, task.Name, tatarav1.ReasonPodSucceeded)
	if got.Status.Phase != tatarav1.PhaseSucceeded {
		t.Fatalf("phase %s", got.Status.Phase)
	}
	last := got.Status.Activity[len(got.Status.Activity)-1]
	if !strings.Contains(last.Text, "exited with code 0") {
		t.Fatalf("last activity %q should report the wrapper's exit code", last.Text)
	}
}

func TestCancelDeletesPod(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "cancel-me", "p", tatarav1.KindBrainstorm)
	waitPod(t, ns, task.Name)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":{"reason":"superseded"}}}`))
	if err := k8s.Patch(context.Background(), task, patch); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, ns, task.Name, tatarav1.ReasonCancelled)
	if got.Status.Phase != tatarav1.PhaseCancelled || !strings.Contains(readyCondition(got).Message, "superseded") {
		t.Fatalf("status %+v", got.Status)
	}
	eventually(t, 10*time.Second, "pod deletion", func() error {
		var pod corev1.Pod
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: agent.PodName(task.Name)}, &pod)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod still there (err %w)", err)
	})
}

func TestTaskNameLimitEnforcedByCRD(t *testing.T) {
	ns := newNamespace(t)
	task := &tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 51), Namespace: ns},
		Spec:       tatarav1.TaskSpec{Kind: tatarav1.KindReview, ProjectRef: tatarav1.ProjectReference{Name: "p"}, Directive: "d"},
	}
	err := k8s.Create(context.Background(), task)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "at most 50 characters") {
		t.Fatalf("want a validation error naming the limit, got %v", err)
	}
	task.Name = "ok"
	task.Spec.Kind = "healthCheck"
	if err := k8s.Create(context.Background(), task); !apierrors.IsInvalid(err) {
		t.Fatalf("kind healthCheck must be rejected by the CRD enum, got %v", err)
	}
}

func TestDirectiveLimitEnforcedByCRD(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name      string
		directive string
		wantErr   string // besides "spec.directive"; "" = accepted
	}{
		{"64 KiB of ASCII", strings.Repeat("a", 64<<10), ""},
		{"one byte over", strings.Repeat("a", 64<<10+1), "65536 bytes"},
		// 16 Ki characters of 4 bytes each: within MaxLength, but the bytes are what exec limits.
		{"under the character limit, over in bytes", strings.Repeat("🦀", 16<<10+1), "directive is at most 65536 bytes"},
		{"empty", "", "at least 1"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := &tatarav1.Task{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("directive-%d", i), Namespace: ns},
				Spec:       tatarav1.TaskSpec{Kind: tatarav1.KindReview, ProjectRef: tatarav1.ProjectReference{Name: "p"}, Directive: tt.directive},
			}
			err := k8s.Create(context.Background(), task)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want accepted, got %v", err)
			case tt.wantErr != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.directive") || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("want a validation error naming spec.directive and %q, got %v", tt.wantErr, err)
			}
		})
	}
}

func TestProjectNameLimitEnforcedByCRD(t *testing.T) {
	ns := newNamespace(t)
	p := &tatarav1.Project{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("p", 64), Namespace: ns}}
	if err := k8s.Create(context.Background(), p); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "at most 63 characters") {
		t.Fatalf("want a validation error naming the limit, got %v", err)
	}
	p.Name = strings.Repeat("p", 63)
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatalf("a 63-character Project name must be accepted: %v", err)
	}
}

// TestNamespaceEnforcesRestricted proves the restricted-PSS namespaces of these tests really
// reject a non-restricted pod, so the agent pods they accept are restricted.
func TestNamespaceEnforcesRestricted(t *testing.T) {
	ns := newNamespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "loose", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	err := k8s.Create(context.Background(), pod)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "restricted") {
		t.Fatalf("a non-restricted pod must be rejected by Pod Security admission, got %v", err)
	}
}

// TestSamplesAreValid creates config/samples through the API server (CRD schema validation)
// and checks the sample Task gets its pod.
func TestSamplesAreValid(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	var project tatarav1.Project
	var task tatarav1.Task
	for file, obj := range map[string]client.Object{
		"tatara_v1alpha1_project.yaml": &project,
		"tatara_v1alpha1_task.yaml":    &task,
	} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(raw, obj); err != nil {
			t.Fatalf("failed to decode %s: %v", file, err)
		}
		obj.SetNamespace(ns)
	}
	for _, obj := range []client.Object{&project, &task} {
		if err := k8s.Create(context.Background(), obj); err != nil {
			t.Fatalf("failed to create sample %s: %v", obj.GetName(), err)
		}
	}
	pod := waitPod(t, ns, task.Name)
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	want := []string{agent.WorkspaceInitContainer, agent.CLIContainer, agent.GitGatewayContainer}
	if !slices.Equal(names, want) {
		t.Fatalf("sample project (agent image, repo with clone and push credentials): init containers %v, want %v", names, want)
	}
}
