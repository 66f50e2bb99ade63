//go:build e2e && benchstart

package suite

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestBenchAgentStart is `make bench-start`: N implement Tasks (TATARA_BENCH_START_TASKS, default
// 20) started cold, then N started warm from the Project's pool of one implement pod, one at a time
// on the otherwise idle node, each measured from when it was sent to its agent's first MCP request. Before each, a plain pod (the node's pause image) is measured from create to
// Running, so the figure that matters is the ratio of the two, taken in the same run: these
// machines are shared and noisy. It asserts no time; it fails only when a start fails.
func TestBenchAgentStart(t *testing.T) {
	n := 20
	if v := os.Getenv("TATARA_BENCH_START_TASKS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("TATARA_BENCH_START_TASKS=%q: want a positive number of Tasks", v)
		}
	}
	var project *tatarav1.Project
	f := features.New("agent start bench").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			project = projectCopy(ctx, t, cfg, "bench-start", func(*tatarav1.Project) {})
			return ctx
		}).
		Assess("cold starts against a plain pod's", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			benchStarts(ctx, t, cfg, project, "cold", n, func(int) {})
			return ctx
		}).
		Assess("warm starts against a plain pod's", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			var p tatarav1.Project
			if err := r.Get(ctx, project.Name, project.Namespace, &p); err != nil {
				t.Fatal(err)
			}
			withWarmPool(tatarav1.KindImplement, 1)(&p)
			if err := r.Update(ctx, &p); err != nil {
				t.Fatal(err)
			}
			// Each Task finds the pool's pod ready: what is measured is the claim, not the refill.
			benchStarts(ctx, t, cfg, project, "warm", n, func(int) { claimablePoolPod(ctx, t, r, project.Name, tatarav1.KindImplement) })
			return ctx
		}).
		Teardown(deleting(&project)).Feature()
	testenv.Test(t, f)
}

// benchStarts measures n implement Tasks of project one at a time, each after a plain pod, and
// prints p50/p95 of each and of every phase, and their ratio. before runs before each Task's plain
// pod.
func benchStarts(ctx context.Context, t *testing.T, cfg *envconf.Config, project *tatarav1.Project, mode string, n int, before func(int)) {
	t.Helper()
	r, cs := clients(t, cfg)
	pause := pauseImage(ctx, t, cs)
	var plain, agents []time.Duration
	phases := map[string][]time.Duration{}
	var order []string
	for i := range n {
		before(i)
		plain = append(plain, plainPodStart(ctx, t, r, pause, fmt.Sprintf("bench-plain-%s-%d", mode, i)))
		name := fmt.Sprintf("bench-%s-%d", mode, i)
		total, steps := agentStart(ctx, t, r, cs, newTask(name, project.Name, tatarav1.KindImplement, modelScript(name, "say done")))
		agents = append(agents, total)
		for _, s := range steps {
			if _, seen := phases[s.name]; !seen {
				order = append(order, s.name)
			}
			phases[s.name] = append(phases[s.name], s.took)
		}
		t.Logf("%s start %2d: plain pod %5.2fs, agent %5.2fs", mode, i+1, plain[i].Seconds(), total.Seconds())
	}
	logf("agent start bench, %s: %d implement Tasks one at a time, each after a plain pod (pause image), same node, same run", mode, n)
	logf("  %-26s %8s %8s", "", "p50", "p95")
	row := func(name string, d []time.Duration) {
		logf("  %-26s %7.2fs %7.2fs", name, percentile(d, 50).Seconds(), percentile(d, 95).Seconds())
	}
	row("plain pod create→Running", plain)
	row("Task→first MCP request", agents)
	for _, name := range order {
		row("  "+name, phases[name])
	}
	logf("  ratio agent/plain: p50 %.1f, p95 %.1f", ratio(agents, plain, 50), ratio(agents, plain, 95))
}

// benchPhase is one phase of an agent's start and how long it took after the one before.
type benchPhase struct {
	name string
	took time.Duration
}

// agentStart creates task, waits for its agent's first MCP request, and returns the time from
// when it was sent, with each phase's share (startupPhases). The Task is deleted, and its pod
// gone, before it returns: the next start has the node to itself.
func agentStart(ctx context.Context, t *testing.T, r *resources.Resources, cs *kubernetes.Clientset, task *tatarav1.Task) (time.Duration, []benchPhase) {
	t.Helper()
	if err := createTimed(ctx, r, task); err != nil {
		t.Fatal(err)
	}
	pod := finishedAgentPod(ctx, t, r, cs, task)
	steps, err := startupPhases(ctx, cs, task, pod)
	if err != nil {
		t.Fatal(err)
	}
	start := startOf(task)
	prev, out := start, []benchPhase{}
	for _, s := range steps {
		out = append(out, benchPhase{s.name, max(s.end.Sub(prev), 0)})
		if s.end.After(prev) {
			prev = s.end
		}
	}
	deleteTasks(ctx, t, r, task)
	gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	// The agent has exited; what is left (the final scrape's wait) is not measured.
	if err := r.Delete(ctx, gone, resources.WithGracePeriod(0)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting pod %s: %v", pod.Name, err)
	}
	if err := wait.For(conditions.New(r).ResourceDeleted(gone), wait.WithContext(ctx), wait.WithTimeout(waitTimeout)); err != nil {
		t.Fatalf("pod %s not gone: %v", pod.Name, err)
	}
	return prev.Sub(start), out
}

// plainPodStart creates a pod running only the pause image and returns the time from its create
// to the suite seeing it Running; the pod is deleted before it returns.
func plainPodStart(ctx context.Context, t *testing.T, r *resources.Resources, image, name string) time.Duration {
	t.Helper()
	// Requests and a memory limit, but no CPU limit, like every container of the agent pod: a CPU
	// limit this small throttles runc's own setup of the container, which runs in its cgroup, and
	// stretched this pod's start from under 1 s to over 10 s.
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	limits := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: agentNamespace},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "pause", Image: image, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	start := time.Now()
	if err := r.Create(ctx, pod); err != nil {
		t.Fatalf("plain pod: %v", err)
	}
	err := wait.For(conditions.New(r).PodPhaseMatch(pod, corev1.PodRunning), wait.WithContext(ctx),
		wait.WithTimeout(waitTimeout), wait.WithInterval(20*time.Millisecond))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("plain pod %s never ran: %v", name, err)
	}
	if err := r.Delete(ctx, pod, resources.WithGracePeriod(0)); err != nil {
		t.Fatal(err)
	}
	if err := wait.For(conditions.New(r).ResourceDeleted(pod), wait.WithContext(ctx), wait.WithTimeout(waitTimeout)); err != nil {
		t.Fatalf("plain pod %s not gone: %v", name, err)
	}
	return took
}

// pauseImage is the pause image the node has (its pod sandbox image), read from the node's image
// list, so the plain pod needs no pull and no image name is written here.
func pauseImage(ctx context.Context, t *testing.T, cs *kubernetes.Clientset) string {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes.Items {
		for _, img := range node.Status.Images {
			for _, name := range img.Names {
				if i := strings.LastIndex(name, "/pause:"); i >= 0 && !strings.Contains(name, "@") {
					return name
				}
			}
		}
	}
	t.Fatal("no node lists a pause image")
	return ""
}

// percentile is the nearest-rank p-th percentile of d.
func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(i, 0)]
}

func ratio(a, b []time.Duration, p int) float64 {
	return percentile(a, p).Seconds() / percentile(b, p).Seconds()
}

// withWarmPool returns a mutation: the Project keeps size ready pods for kind, cloning the demo repo.
func withWarmPool(kind tatarav1.TaskKind, size int32) func(*tatarav1.Project) {
	return func(p *tatarav1.Project) {
		p.Spec.WarmPool = []tatarav1.WarmPool{{Kind: kind, Size: size, Repo: demoRepo}}
	}
}
