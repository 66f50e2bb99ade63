//go:build e2e

package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"tatara.dev/cli/pkg/agentpod"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

const (
	operatorDeployment = "tatara-operator"
	// operatorLease is the operator's leader-election Lease (the manager's LeaderElectionID).
	operatorLease = "tatara-operator.tatara.dev"
	// releaseFile is what a waiting agent's shell polls for: the suite creates it to let the
	// agent finish its script.
	releaseFile = "/tmp/e2e-release"
	// loadInterval is the agent load's pace: about 10 operator tool calls a second.
	loadInterval = 100 * time.Millisecond
)

// waitingAgentScript calls the operator, waits in its shell until the suite creates releaseFile
// (at most 9 minutes), then calls the operator again and ends: a Task that spans whatever the
// suite does to the operator meanwhile.
func waitingAgentScript(id string) string {
	wait, _ := json.Marshal(map[string]any{ // a map of strings and a number always marshals
		"command":     fmt.Sprintf("for i in $(seq 540); do [ -e %s ] && exit 0; sleep 1; done; exit 1", releaseFile),
		"description": "wait for the suite",
		"timeout":     600000,
	})
	return modelScript(id,
		`call task_get {}`,
		"call Bash "+string(wait),
		`call task_note {"text":"the operator answered before and after"}`,
		"say done")
}

// waitingAgent starts a Task running waitingAgentScript, in a copy of the demo Project changed by
// mutate, and returns it with its pod once the agent is in its shell step (its first operator call
// made).
func waitingAgent(ctx context.Context, t *testing.T, cfg *envconf.Config, name string, mutate ...func(*tatarav1.Project)) (*tatarav1.Task, *corev1.Pod) {
	t.Helper()
	r, cs := clients(t, cfg)
	project := projectCopy(ctx, t, cfg, name, func(p *tatarav1.Project) {
		withToolSearch(tatarav1.ToolSearchOff)(p)
		for _, m := range mutate {
			m(p)
		}
	})
	t.Cleanup(func() { deleteProjects(context.Background(), t, r, project) })
	task := newTask(name, project.Name, tatarav1.KindImplement, waitingAgentScript(name))
	if err := r.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	return task, agentStarted(ctx, t, r, cs, task, "")
}

// agentStarted waits until the agent in the Task's pod has made its first MCP request, in a pod
// other than the one with uid before (none when empty), and returns that pod.
func agentStarted(ctx context.Context, t *testing.T, r *resources.Resources, cs *kubernetes.Clientset, task *tatarav1.Task, before types.UID) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	err := wait.For(func(ctx context.Context) (bool, error) {
		if found, err := taskPod(ctx, r, task, &pod); !found || pod.UID == before {
			return false, err
		}
		return strings.Contains(podLogs(ctx, cs, &pod, "cli"), `"msg":"first mcp request"`), nil
	}, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(time.Second))
	if err != nil {
		t.Fatalf("task %s: the agent never made its first MCP request in a pod other than %q: %v", task.Name, before, err)
	}
	return &pod
}

// releaseAgent lets a waitingAgent finish, and checks that its Task Succeeded and that no tool
// call of the real agent failed.
func releaseAgent(ctx context.Context, t *testing.T, cfg *envconf.Config, task *tatarav1.Task, pod *corev1.Pod) {
	t.Helper()
	r, cs := clients(t, cfg)
	var stdout, stderr bytes.Buffer
	if err := r.ExecInPod(ctx, pod.Namespace, pod.Name, "wrapper", []string{"touch", releaseFile}, &stdout, &stderr); err != nil {
		t.Fatalf("releasing the agent of %s: %v %s", task.Name, err, stderr.String())
	}
	if cur := terminalTask(ctx, t, r, task); cur.Status.Phase != tatarav1.PhaseSucceeded {
		t.Errorf("task %s ended %s (%+v), want Succeeded", task.Name, cur.Status.Phase, cur.Status.Conditions)
	}
	recs := modelRecords(ctx, t, cs, task.Name)
	if len(recs) == 0 {
		t.Fatalf("the model stand-in recorded no request of %s", task.Name)
	}
	last := recs[len(recs)-1]
	if len(last.ToolErrors) > 0 {
		t.Errorf("the real agent of %s saw tool errors: %v", task.Name, last.ToolErrors)
	}
	if last.Answer != "text" {
		t.Errorf("the real agent of %s did not reach its script's end: the last answer was %q (step %d)", task.Name, last.Answer, last.Step)
	}
}

// startLoad forwards a local port to the pod's cli and calls the operator through it every
// loadInterval until the returned stop is called; stop returns what the agent saw.
func startLoad(ctx context.Context, t *testing.T, cfg *envconf.Config, task *tatarav1.Task, pod *corev1.Pod) (stop func() loadSummary) {
	t.Helper()
	fwdCtx, cancelFwd := context.WithCancel(ctx)
	_, mcpPort, err := net.SplitHostPort(agentpod.MCPListen)
	if err != nil {
		t.Fatal(err)
	}
	port := forwardToPod(fwdCtx, t, cfg.Client().RESTConfig(), pod, mcpPort)
	load := newAgentLoad(fwdCtx, t, fmt.Sprintf("http://127.0.0.1:%d%s", port, agentpod.MCPPath), task.Name)
	loadCtx, stopLoad := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		load.run(loadCtx, loadInterval)
	}()
	return func() loadSummary {
		stopLoad()
		<-done
		cancelFwd()
		return load.summary()
	}
}

// restartOperator does what kubectl rollout restart does, and waits until the rollout is complete:
// every replica updated and available, and no old pod left, terminating ones included.
func restartOperator(ctx context.Context, t *testing.T, r *resources.Resources, cs *kubernetes.Clientset) time.Duration {
	t.Helper()
	start := time.Now()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, start.Format(time.RFC3339Nano))
	if _, err := cs.AppsV1().Deployments(systemNamespace).Patch(ctx, operatorDeployment, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("restarting the operator: %v", err)
	}
	waitOperatorSettled(ctx, t, r, cs)
	return time.Since(start)
}

// waitOperatorSettled waits until the operator Deployment's rollout is complete and only its
// current pods exist.
func waitOperatorSettled(ctx context.Context, t *testing.T, r *resources.Resources, cs *kubernetes.Clientset) {
	t.Helper()
	var last string
	err := wait.For(func(ctx context.Context) (bool, error) {
		var dep appsv1.Deployment
		if err := r.Get(ctx, operatorDeployment, systemNamespace, &dep); err != nil {
			return false, err
		}
		want := *dep.Spec.Replicas
		st := dep.Status
		last = fmt.Sprintf("generation %d observed %d, replicas %d updated %d available %d", dep.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.AvailableReplicas)
		if st.ObservedGeneration < dep.Generation || st.UpdatedReplicas != want || st.AvailableReplicas != want || st.Replicas != want {
			return false, nil
		}
		pods, err := cs.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tatara-operator,app.kubernetes.io/component=operator"})
		if err != nil {
			return false, err
		}
		last += fmt.Sprintf(", %d pods", len(pods.Items))
		return len(pods.Items) == int(want), nil
	}, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(500*time.Millisecond))
	if err != nil {
		t.Fatalf("the operator rollout did not complete: %v (%s)", err, last)
	}
}

// checkLoad fails the test on any failed call and on a load that never reached the operator.
func checkLoad(t *testing.T, what string, s loadSummary, minCalls int) {
	t.Helper()
	logf("%s: %s", what, s)
	if s.failed > 0 {
		t.Errorf("%s: %d of %d operator tool calls failed, e.g.:\n%s", what, s.failed, s.calls, strings.Join(s.failures, "\n"))
	}
	if s.calls < minCalls {
		t.Errorf("%s: only %d calls were made, want at least %d", what, s.calls, minCalls)
	}
}

// checkNotesKept fails the test unless every note the agent was told was recorded is in the Task:
// kept in status.notes or counted in status.notesDropped, none lost to a replica that went away
// and none recorded twice by the cli's retries. The agent's script writes no note before it is
// released.
func checkNotesKept(ctx context.Context, t *testing.T, r *resources.Resources, task *tatarav1.Task, s loadSummary) {
	t.Helper()
	var cur tatarav1.Task
	if err := r.Get(ctx, task.Name, task.Namespace, &cur); err != nil {
		t.Fatal(err)
	}
	kept, dropped := len(cur.Status.Notes), cur.Status.NotesDropped
	logf("notes: %d recorded as the agent was told, %d kept + %d dropped in the Task", s.notes, kept, dropped)
	if int64(kept)+dropped != int64(s.notes) {
		t.Errorf("the agent was told %d notes were recorded; the Task keeps %d and counts %d dropped", s.notes, kept, dropped)
	}
}

// TestOperatorRollouts: ten rollouts of the operator while an agent calls it about ten times a
// second through its cli; not one call fails, and the Task of the real agent that spans them
// Succeeds with no tool error.
func TestOperatorRollouts(t *testing.T) {
	aloneFeature(t)
	const name = "rollouts"
	var task *tatarav1.Task
	var pod *corev1.Pod
	var reports int // report_internal_issue calls the load made
	f := features.New("operator rollouts under agent load").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			task, pod = waitingAgent(ctx, t, cfg, name)
			return ctx
		}).
		Assess("10 rollouts, 0 failed tool calls", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			stop := startLoad(ctx, t, cfg, task, pod)
			var took []string
			start := time.Now()
			for i := range 10 {
				d := restartOperator(ctx, t, r, cs)
				took = append(took, fmt.Sprintf("%d: %.1fs", i+1, d.Seconds()))
			}
			time.Sleep(2 * time.Second) // calls in flight at the last rollout's end
			s := stop()
			reports = s.reports
			logf("10 operator rollouts in %.0fs (%s)", time.Since(start).Seconds(), strings.Join(took, ", "))
			checkLoad(t, "agent load during 10 operator rollouts", s, int(time.Since(start)/loadInterval)/2)
			checkNotesKept(ctx, t, r, task, s)
			return ctx
		}).
		Assess("the real agent's Task spans the rollouts and Succeeds", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			releaseAgent(ctx, t, cfg, task, pod)
			return ctx
		}).
		Assess("each report sent during the rollouts is recorded once", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			ended := terminalPod(ctx, t, r, task) // its cli has sent what it had
			checkReportsRecordedOnce(ctx, t, r, cs, task, ended, reports)
			return ctx
		}).
		Teardown(deleting(&task)).Feature()
	testenv.Test(t, f)
}

// checkReportsRecordedOnce: the load's reports of one problem are one record counting each report
// exactly once (a try repeated across a rollout is not counted again, none is lost), and the cli
// logged no report as not recorded.
func checkReportsRecordedOnce(ctx context.Context, t *testing.T, r *resources.Resources, cs *kubernetes.Clientset, task *tatarav1.Task, pod *corev1.Pod, sent int) {
	t.Helper()
	if sent == 0 {
		t.Fatal("the load sent no report during the rollouts")
	}
	records := projectIssues(ctx, t, r, task.Spec.ProjectRef.Name)
	logf("reports during the rollouts: %d sent, recorded as %v", sent, describeIssues(records))
	if len(records) != 1 || records[0].Status.Count != int64(sent) {
		t.Errorf("records of %s: %v; want one counting the %d reports sent", task.Spec.ProjectRef.Name, describeIssues(records), sent)
	}
	if lost := logRecords(t, podLogs(ctx, cs, pod, "cli"), func(rec map[string]any) bool {
		return rec["msg"] == "internal issue not recorded by the operator"
	}); len(lost) > 0 {
		t.Errorf("the cli did not get reports recorded: %v", lost)
	}
}

// TestLeaderFailover: the operator's leader is deleted in the middle of a Task while an agent
// calls the operator; another replica holds the Lease within the Lease's duration, no call fails,
// and the Task Succeeds (reconciled by the new leader).
func TestLeaderFailover(t *testing.T) {
	aloneFeature(t)
	const name = "failover"
	var task *tatarav1.Task
	var pod *corev1.Pod
	f := features.New("leader failover").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			task, pod = waitingAgent(ctx, t, cfg, name)
			return ctx
		}).
		Assess("another replica takes the lease, no call fails", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			var dep appsv1.Deployment
			if err := r.Get(ctx, operatorDeployment, systemNamespace, &dep); err != nil {
				t.Fatal(err)
			}
			if *dep.Spec.Replicas < 2 {
				t.Fatalf("the operator runs %d replica(s): a failover needs 2 (helmfile's kind environment, operator.replicas)", *dep.Spec.Replicas)
			}
			var lease coordinationv1.Lease
			if err := r.Get(ctx, operatorLease, systemNamespace, &lease); err != nil {
				t.Fatalf("the operator's Lease: %v", err)
			}
			leader := leaseHolderPod(lease)
			duration := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
			// The leader hands the lease over when it stops, after its preStop sleep: the
			// lease duration counts from then.
			var preStop time.Duration
			for _, c := range dep.Spec.Template.Spec.Containers {
				if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
					preStop = max(preStop, time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second)
				}
			}
			stop := startLoad(ctx, t, cfg, task, pod)
			time.Sleep(2 * time.Second)
			killed := time.Now()
			if err := cs.CoreV1().Pods(systemNamespace).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting the leader %s: %v", leader, err)
			}
			var next string
			err := wait.For(func(ctx context.Context) (bool, error) {
				if err := r.Get(ctx, operatorLease, systemNamespace, &lease); err != nil {
					return false, err
				}
				next = leaseHolderPod(lease)
				return next != "" && next != leader, nil
			}, wait.WithContext(ctx), wait.WithTimeout(preStop+2*duration), wait.WithInterval(100*time.Millisecond))
			took := time.Since(killed)
			if err != nil {
				t.Fatalf("no other replica took the lease from %s within %s: %v", leader, preStop+2*duration, err)
			}
			logf("leader failover: %s -> %s in %.1fs after the delete (preStop %s, lease duration %s)", leader, next, took.Seconds(), preStop, duration)
			if took > preStop+duration {
				t.Errorf("the lease moved %s after the delete, more than the preStop sleep %s and the lease duration %s", took.Round(100*time.Millisecond), preStop, duration)
			}
			waitOperatorSettled(ctx, t, r, cs)
			time.Sleep(2 * time.Second)
			s := stop()
			checkLoad(t, "agent load during a leader failover", s, 20)
			checkNotesKept(ctx, t, r, task, s)
			return ctx
		}).
		Assess("the Task Succeeds under the new leader", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			releaseAgent(ctx, t, cfg, task, pod)
			return ctx
		}).
		Teardown(deleting(&task)).Feature()
	testenv.Test(t, f)
}

// leaseHolderPod is the pod name in a controller-runtime holder identity (<pod>_<uuid>).
func leaseHolderPod(l coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	pod, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
	return pod
}
