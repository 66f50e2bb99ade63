//go:build e2e

package suite

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// poolLabel marks a warm pool pod (its value is the pool's kind); a claimed pod also carries the
// Task's labels.
const poolLabel = "tatara.dev/pool"

// withWarmPool returns a mutation: the Project keeps size ready pods for kind, cloning the demo repo.
func withWarmPool(kind tatarav1.TaskKind, size int32) func(*tatarav1.Project) {
	return func(p *tatarav1.Project) {
		p.Spec.WarmPool = []tatarav1.WarmPool{{Kind: kind, Size: size, Repo: demoRepo}}
	}
}

// claimablePoolPod waits for a pool pod of project that a Task could claim now: not claimed, its
// clone done, its containers running. An unclaimed pool pod's cli logs that it waits.
func claimablePoolPod(ctx context.Context, t *testing.T, r *resources.Resources, project string) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	err := wait.For(func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := r.List(ctx, &pods, resources.WithLabelSelector("tatara.dev/project="+project+","+poolLabel+",!tatara.dev/task")); err != nil {
			return false, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Namespace != agentNamespace || !p.DeletionTimestamp.IsZero() || p.Status.Phase != corev1.PodRunning {
				continue
			}
			ready := len(p.Status.ContainerStatuses) > 0
			for _, s := range p.Status.InitContainerStatuses {
				if s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 {
					return false, fmt.Errorf("pool pod %s: init container %s failed: %+v", p.Name, s.Name, s.State.Terminated)
				}
				ready = ready && (s.State.Terminated != nil || s.State.Running != nil)
			}
			for _, s := range p.Status.ContainerStatuses {
				ready = ready && s.State.Running != nil
			}
			if ready {
				found = p
				return true, nil
			}
		}
		return false, nil
	}, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(200*time.Millisecond))
	if err != nil {
		t.Fatalf("no claimable pool pod of project %s: %v", project, err)
	}
	return found
}

// TestWarmStart: a Project's warm pool keeps a running pod that holds nothing of any Task; an
// implement Task claims it, and its agent works in the pool's clone as the Task's own: it commits
// under the Task's name and pushes to the Task's branch through the gateway, which learned the
// branch from the claim. The claimed pod never held the Task's token where the agent can read it,
// and the pool starts a new pod.
func TestWarmStart(t *testing.T) {
	sharedFeature(t)
	const name = "warm-start"
	var project *tatarav1.Project
	var task *tatarav1.Task
	var pool *corev1.Pod
	f := features.New("warm start from the pool").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			project = projectCopy(ctx, t, cfg, "warm", func(p *tatarav1.Project) {
				withWarmPool(tatarav1.KindImplement, 1)(p)
				p.Spec.Agent.ExtraEnvs = append(p.Spec.Agent.ExtraEnvs, corev1.EnvVar{Name: "TATARA_WRAPPER_LINGER", Value: "10m"})
			})
			pool = claimablePoolPod(ctx, t, r, project.Name)
			for _, c := range append(pool.Spec.InitContainers, pool.Spec.Containers...) {
				for _, e := range c.Env {
					if e.Name == "TATARA_TASK" || e.Name == "TATARA_TOKEN" || e.Name == "TATARA_DIRECTIVE" {
						t.Errorf("pool pod %s: container %s has %s before any claim", pool.Name, c.Name, e.Name)
					}
				}
			}
			file := "/workspace/" + demoRepo + "/" + demoFile
			task = newTask(name, project.Name, tatarav1.KindImplement, modelScript(name,
				fmt.Sprintf(`call Edit {"file_path":%q,"old_string":%q,"new_string":%q}`, file, demoLine, agentsLine),
				`call Bash {"command":"git commit -q -am 'greeting: from a warm pod' && git log -1 --format=%an","description":"Commit"}`,
				`call Bash {"command":"git push -q origin HEAD 2>&1 && git ls-remote origin","description":"Push the branch"}`,
				"say done"))
			if err := createTimed(ctx, r, task); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("the Task claimed the pool pod and its agent ran there as the Task's", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			pod := finishedAgentPod(ctx, t, r, cs, task)
			if pod.Name != pool.Name || pod.UID != pool.UID {
				t.Fatalf("the Task ran in pod %s, want the pool's %s", pod.Name, pool.Name)
			}
			var cur tatarav1.Task
			if err := r.Get(ctx, task.Name, task.Namespace, &cur); err != nil {
				t.Fatal(err)
			}
			if a := cur.Status.CurrentAttempt(); a == nil || !a.Warm || a.PodName != pool.Name {
				t.Fatalf("attempt %+v, want a warm attempt in %s", a, pool.Name)
			}
			branch := "tatara/" + name + "-" + strings.ReplaceAll(string(cur.UID), "-", "")[:8]
			var results strings.Builder
			for _, rec := range modelRecords(ctx, t, cs, name) {
				for _, res := range rec.ToolResults {
					results.WriteString(res + "\n")
				}
				if len(rec.ToolErrors) > 0 {
					t.Errorf("tool errors: %q", rec.ToolErrors)
				}
			}
			for _, want := range []string{"Tatara agent (" + name + ")", "refs/heads/" + branch} {
				if !strings.Contains(results.String(), want) {
					t.Errorf("the agent's tool results lack %q; results:\n%s", want, results.String())
				}
			}
			got, err := gitShow(ctx, cfg, demoRepo, branch, demoFile)
			if err != nil || strings.TrimSpace(string(got)) != agentsLine {
				t.Errorf("%s on %s = %q (%v), want %q", demoFile, branch, got, err, agentsLine)
			}
			checkNoCredentialInAgentContainer(ctx, t, r, pod)
			checkNoTaskTokenInAgentContainer(ctx, t, r, pod, &cur)
			if steps, err := startupPhases(ctx, cs, task, pod); err != nil {
				t.Error(err)
			} else {
				logf("warm start phases: %s", formatPhases(startOf(task), steps))
			}
			// Prometheus, scraping what the charts configure, has the warm start as the agent saw it
			// (the pod carries the Task's labels since its claim) and the pool's gauge.
			waitProm(ctx, t, cs, "claim to first request of the warm pod",
				fmt.Sprintf(`max_over_time(tatara_mcp_claim_to_first_request_seconds_count{namespace=%q,task=%q}[30m])`, agentNamespace, name), oneSample(1))
			waitProm(ctx, t, cs, "the warm pool's gauge",
				fmt.Sprintf(`max(max_over_time(tatara_operator_warm_pool_pods{namespace=%q,project=%q,kind="implement",state="ready"}[30m]))`, agentNamespace, project.Name), oneSample(1))
			var stdout, stderr bytes.Buffer
			if err := r.ExecInPod(ctx, pod.Namespace, pod.Name, "wrapper", []string{"sh", "-c", "kill -TERM 1"}, &stdout, &stderr); err != nil {
				t.Fatalf("SIGTERM to the lingering wrapper: %v %s", err, stderr.String())
			}
			return ctx
		}).
		Assess("the Task Succeeded and the pool started a new pod", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			if cur := terminalTask(ctx, t, r, task); cur.Status.Phase != tatarav1.PhaseSucceeded {
				t.Errorf("phase = %s, want Succeeded; conditions %+v", cur.Status.Phase, cur.Status.Conditions)
			}
			if next := claimablePoolPod(ctx, t, r, project.Name); next.UID == pool.UID {
				t.Errorf("the claimed pod %s is back in the pool", pool.Name)
			}
			return ctx
		}).
		Teardown(deleting(&task, &project)).Feature()
	testenv.Test(t, f)
}

// checkNoTaskTokenInAgentContainer: the claim brought the Task's token to the cli only; nothing
// the agent's container can read holds it, nor the pod-bound token the cli claimed with.
func checkNoTaskTokenInAgentContainer(ctx context.Context, t *testing.T, r *resources.Resources, pod *corev1.Pod, task *tatarav1.Task) {
	t.Helper()
	var secret corev1.Secret
	if err := r.Get(ctx, task.Status.SecretName, task.Namespace, &secret); err != nil {
		t.Fatalf("token secret of %s: %v", task.Name, err)
	}
	tok := string(secret.Data["token"])
	script := `for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ; done 2>/dev/null; cat /proc/self/mountinfo; ` +
		`find /var/run/tatara /workspace /home/agent /tmp -type f -size -4M -print0 2>/dev/null | xargs -0 cat 2>/dev/null; true`
	var stdout, stderr bytes.Buffer
	if err := r.ExecInPod(ctx, pod.Namespace, pod.Name, "wrapper", []string{"sh", "-c", script}, &stdout, &stderr); err != nil {
		t.Fatalf("exec in the agent container: %v %s", err, stderr.String())
	}
	dump := stdout.String()
	if !strings.Contains(dump, `"task":"`+task.Name+`"`) {
		t.Fatalf("the agent container's dump lacks the claim's assignment: it did not read what the agent can read (%d bytes)", len(dump))
	}
	if tok == "" || strings.Contains(dump, tok) {
		t.Error("the Task's token is readable in the agent's container of a claimed pool pod")
	}
	if strings.Contains(dump, "claim-token") {
		t.Error("the pod-bound token the cli claims with is mounted in the agent's container")
	}
}

// formatPhases says when each step ended after start.
func formatPhases(start time.Time, steps []startupPhase) string {
	parts := make([]string, 0, len(steps))
	for _, s := range steps {
		parts = append(parts, fmt.Sprintf("%s +%.2fs", s.name, s.end.Sub(start).Seconds()))
	}
	return strings.Join(parts, ", ")
}
