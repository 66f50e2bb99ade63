//go:build e2e

package suite

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// TestLostNode: the node under a running Task stops answering (its kubelet is stopped: the one
// node of the kind cluster cannot be stopped whole without the control plane, and a kubelet that
// no longer reports is what the node controller sees of a dead machine). Once the node controller
// has marked the node not Ready and the operator's bound (--node-lost-after, its default) has
// passed, the attempt ends NodeLost, the lost pod is deleted at once and, since the Project allows
// a retry, the second attempt starts when the node is back and runs the real agent to the end. The
// kubelet, back, kills the first pod's containers. The suite prints how long each step took.
//
// Alone: with the kubelet stopped no pod of any feature starts or reports.
func TestLostNode(t *testing.T) {
	aloneFeature(t)
	const name = "node-lost"
	var task *tatarav1.Task
	var first *corev1.Pod
	f := features.New("a lost node ends its attempt, the retry runs").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			task, first = waitingAgent(ctx, t, cfg, name, func(p *tatarav1.Project) { p.Spec.Agent.RetryOnPodLoss = true })
			return ctx
		}).
		Assess("the attempt ends NodeLost within the bound, the retry runs to the end", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			node := first.Spec.NodeName
			kubelet := func(action string) {
				t.Helper()
				if out, err := exec.CommandContext(ctx, "docker", "exec", node, "systemctl", action, "kubelet").CombinedOutput(); err != nil {
					t.Fatalf("systemctl %s kubelet on %s: %v: %s", action, node, err, out)
				}
			}
			// Whatever fails below, the node gets its kubelet back for the features after this one.
			t.Cleanup(func() { _ = exec.Command("docker", "exec", node, "systemctl", "start", "kubelet").Run() })
			stopped := time.Now()
			kubelet("stop")

			var notReadyAt time.Time
			waitFor(ctx, t, "the node controller marks "+node+" not Ready", func(ctx context.Context) (bool, error) {
				var n corev1.Node
				if err := r.Get(ctx, node, "", &n); err != nil {
					return false, err
				}
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
						notReadyAt = c.LastTransitionTime.Time
						return true, nil
					}
				}
				return false, nil
			})
			var lost tatarav1.TaskAttempt
			waitFor(ctx, t, "attempt 1 of "+task.Name+" ends NodeLost", func(ctx context.Context) (bool, error) {
				var cur tatarav1.Task
				if err := r.Get(ctx, task.Name, task.Namespace, &cur); err != nil {
					return false, err
				}
				if len(cur.Status.Attempts) == 0 || !cur.Status.Attempts[0].Finished() {
					return false, nil
				}
				lost = cur.Status.Attempts[0]
				return true, nil
			})
			lostAfter := time.Since(stopped)
			if lost.Reason != tatarav1.ReasonNodeLost || !strings.Contains(lost.Message, "lost with its node "+node) {
				t.Fatalf("attempt 1 ended %s: %s; want NodeLost naming node %s", lost.Reason, lost.Message, node)
			}
			if lost.FinishedAt.Time.Before(notReadyAt) {
				t.Errorf("attempt 1 ended at %v, before its node was not Ready (%v)", lost.FinishedAt, notReadyAt)
			}
			waitFor(ctx, t, "the lost pod deleted", func(ctx context.Context) (bool, error) {
				var p corev1.Pod
				err := r.Get(ctx, first.Name, first.Namespace, &p)
				return err != nil || p.UID != first.UID, nil
			})
			logf("lost node: kubelet of %s stopped; the node not Ready after %s (node controller), attempt 1 lost after %s (then %s more: the operator's bound)",
				node, notReadyAt.Sub(stopped).Round(time.Second), lostAfter.Round(time.Second), lost.FinishedAt.Sub(notReadyAt).Round(time.Second))

			restarted := time.Now()
			kubelet("start")
			var scheduling string // what the retry's pod says of its scheduling, for a failure
			waitFor(ctx, t, "attempt 2's pod bound to a node", func(ctx context.Context) (bool, error) {
				var p corev1.Pod
				if found, err := taskPod(ctx, r, task, &p); !found || p.UID == first.UID {
					scheduling = "no pod of attempt 2 yet"
					return false, err
				}
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled {
						scheduling = fmt.Sprintf("pod %s: %s %s %s", p.UID, c.Status, c.Reason, c.Message)
					}
				}
				return p.Spec.NodeName != "", nil
			}, func() string { return scheduling })
			second := agentStarted(ctx, t, r, cs, task, first.UID)
			logf("lost node: kubelet back; attempt 2's agent made its first MCP request %s later", time.Since(restarted).Round(time.Second))
			releaseAgent(ctx, t, cfg, task, second)

			waitFor(ctx, t, "the first pod's containers gone from "+node, func(ctx context.Context) (bool, error) {
				out, err := exec.CommandContext(ctx, "docker", "exec", node, "crictl", "ps", "-q", "--label", "io.kubernetes.pod.uid="+string(first.UID)).CombinedOutput()
				if err != nil {
					return false, nil
				}
				return strings.TrimSpace(string(out)) == "", nil
			})
			return ctx
		}).
		Teardown(deleting(&task))
	testenv.Test(t, f.Feature())
}

// waitFor waits up to waitTimeout for cond, and fails the test naming what it waited for and what
// last said (when given) of the state it saw.
func waitFor(ctx context.Context, t *testing.T, what string, cond func(context.Context) (bool, error), last ...func() string) {
	t.Helper()
	if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(time.Second)); err != nil {
		seen := ""
		for _, l := range last {
			seen += "; last seen: " + l()
		}
		t.Fatalf("waiting until %s: %v%s", what, err, seen)
	}
}
