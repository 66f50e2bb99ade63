//go:build e2e

package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// startupPhase is one step of an agent pod's start, ending at the given time.
type startupPhase struct {
	name string
	end  time.Time
}

// startupPhases returns when each step of task's start ended, in order: the pod exists, is
// scheduled, its init containers are done (workspace-init, which also installs the wrapper, or
// wrapper-install without a repo, and the cli and git-gateway sidecars started), the cli serves MCP, the wrapper started the agent, and the agent's
// first MCP request reached the cli. A warm pool pod's start begins with the claim reaching its cli. API timestamps have a resolution of one second; the cli's and
// the wrapper's log timestamps are exact. A step whose time is missing is an error: every started
// agent passes every one.
func startupPhases(ctx context.Context, cs *kubernetes.Clientset, task *tatarav1.Task, pod *corev1.Pod) ([]startupPhase, error) {
	condition := func(t corev1.PodConditionType) (time.Time, error) {
		for _, c := range pod.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				return c.LastTransitionTime.Time, nil
			}
		}
		return time.Time{}, fmt.Errorf("pod %s has no %s=True condition", pod.Name, t)
	}
	logged := func(container, msg string) (time.Time, error) {
		for _, line := range strings.Split(podLogs(ctx, cs, pod, container), "\n") {
			if !strings.Contains(line, `"msg":"`+msg+`"`) {
				continue
			}
			var rec struct {
				Time time.Time `json:"time"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				return time.Time{}, fmt.Errorf("%s log line %q: %w", container, line, err)
			}
			if rec.Time.IsZero() {
				return time.Time{}, fmt.Errorf("%s log line %q has no time", container, line)
			}
			return rec.Time, nil
		}
		return time.Time{}, fmt.Errorf("the %s container of pod %s never logged %q", container, pod.Name, msg)
	}
	// The Initialized condition can be gone from a pod whose agent has exited (seen in CI once the
	// sidecars stopped); the kubelet starts regular containers only after every init container is
	// done, so the first regular container's start stands in for it then.
	initDone := func() (time.Time, error) {
		if at, err := condition(corev1.PodInitialized); err == nil {
			return at, nil
		}
		var first time.Time
		for _, st := range pod.Status.ContainerStatuses {
			if at, ok := startedAt(st); ok && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
		if first.IsZero() {
			return time.Time{}, fmt.Errorf("pod %s has no %s=True condition and no started container", pod.Name, corev1.PodInitialized)
		}
		return first, nil
	}
	type step struct {
		name string
		at   func() (time.Time, error)
	}
	phases := []startupPhase{{"pod created", pod.CreationTimestamp.Time}}
	steps := []step{
		{"scheduled", func() (time.Time, error) { return condition(corev1.PodScheduled) }},
		{"init containers done", initDone},
	}
	if pod.Labels[poolLabel] != "" {
		// A warm start: the pod ran before the Task existed; its start is the claim's delivery.
		phases = nil
		steps = []step{{"claim reached the cli", func() (time.Time, error) { return logged("cli", "pod claimed") }}}
	}
	steps = append(steps,
		step{"cli serving MCP", func() (time.Time, error) { return logged("cli", "mcp server started") }},
		step{"agent started", func() (time.Time, error) { return logged("wrapper", "agent started") }},
		step{"first MCP request", func() (time.Time, error) { return logged("cli", "first mcp request") }},
	)
	for _, step := range steps {
		at, err := step.at()
		if err != nil {
			return nil, fmt.Errorf("task %s, phase %q: %w", task.Name, step.name, err)
		}
		phases = append(phases, startupPhase{step.name, at})
	}
	return phases, nil
}

// submitted holds, per Task name, when the suite sent the Task's create: a sub-second start for
// the startup figures, where the Task's creationTimestamp has whole seconds. The suite and the
// kind node share the machine's clock.
var submitted sync.Map

// createTimed creates task and records when it was sent (submitted).
func createTimed(ctx context.Context, r *resources.Resources, task *tatarav1.Task) error {
	submitted.Store(task.Name, time.Now())
	return r.Create(ctx, task)
}

// startOf is when task's start is measured from: when the suite sent it, else its
// creationTimestamp.
func startOf(task *tatarav1.Task) time.Time {
	if at, ok := submitted.Load(task.Name); ok {
		return at.(time.Time)
	}
	return task.CreationTimestamp.Time
}

// startupSummary collects each kind's phases for the suite's summary (printStartupSummary).
var startupSummary struct {
	sync.Mutex
	rows []string
}

// recordStartup measures task's start and adds one summary row: the time each phase took from the
// end of the one before (from startOf(task) for the first), and the total.
func recordStartup(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, task *tatarav1.Task, pod *corev1.Pod) {
	t.Helper()
	phases, err := startupPhases(ctx, cs, task, pod)
	if err != nil {
		t.Fatal(err)
	}
	if !podInitialized(pod) {
		t.Logf("task %s: pod %s has no Initialized=True condition (conditions %+v); init end taken from its first container start", task.Name, pod.Name, pod.Status.Conditions)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s", task.Spec.Kind)
	start := startOf(task)
	prev := start
	for _, p := range phases {
		// Second-resolution API times can make a later step appear to end before an exact log
		// time: a negative step is shown as 0.
		d := max(p.end.Sub(prev), 0)
		fmt.Fprintf(&b, "  %s %5.1fs", p.name, d.Seconds())
		if p.end.After(prev) {
			prev = p.end
		}
	}
	fmt.Fprintf(&b, "  | total %5.1fs  | init: %s", prev.Sub(start).Seconds(), initBreakdown(pod))
	startupSummary.Lock()
	startupSummary.rows = append(startupSummary.rows, b.String())
	startupSummary.Unlock()
}

// printStartupSummary prints the rows recordStartup collected.
func printStartupSummary() {
	startupSummary.Lock()
	defer startupSummary.Unlock()
	if len(startupSummary.rows) == 0 {
		return
	}
	logf("agent pod startup per kind (each phase from the end of the one before; from when the suite sent the Task, to the millisecond):")
	for _, row := range startupSummary.rows {
		logf("  %s", row)
	}
}

// initBreakdown says what each init container took, in order, to find the largest part of "init
// containers done": a run-to-completion one from its start to its exit, a sidecar (the cli, the
// git gateway) from its start to the start of the container after it.
// One-second resolution, as the API gives it.
func initBreakdown(pod *corev1.Pod) string {
	statuses := append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...)
	var parts []string
	for i, st := range pod.Status.InitContainerStatuses {
		start, ok := startedAt(st)
		var end time.Time
		switch {
		case !ok:
		case !isSidecar(pod, st.Name) && st.State.Terminated != nil:
			end = st.State.Terminated.FinishedAt.Time
		case i+1 < len(statuses):
			end, _ = startedAt(statuses[i+1])
		}
		if end.IsZero() {
			parts = append(parts, st.Name+" -")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0fs", st.Name, end.Sub(start).Seconds()))
	}
	return strings.Join(parts, ", ")
}

// startedAt is when the container last started, running or not.
func podInitialized(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodInitialized {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func startedAt(st corev1.ContainerStatus) (time.Time, bool) {
	switch {
	case st.State.Running != nil:
		return st.State.Running.StartedAt.Time, true
	case st.State.Terminated != nil:
		return st.State.Terminated.StartedAt.Time, true
	}
	return time.Time{}, false
}

func isSidecar(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return false
}
