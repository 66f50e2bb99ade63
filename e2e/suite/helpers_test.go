//go:build e2e

package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"tatara.dev/cli/pkg/profiles"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

const (
	// agentNamespace and kindProject are what helmfile's kind environment deploys.
	agentNamespace  = "tatara-agents"
	kindProject     = "kind"
	systemNamespace = "tatara-system"
	cliMetricsPort  = 9091
	wrapperPort     = 9090
	waitTimeout     = 3 * time.Minute
)

// wantTools is what a Task kind's pod must register: its profile in the cli catalog and that
// profile's tool count (the numbers are pinned once, in the catalog's tests).
func wantTools(kind tatarav1.TaskKind) toolsWant {
	profile := profiles.ForKind(string(kind))
	return toolsWant{profile: profile, count: len(profileToolNames(profile))}
}

type toolsWant struct {
	profile string
	count   int
}

func clients(t *testing.T, cfg *envconf.Config) (*resources.Resources, *kubernetes.Clientset) {
	t.Helper()
	r, err := resources.New(cfg.Client().RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := tatarav1.AddToScheme(r.GetScheme()); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return r, cs
}

// profileToolNames is the exact tool list a profile's server must return; "" or unknown is all.
func profileToolNames(profile string) []string {
	set, ok := profiles.Tools(profile)
	if !ok {
		return profiles.All()
	}
	var names []string
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func newTask(name, project string, kind tatarav1.TaskKind, directive string) *tatarav1.Task {
	return &tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: agentNamespace},
		Spec: tatarav1.TaskSpec{Kind: kind, ProjectRef: tatarav1.ProjectReference{Name: project},
			Repo: "demo", Directive: directive},
	}
}

// finishedAgentPod waits until the agent of the Task has exited with code 0 (the wrapper logged
// "agent exited"), its pod either lingering (Running) or Succeeded, and returns the pod.
func finishedAgentPod(ctx context.Context, t *testing.T, r *resources.Resources, cs *kubernetes.Clientset, task *tatarav1.Task) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	var exited []map[string]any
	err := wait.For(func(ctx context.Context) (bool, error) {
		var cur tatarav1.Task
		if err := r.Get(ctx, task.Name, task.Namespace, &cur); err != nil {
			return false, err
		}
		if cur.Status.PodName == "" {
			return false, nil
		}
		var p corev1.Pod
		if err := r.Get(ctx, cur.Status.PodName, task.Namespace, &p); err != nil {
			return false, nil
		}
		logs := podLogs(ctx, cs, &p, "wrapper")
		if p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("agent pod %s failed; wrapper log:\n%s", p.Name, logs)
		}
		exited = logRecords(t, logs, func(rec map[string]any) bool { return rec["msg"] == "agent exited" })
		if len(exited) == 0 {
			return false, nil
		}
		pod = &p
		return true, nil
	}, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(2*time.Second))
	if err != nil {
		t.Fatalf("task %s: %v", task.Name, err)
	}
	if len(exited) != 1 || exited[0]["exit_code"] != float64(0) {
		t.Fatalf("task %s: wrapper 'agent exited' lines = %v, want one with exit_code 0; wrapper log:\n%s", task.Name, exited, podLogs(ctx, cs, pod, "wrapper"))
	}
	return pod
}

func podLogs(ctx context.Context, cs *kubernetes.Clientset, pod *corev1.Pod, container string) string {
	b, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return string(b)
}

// logRecords returns the container's JSON log lines that satisfy match.
func logRecords(t *testing.T, logs string, match func(map[string]any) bool) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if match(rec) {
			out = append(out, rec)
		}
	}
	return out
}

// scrape reads a container's /metrics the way the charts' NOTES.txt tells an SRE to:
// kubectl get --raw /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/metrics
func scrape(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, pod *corev1.Pod, port int) map[string]*dto.MetricFamily {
	t.Helper()
	path := fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:%d/proxy/metrics", pod.Namespace, pod.Name, port)
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s is not Prometheus text: %v", path, err)
	}
	return families
}

// sample returns the value of the series with exactly these labels, and whether it exists.
func sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			if got[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// seriesLabels lists the label sets of a family, for failure messages.
func seriesLabels(families map[string]*dto.MetricFamily, name string) []string {
	var out []string
	for _, m := range families[name].GetMetric() {
		var parts []string
		for _, l := range m.GetLabel() {
			parts = append(parts, l.GetName()+"="+l.GetValue())
		}
		out = append(out, "{"+strings.Join(parts, ",")+"}")
	}
	return out
}

// envValues returns every value of an env var in a container spec, in order.
func envValues(c corev1.Container, name string) []string {
	var vals []string
	for _, e := range c.Env {
		if e.Name == name {
			vals = append(vals, e.Value)
		}
	}
	return vals
}

func container(pod *corev1.Pod, name string) (corev1.Container, bool) {
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		if c.Name == name {
			return c, true
		}
	}
	return corev1.Container{}, false
}

// checkGauge asserts the cli's registered-tools gauge of a running agent pod.
func checkGauge(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, pod *corev1.Pod, label string, want int) {
	t.Helper()
	families := scrape(ctx, t, cs, pod, cliMetricsPort)
	got, ok := sample(families, "tatara_mcp_registered_tools", map[string]string{"profile": label})
	if !ok || got != float64(want) {
		t.Errorf("pod %s: tatara_mcp_registered_tools{profile=%q} = %v (present=%t), want %d; series: %v",
			pod.Name, label, got, ok, want, seriesLabels(families, "tatara_mcp_registered_tools"))
	}
	if n := len(families["tatara_mcp_registered_tools"].GetMetric()); n != 1 {
		t.Errorf("pod %s: %d tatara_mcp_registered_tools series, want exactly 1", pod.Name, n)
	}
}

func deleteTasks(ctx context.Context, t *testing.T, r *resources.Resources, tasks ...*tatarav1.Task) {
	for _, task := range tasks {
		if err := r.Delete(ctx, task); err != nil {
			t.Logf("failed to delete task %s: %v", task.Name, err)
		}
	}
}
