package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tatara.dev/cli/pkg/claim"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/manager"
	"tatara.dev/operator/internal/metrics"
)

func withWarmPool(size int32) func(*tatarav1.Project) {
	return func(p *tatarav1.Project) {
		p.Spec.Repos[0].DefaultBranch = "main"
		p.Spec.WarmPool = []tatarav1.WarmPool{{Kind: tatarav1.KindImplement, Size: size, Repo: "operator"}}
	}
}

// unclaimedPoolPods are the Project's pool pods that no Task has claimed and that are not going.
func unclaimedPoolPods(t testing.TB, ns string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(ns), client.HasLabels{agent.LabelPool}); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.Labels[agent.LabelTask] != "" || !p.DeletionTimestamp.IsZero() })
}

// waitPool waits for exactly n unclaimed pool pods and marks them as a kubelet would once their
// clone is done and their containers run (envtest has no kubelet).
func waitPool(t testing.TB, ns string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, 20*time.Second, fmt.Sprintf("%d unclaimed pool pods", n), func() error {
		if pods = unclaimedPoolPods(t, ns); len(pods) != n {
			return fmt.Errorf("%d unclaimed pool pods", len(pods))
		}
		return nil
	})
	for i := range pods {
		if pods[i].Status.Phase != corev1.PodRunning {
			markPoolPodRunning(t, &pods[i])
		}
	}
	return pods
}

func markPoolPodRunning(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		now := metav1.Now()
		s.Phase, s.StartTime = corev1.PodRunning, &now
		s.InitContainerStatuses, s.ContainerStatuses = nil, nil
		for _, c := range pod.Spec.InitContainers {
			st := corev1.ContainerStatus{Name: c.Name, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}
			if c.RestartPolicy == nil {
				st.Started = ptr.To(false)
				st.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
			}
			s.InitContainerStatuses = append(s.InitContainerStatuses, st)
		}
		for _, c := range pod.Spec.Containers {
			s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
	})
}

// podToken is what the kubelet projects into a pool pod's cli: a ServiceAccount token bound to
// that pod, for audience.
func podToken(t testing.TB, pod *corev1.Pod, audience string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: pod.Namespace}}
	if err := k8s.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{audience},
		ExpirationSeconds: ptr.To(int64(600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if err := k8s.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("failed to request a token bound to pod %s: %v", pod.Name, err)
	}
	return tr.Status.Token
}

type claimResponse struct {
	code   int
	answer claim.Answer
	raw    string
}

func askClaim(t testing.TB, base, tok string, wait int) claimResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s%s?%s=%d", base, claim.OperatorPath, claim.WaitParam, wait), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", claim.OperatorPath, err)
		return claimResponse{}
	}
	defer func() { _ = resp.Body.Close() }()
	var r claimResponse
	r.code = resp.StatusCode
	var raw strings.Builder
	_, _ = fmt.Fprint(&raw, readAll(resp))
	r.raw = raw.String()
	if r.code == http.StatusOK {
		if err := json.Unmarshal([]byte(r.raw), &r.answer); err != nil {
			t.Errorf("claim answer %q: %v", r.raw, err)
		}
	}
	return r
}

func readAll(resp *http.Response) string {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// TestWarmPoolClaims: a Project's pool is filled to its size with pods that name no Task; a burst
// of Tasks larger than the pool claims each pool pod exactly once and starts the rest cold; the
// pool refills; a claimed pod's cli, and only it, receives the Task and its token, whether it
// asked before or after the claim; a Task that asks for another ref starts cold.
func TestWarmPoolClaims(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	project := newProject(t, ns, "p", withWarmPool(2))
	pool := waitPool(t, ns, 2)
	for _, pod := range pool {
		if owner := metav1.GetControllerOf(&pod); owner == nil || owner.Kind != "Project" || owner.Name != project.Name {
			t.Fatalf("pool pod %s's controller = %+v, want Project %s", pod.Name, owner, project.Name)
		}
		if !strings.HasPrefix(pod.Name, agent.PoolPodNamePrefix) || pod.Spec.ActiveDeadlineSeconds != nil {
			t.Fatalf("pool pod %s: want the pool's name prefix and no active deadline", pod.Name)
		}
	}

	// Before any claim: the pod's own token waits and hears 204; another audience's token, and no
	// token, are refused.
	first := pool[0]
	tok := podToken(t, &first, claim.Audience)
	if r := askClaim(t, op.url, tok, 0); r.code != http.StatusNoContent {
		t.Fatalf("claim of an unclaimed pod: %d %s, want 204", r.code, r.raw)
	}
	if r := askClaim(t, op.url, podToken(t, &first, "other-audience"), 0); r.code != http.StatusUnauthorized {
		t.Fatalf("claim with a token for another audience: %d %s, want 401", r.code, r.raw)
	}
	if r := askClaim(t, op.url, "not-a-token", 0); r.code != http.StatusUnauthorized {
		t.Fatalf("claim with a forged token: %d %s, want 401", r.code, r.raw)
	}

	// The first pool pod's cli is already waiting when the burst comes.
	waited := make(chan claimResponse, 1)
	go func() { waited <- askClaim(t, op.url, tok, 15) }()
	time.Sleep(100 * time.Millisecond)

	var tasks []*tatarav1.Task
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 3 {
		wg.Go(func() {
			task := newTask(t, ns, fmt.Sprintf("burst-%d", i), "p", tatarav1.KindImplement)
			mu.Lock()
			tasks = append(tasks, task)
			mu.Unlock()
		})
	}
	wg.Wait()
	claimedBy := map[string]string{}
	cold := 0
	for _, task := range tasks {
		var got *tatarav1.Task
		eventually(t, 20*time.Second, "task "+task.Name+" has a pod", func() error {
			got = getTask(t, ns, task.Name)
			if a := got.Status.CurrentAttempt(); a == nil || a.PodUID == "" {
				return fmt.Errorf("no attempt with a pod yet: %+v", got.Status.Attempts)
			}
			return nil
		})
		a := got.Status.CurrentAttempt()
		if !a.Warm {
			cold++
			if a.PodName != agent.PodName(task.Name) {
				t.Errorf("cold task %s runs in pod %s, want %s", task.Name, a.PodName, agent.PodName(task.Name))
			}
			continue
		}
		if other, dup := claimedBy[a.PodName]; dup {
			t.Fatalf("pool pod %s was claimed by both %s and %s", a.PodName, other, task.Name)
		}
		claimedBy[a.PodName] = task.Name
		var pod corev1.Pod
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: a.PodName}, &pod); err != nil {
			t.Fatal(err)
		}
		if owners := pod.OwnerReferences; len(owners) != 1 || owners[0].UID != task.UID || pod.Labels[agent.LabelTask] != task.Name {
			t.Errorf("claimed pod %s: owners %+v, task label %q; want Task %s alone", pod.Name, owners, pod.Labels[agent.LabelTask], task.Name)
		}
		if pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds < agent.ActiveDeadlineSeconds(project) {
			t.Errorf("claimed pod %s has activeDeadlineSeconds %v, want at least the Project's %d", pod.Name, pod.Spec.ActiveDeadlineSeconds, agent.ActiveDeadlineSeconds(project))
		}
	}
	if len(claimedBy) != 2 || cold != 1 {
		t.Fatalf("3 Tasks on a pool of 2: %d claimed %v, %d cold; want 2 and 1", len(claimedBy), claimedBy, cold)
	}
	claims := op.Metrics.WarmPoolClaims
	if c, m := testutil.ToFloat64(claims.WithLabelValues("implement", metrics.ClaimClaimed)),
		testutil.ToFloat64(claims.WithLabelValues("implement", metrics.ClaimEmpty))+testutil.ToFloat64(claims.WithLabelValues("implement", metrics.ClaimLostRace)); c != 2 || m != 1 {
		t.Errorf("warm_pool_claims_total: %v claimed, %v cold (empty or lost_race); want 2 and 1", c, m)
	}

	// The waiting cli heard its claim; a second ask gets the same answer; the token works.
	r := <-waited
	owner := claimedBy[first.Name]
	if owner == "" {
		// The burst took the other pool pod and the cold start: the first one is still waiting.
		if r.code != http.StatusNoContent {
			t.Fatalf("unclaimed pod's wait: %d %s, want 204", r.code, r.raw)
		}
	} else {
		if r.code != http.StatusOK || r.answer.Task != owner || r.answer.Kind != "implement" || r.answer.Project != "p" {
			t.Fatalf("claimed pod's wait: %d %s, want 200 naming task %s", r.code, r.raw, owner)
		}
		if r.answer.Token != token(t, ns, owner) {
			t.Fatal("the claim's token is not the Task's")
		}
		if r.answer.ClaimedAt.Before(first.CreationTimestamp.Time) || r.answer.ClaimedAt.After(time.Now()) {
			t.Errorf("claimedAt %s: want between the pool pod's creation %s and now", r.answer.ClaimedAt, first.CreationTimestamp)
		}
		if want := agent.RepoDir("operator"); r.answer.RepoDir != want || r.answer.Directive == "" {
			t.Fatalf("claim assignment %+v, want repo dir %s and the directive", r.answer.Assignment, want)
		}
		if got := call(t, op.url, http.MethodGet, "/api/v1/tasks/"+owner, r.answer.Token, ""); got.code != http.StatusOK {
			t.Fatalf("task_get with the claimed token: %d %s", got.code, got.raw)
		}
	}
	for podName, task := range claimedBy {
		var pod corev1.Pod
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: podName}, &pod); err != nil {
			t.Fatal(err)
		}
		if r := askClaim(t, op.url, podToken(t, &pod, claim.Audience), 0); r.code != http.StatusOK || r.answer.Task != task {
			t.Fatalf("claim of pod %s: %d %s, want 200 naming %s", podName, r.code, r.raw, task)
		}
	}

	// The pool refills to its size, with new pods.
	refilled := waitPool(t, ns, 2)
	for _, p := range refilled {
		if _, old := claimedBy[p.Name]; old {
			t.Fatalf("claimed pod %s went back to the pool", p.Name)
		}
	}

	// A Task that asks for another ref than the pool's checkout starts cold: the repo has no push
	// configured, so its pods have no git gateway to fetch the ref through
	// (TestWarmPoolFetchesAnotherRef has one).
	other := &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Name: "other-ref", Namespace: ns}, Spec: tatarav1.TaskSpec{
		Kind: tatarav1.KindImplement, ProjectRef: tatarav1.ProjectReference{Name: "p"}, Repo: "operator", Ref: "feature", Directive: "x"}}
	if err := k8s.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if pod := waitPod(t, ns, other.Name); pod.Name != agent.PodName(other.Name) {
		t.Fatalf("task on another ref runs in %s, want its own pod", pod.Name)
	}

	// A claimed pod whose Task was cancelled hears 410: it will never serve. (The finalizer keeps
	// the pod, which the cancel deletes, as a kubelet stopping it would.)
	for podName, task := range claimedBy {
		var pod corev1.Pod
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: podName}, &pod); err != nil {
			t.Fatal(err)
		}
		holdPod(t, &pod)
		tok := podToken(t, &pod, claim.Audience)
		cancelTask(t, ns, task)
		eventually(t, 10*time.Second, "410 for the cancelled task's pod", func() error {
			if r := askClaim(t, op.url, tok, 0); r.code != http.StatusGone {
				return fmt.Errorf("%d %s", r.code, r.raw)
			}
			return nil
		})
		break
	}
}

func cancelTask(t testing.TB, ns, name string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":{"reason":"test"}}}`))
	if err := k8s.Patch(context.Background(), &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, patch); err != nil {
		t.Fatalf("failed to cancel task %s: %v", name, err)
	}
}

// TestWarmPoolReplacesPodsBuiltFromAnOldProject: an edit of the Project replaces every unclaimed
// pool pod, and leaves a claimed one to its Task; removing the pool removes its pods and its
// gauge's series.
func TestWarmPoolReplacesPodsBuiltFromAnOldProject(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p", withWarmPool(2))
	before := waitPool(t, ns, 2)
	task := newTask(t, ns, "claimer", "p", tatarav1.KindImplement)
	var claimed string
	eventually(t, 20*time.Second, "the task claims a pool pod", func() error {
		a := getTask(t, ns, task.Name).Status.CurrentAttempt()
		if a == nil || !a.Warm || a.PodUID == "" {
			return fmt.Errorf("attempt %+v", a)
		}
		claimed = a.PodName
		return nil
	})
	waitPool(t, ns, 2)

	var p tatarav1.Project
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "p"}, &p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Agent.ToolSearch = tatarav1.ToolSearchOn
	if err := k8s.Update(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "every unclaimed pool pod carries the edited Project's template", func() error {
		pods := unclaimedPoolPods(t, ns)
		if len(pods) != 2 {
			return fmt.Errorf("%d unclaimed pool pods", len(pods))
		}
		for _, pod := range pods {
			if v, _ := envValueOf(pod.Spec.Containers[0].Env, agent.ToolSearchEnv); v != "true" {
				return fmt.Errorf("pool pod %s still has %s=%q", pod.Name, agent.ToolSearchEnv, v)
			}
			if slices.ContainsFunc(before, func(b corev1.Pod) bool { return b.UID == pod.UID }) {
				return fmt.Errorf("pool pod %s is from before the edit", pod.Name)
			}
		}
		return nil
	})
	var pod corev1.Pod
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: claimed}, &pod); err != nil {
		t.Fatalf("the claimed pod %s went with the Project's edit: %v", claimed, err)
	}

	// The pool removed: its unclaimed pods go, and so do its gauge's series.
	if n := poolSeries(t, op, ns); n != 3 {
		t.Fatalf("tatara_operator_warm_pool_pods has %d series, want ready, starting and failed of the one pool", n)
	}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "p"}, &p); err != nil {
		t.Fatal(err)
	}
	p.Spec.WarmPool = nil
	if err := k8s.Update(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "no unclaimed pool pod and no pool series", func() error {
		if n := len(unclaimedPoolPods(t, ns)); n != 0 {
			return fmt.Errorf("%d unclaimed pool pods", n)
		}
		if n := poolSeries(t, op, ns); n != 0 {
			return fmt.Errorf("%d gauge series", n)
		}
		return nil
	})
}

// poolSeries counts the series of tatara_operator_warm_pool_pods of namespace ns (the operator
// also serves the Projects earlier tests left in theirs).
func poolSeries(t testing.TB, op *operator, ns string) int {
	t.Helper()
	families, err := op.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		if f.GetName() != "tatara_operator_warm_pool_pods" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == ns {
					n++
				}
			}
		}
	}
	return n
}

func envValueOf(env []corev1.EnvVar, name string) (string, bool) {
	for _, e := range env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// TestWarmPoolRepoMustBeTheProjects: the CRD refuses a pool that clones a repo the Project does
// not have, naming the field.
func TestWarmPoolRepoMustBeTheProjects(t *testing.T) {
	ns := newNamespace(t)
	p := &tatarav1.Project{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: tatarav1.ProjectSpec{
		Repos:    []tatarav1.ProjectRepo{{Name: "operator", URL: "https://git.example.test/tatara/operator.git"}},
		WarmPool: []tatarav1.WarmPool{{Kind: tatarav1.KindImplement, Size: 1, Repo: "nope"}},
	}}
	err := k8s.Create(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "warmPool[].repo must name one of spec.repos") {
		t.Fatalf("create with a pool on an unknown repo: %v, want the CRD's refusal", err)
	}
	p.Spec.WarmPool[0].Repo = "operator"
	p.Spec.WarmPool[0].Size = tatarav1.MaxWarmPoolSize + 1
	if err := k8s.Create(context.Background(), p); err == nil || !strings.Contains(err.Error(), "size") {
		t.Fatalf("create with a pool above %d pods: %v, want the CRD's refusal", tatarav1.MaxWarmPoolSize, err)
	}
}

// TestWarmPoolFetchesAnotherRef: with push configured, a Task on another ref than the pool's
// checkout claims a pool pod, whose claim tells it to fetch that ref, with the Project's depth and
// timeout; a Task on the pool's own ref gets no ref to fetch.
func TestWarmPoolFetchesAnotherRef(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	newProject(t, ns, "p", withWarmPool(1), func(p *tatarav1.Project) {
		p.Spec.Repos[0].Push = &tatarav1.RepoPush{SecretName: "operator-push"}
	})
	for _, tc := range []struct{ name, ref, wantRef string }{
		{"on-feature", "feature", "feature"},
		{"on-main", "main", ""},
	} {
		pod := waitPool(t, ns, 1)[0]
		task := &tatarav1.Task{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns}, Spec: tatarav1.TaskSpec{
			Kind: tatarav1.KindImplement, ProjectRef: tatarav1.ProjectReference{Name: "p"}, Repo: "operator", Ref: tc.ref, Directive: "x"}}
		if err := k8s.Create(context.Background(), task); err != nil {
			t.Fatal(err)
		}
		var a *tatarav1.TaskAttempt
		eventually(t, 20*time.Second, "task "+task.Name+" claims the pool's pod", func() error {
			if a = getTask(t, ns, task.Name).Status.CurrentAttempt(); a == nil || a.PodUID == "" {
				return fmt.Errorf("no attempt with a pod yet")
			}
			return nil
		})
		if !a.Warm || a.PodName != pod.Name {
			t.Fatalf("task %s: attempt %+v, want a claim of pool pod %s", task.Name, a, pod.Name)
		}
		r := askClaim(t, op.url, podToken(t, &pod, claim.Audience), 0)
		if r.code != http.StatusOK || r.answer.Task != task.Name {
			t.Fatalf("claim of pod %s: %d %s, want 200 naming %s", pod.Name, r.code, r.raw, task.Name)
		}
		if got := r.answer.Assignment; got.Ref != tc.wantRef || got.PushBranch != agent.PushBranch(getTask(t, ns, task.Name)) ||
			(tc.wantRef != "" && (got.Depth != agent.DefaultCloneDepth || got.TimeoutSeconds != agent.DefaultCloneTimeoutSeconds)) {
			t.Errorf("task %s's assignment %+v, want ref %q with the default depth and timeout", task.Name, got, tc.wantRef)
		}
	}
}

func withPoolTimes(maxAge, failureHold time.Duration) opOption {
	return func(o *manager.Options) { o.PoolPodMaxAge, o.PoolFailureHold = maxAge, failureHold }
}

// TestWarmPoolReplacesPodsPastTheirAge: an unclaimed pool pod older than the maximum age (its
// checkout that old) is replaced by a new one.
func TestWarmPoolReplacesPodsPastTheirAge(t *testing.T) {
	startOperator(t, withPoolTimes(3*time.Second, 0))
	ns := newNamespace(t)
	newProject(t, ns, "p", withWarmPool(1))
	first := waitPool(t, ns, 1)[0]
	eventually(t, 20*time.Second, "a new pool pod in place of the aged one", func() error {
		pods := unclaimedPoolPods(t, ns)
		if len(pods) != 1 || pods[0].UID == first.UID {
			return fmt.Errorf("unclaimed pool pods %d, the first (%s) still there: %v", len(pods), first.Name,
				len(pods) == 1 && pods[0].UID == first.UID)
		}
		return nil
	})
}

// TestWarmPoolHoldsAFailedPod: a failed pool pod is kept for the hold after it ended, and its
// pool starts no pod meanwhile (so a clone that keeps failing costs one pod per hold, not a
// stream of them); the gauge counts it as failed; after the hold it is replaced.
func TestWarmPoolHoldsAFailedPod(t *testing.T) {
	const hold = 4 * time.Second
	op := startOperator(t, withPoolTimes(0, hold))
	ns := newNamespace(t)
	newProject(t, ns, "p", withWarmPool(1))
	first := waitPool(t, ns, 1)[0]
	failedAt := time.Now()
	setPodStatus(t, &first, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		for i := range s.InitContainerStatuses {
			s.InitContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, FinishedAt: metav1.NewTime(failedAt)}}
		}
	})
	gauge := op.Metrics.WarmPoolPods.WithLabelValues(ns, "p", "implement", "failed")
	eventually(t, 10*time.Second, "the failed pod counted as failed", func() error {
		if v := testutil.ToFloat64(gauge); v != 1 {
			return fmt.Errorf("failed = %v", v)
		}
		return nil
	})
	// Within the hold: still the failed pod, and no other. (The pod's end is recorded in whole
	// seconds, so the operator may count the hold from up to 1 s earlier.)
	for time.Since(failedAt) < hold/2 {
		var pods corev1.PodList
		if err := k8s.List(context.Background(), &pods, client.InNamespace(ns), client.HasLabels{agent.LabelPool}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 || pods.Items[0].UID != first.UID {
			t.Fatalf("%.1fs after the failure: %d pool pods; want only the failed one, held", time.Since(failedAt).Seconds(), len(pods.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
	eventually(t, 20*time.Second, "the failed pod replaced after the hold", func() error {
		pods := unclaimedPoolPods(t, ns)
		if len(pods) != 1 || pods[0].UID == first.UID {
			return fmt.Errorf("%d unclaimed pool pods", len(pods))
		}
		return nil
	})
	if since := time.Since(failedAt); since < hold-time.Second {
		t.Errorf("replaced %.1fs after the failure, before the %s hold", since.Seconds(), hold)
	}
}

// TestWarmPoolReplacesAPodWhoseSidecarRestarted: a pool pod whose cli restarted before any claim
// could never serve a Task (the claiming Task would fail with SidecarRestarted though nothing of
// it ran there): the pool replaces it at once, with no failure hold.
func TestWarmPoolReplacesAPodWhoseSidecarRestarted(t *testing.T) {
	startOperator(t, withPoolTimes(0, time.Hour))
	ns := newNamespace(t)
	newProject(t, ns, "p", withWarmPool(1))
	first := waitPool(t, ns, 1)[0]
	setPodStatus(t, &first, func(s *corev1.PodStatus) {
		for i := range s.InitContainerStatuses {
			if s.InitContainerStatuses[i].Name == agent.CLIContainer {
				s.InitContainerStatuses[i].RestartCount = 1
			}
		}
	})
	eventually(t, 20*time.Second, "the pod whose cli restarted replaced", func() error {
		pods := unclaimedPoolPods(t, ns)
		if len(pods) != 1 || pods[0].UID == first.UID {
			return fmt.Errorf("%d unclaimed pool pods, the first still among them", len(pods))
		}
		return nil
	})
}
