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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/k8s"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"tatara.dev/cli/pkg/agentpod"
	"tatara.dev/cli/pkg/profiles"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

const (
	// agentNamespace and kindProject are what helmfile's kind environment deploys.
	agentNamespace  = "tatara-agents"
	kindProject     = "kind"
	systemNamespace = "tatara-system"
	cliMetricsPort  = agentpod.CLIMetricsPort
	wrapperPort     = agentpod.WrapperMetricsPort
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

// registerTypes adds the suite's API types to the scheme every resources.Resources shares
// (client-go's global one), once: features run side by side, and a scheme's maps are not safe for
// concurrent writes.
func registerTypes(s *runtime.Scheme) error {
	typesOnce.Do(func() {
		for _, add := range []func(*runtime.Scheme) error{tatarav1.AddToScheme, apiextensionsv1.AddToScheme} {
			if typesErr = add(s); typesErr != nil {
				return
			}
		}
	})
	return typesErr
}

var (
	typesOnce sync.Once
	typesErr  error
)

func clients(t *testing.T, cfg *envconf.Config) (*resources.Resources, *kubernetes.Clientset) {
	t.Helper()
	r, err := resources.New(cfg.Client().RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := registerTypes(r.GetScheme()); err != nil {
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
// "agent exited"), its pod either lingering (Running) or Succeeded, and returns the pod once its
// status says so too: the kubelet writes a pod's status after the fact, and a short agent can be
// done before the API shows its container started.
func finishedAgentPod(ctx context.Context, t *testing.T, r *resources.Resources, cs *kubernetes.Clientset, task *tatarav1.Task) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	var exited []map[string]any
	err := wait.For(func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		if found, err := taskPod(ctx, r, task, &p); !found {
			return false, err
		}
		logs := podLogs(ctx, cs, &p, "wrapper")
		if p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("agent pod %s failed; wrapper log:\n%s", p.Name, logs)
		}
		exited = logRecords(t, logs, func(rec map[string]any) bool { return rec["msg"] == "agent exited" })
		if len(exited) == 0 {
			return false, nil
		}
		if i := slices.IndexFunc(p.Status.ContainerStatuses, func(st corev1.ContainerStatus) bool { return st.Name == "wrapper" }); i < 0 {
			return false, nil
		} else if _, started := startedAt(p.Status.ContainerStatuses[i]); !started {
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

func deleteTasks(ctx context.Context, t *testing.T, r *resources.Resources, tasks ...*tatarav1.Task) {
	for _, task := range tasks {
		if err := r.Delete(ctx, task); err != nil {
			t.Logf("failed to delete task %s: %v", task.Name, err)
		}
	}
}

// deleting is a feature's teardown: it deletes the Tasks and Projects its arguments point to, as
// Setup left them (each a **Task, *[]*Task, **Project or *[]*Project; nil ones are skipped).
func deleting(refs ...any) features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		r, _ := clients(t, cfg)
		var tasks []*tatarav1.Task
		var projects []*tatarav1.Project
		for _, ref := range refs {
			switch ref := ref.(type) {
			case **tatarav1.Task:
				tasks = append(tasks, *ref)
			case *[]*tatarav1.Task:
				tasks = append(tasks, *ref...)
			case **tatarav1.Project:
				projects = append(projects, *ref)
			case *[]*tatarav1.Project:
				projects = append(projects, *ref...)
			default:
				t.Fatalf("deleting: %T is not a pointer to Tasks or Projects", ref)
			}
		}
		deleteTasks(ctx, t, r, slices.DeleteFunc(tasks, func(x *tatarav1.Task) bool { return x == nil })...)
		deleteProjects(ctx, t, r, slices.DeleteFunc(projects, func(x *tatarav1.Project) bool { return x == nil })...)
		return ctx
	}
}

// taskPod reads the Task's current agent pod into pod: found is false while the Task names none
// yet or the pod is not in the API yet; err only when the Task cannot be read.
func taskPod(ctx context.Context, r *resources.Resources, task *tatarav1.Task, pod *corev1.Pod) (found bool, err error) {
	var cur tatarav1.Task
	if err := r.Get(ctx, task.Name, task.Namespace, &cur); err != nil {
		return false, err
	}
	if cur.Status.PodName == "" {
		return false, nil
	}
	return r.Get(ctx, cur.Status.PodName, task.Namespace, pod) == nil, nil
}

// terminalPod waits until the Task's agent pod has ended, and fails unless it Succeeded.
func terminalPod(ctx context.Context, t *testing.T, r *resources.Resources, task *tatarav1.Task) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	err := wait.For(func(ctx context.Context) (bool, error) {
		if found, err := taskPod(ctx, r, task, &pod); !found {
			return false, err
		}
		return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
	}, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(2*time.Second))
	if err != nil || pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("task %s: agent pod %s phase %s, want Succeeded (%v)", task.Name, pod.Name, pod.Status.Phase, err)
	}
	return &pod
}

// createOrKeep creates objs in order. On a reused cluster (E2E_KEEP_CLUSTER=1) an object that
// exists is kept, except a Deployment whose images differ from obj's: it is deleted and created
// again, so a changed stand-in image is deployed and an unchanged one is not restarted.
func createOrKeep(ctx context.Context, r *resources.Resources, objs ...k8s.Object) error {
	for _, obj := range objs {
		err := r.Create(ctx, obj)
		if err == nil {
			continue
		}
		if !reusedCluster || !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create %T %s: %w", obj, obj.GetName(), err)
		}
		want, ok := obj.(*appsv1.Deployment)
		if !ok {
			continue
		}
		var have appsv1.Deployment
		if err := r.Get(ctx, want.Name, want.Namespace, &have); err != nil {
			return fmt.Errorf("failed to read the kept Deployment %s: %w", want.Name, err)
		}
		if slices.Equal(images(have.Spec.Template.Spec.Containers), images(want.Spec.Template.Spec.Containers)) {
			logf("  kept Deployment %s/%s (same images)", want.Namespace, want.Name)
			continue
		}
		if err := r.Delete(ctx, &have); err != nil {
			return fmt.Errorf("failed to delete the kept Deployment %s: %w", want.Name, err)
		}
		if err := wait.For(conditions.New(r).ResourceDeleted(&have), wait.WithContext(ctx), wait.WithTimeout(waitTimeout)); err != nil {
			return fmt.Errorf("the kept Deployment %s was not deleted: %w", want.Name, err)
		}
		if err := r.Create(ctx, want); err != nil {
			return fmt.Errorf("failed to create %T %s: %w", want, want.Name, err)
		}
		logf("  replaced Deployment %s/%s (its images changed)", want.Namespace, want.Name)
	}
	return nil
}

func images(cs []corev1.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Image)
	}
	return out
}
