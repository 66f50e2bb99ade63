//go:build e2e

package suite

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"tatara.dev/cli/pkg/profiles"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/testkit/gitserver"
)

// poolLabel marks a warm pool pod (its value is the pool's kind); a claimed pod also carries the
// Task's labels.
const poolLabel = "tatara.dev/pool"

// claimablePoolPod waits for a pool pod of project and kind that a Task could claim now: not claimed, its
// clone done, its containers running. An unclaimed pool pod's cli logs that it waits.
func claimablePoolPod(ctx context.Context, t *testing.T, r *resources.Resources, project string, kind tatarav1.TaskKind) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	err := wait.For(func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := r.List(ctx, &pods, resources.WithLabelSelector("tatara.dev/project="+project+","+poolLabel+"="+string(kind)+",!tatara.dev/task")); err != nil {
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
		t.Fatalf("no claimable %s pool pod of project %s: %v", kind, project, err)
	}
	return found
}

// poolTemplate is the annotation with the hash of what a pool pod was built from, the operator's
// version included.
const poolTemplate = "tatara.dev/pool-template"

// recycledPoolPod waits until old, an unclaimed pool pod, is gone or going and its pool has a
// claimable pod built from another template, and returns that pod.
func recycledPoolPod(ctx context.Context, t *testing.T, r *resources.Resources, old *corev1.Pod) *corev1.Pod {
	t.Helper()
	err := wait.For(func(ctx context.Context) (bool, error) {
		var cur corev1.Pod
		if err := r.Get(ctx, old.Name, old.Namespace, &cur); apierrors.IsNotFound(err) {
			return true, nil
		} else if err != nil {
			return false, err
		}
		return cur.UID != old.UID || !cur.DeletionTimestamp.IsZero(), nil
	}, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(time.Second))
	if err != nil {
		t.Fatalf("pool pod %s (template %s) was not replaced: %v", old.Name, old.Annotations[poolTemplate], err)
	}
	next := claimablePoolPod(ctx, t, r, old.Labels["tatara.dev/project"], tatarav1.TaskKind(old.Labels[poolLabel]))
	if next.Annotations[poolTemplate] == old.Annotations[poolTemplate] {
		t.Errorf("pool pod %s replaced %s with the same template %s", next.Name, old.Name, old.Annotations[poolTemplate])
	}
	return next
}

// TestWarmStart: a Project keeps a warm pool of one implement and one brainstorm pod; an unclaimed
// pool pod holds no token where its agent will run. Two implement Tasks (twice that pool) and a
// brainstorm Task arrive together: one implement Task and the brainstorm Task claim the pool's
// pods, the other implement Task starts cold, and every one succeeds. In the claimed pods each
// agent works as its Task's own: its kind's tool count, its commits under the Task's name pushed
// to the Task's branch through the gateway (which learned the branch from the claim), an internal
// issue seen by both the cli and the wrapper, and no Task token anywhere the agent reads. Both
// pools start new pods.
func TestWarmStart(t *testing.T) {
	sharedFeature(t)
	implementTasks := []string{"warm-impl-a", "warm-impl-b"}
	const brainstorm = "warm-brainstorm"
	var project *tatarav1.Project
	var tasks []*tatarav1.Task
	pools := map[tatarav1.TaskKind]*corev1.Pod{}
	f := features.New("warm starts from the pool").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			project = projectCopy(ctx, t, cfg, "warm", func(p *tatarav1.Project) {
				p.Spec.WarmPool = []tatarav1.WarmPool{
					{Kind: tatarav1.KindImplement, Size: 1, Repo: demoRepo},
					{Kind: tatarav1.KindBrainstorm, Size: 1, Repo: demoRepo},
				}
				// The wrappers linger after their agents exit, so the agents' containers can be read.
				p.Spec.Agent.ExtraEnvs = append(p.Spec.Agent.ExtraEnvs, corev1.EnvVar{Name: "TATARA_WRAPPER_LINGER", Value: "10m"})
			})
			for _, kind := range []tatarav1.TaskKind{tatarav1.KindImplement, tatarav1.KindBrainstorm} {
				pools[kind] = claimablePoolPod(ctx, t, r, project.Name, kind)
			}
			checkUnclaimedPoolPodHoldsNoTask(ctx, t, r, pools[tatarav1.KindImplement])

			// Both implement Tasks ask for another branch than the pool's checkout: the one that
			// claims the pool's pod fetches it through the pod's git gateway, the other clones it
			// cold. The branch carries agent-CLI settings no agent may obey (the Bash calls below
			// would be denied, and the model unreachable, if the CLI read them).
			file := "/workspace/" + demoRepo + "/" + demoFile
			for _, name := range implementTasks {
				task := newTask(name, project.Name, tatarav1.KindImplement, modelScript(name,
					fmt.Sprintf(`call Edit {"file_path":%q,"old_string":%q,"new_string":%q}`, file, demoLine, agentsLine),
					`call Bash {"command":"git commit -q -am 'greeting: from a warm pool' && git log -1 --format=%an","description":"Commit"}`,
					`call Bash {"command":"git push -q origin HEAD 2>&1 && git ls-remote origin","description":"Push the branch"}`,
					"say done"))
				task.Spec.Ref = gitserver.HostileSettingsBranch
				tasks = append(tasks, task)
			}
			tasks = append(tasks, newTask(brainstorm, project.Name, tatarav1.KindBrainstorm, modelScript(brainstorm,
				`call report_internal_issue {"category":"tool_error","severity":"warn","description":"e2e warm report","offending_tool":"code_search","resource_id":"demo"}`,
				"say reported")))
			for _, task := range tasks {
				if err := createTimed(ctx, r, task); err != nil {
					t.Fatal(err)
				}
			}
			return ctx
		}).
		Assess("each Task ran as its own, the pool's pods served one Task each", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			warm := map[tatarav1.TaskKind]int{}
			for _, task := range tasks {
				pod := finishedAgentPod(ctx, t, r, cs, task)
				var cur tatarav1.Task
				if err := r.Get(ctx, task.Name, task.Namespace, &cur); err != nil {
					t.Fatal(err)
				}
				a := cur.Status.CurrentAttempt()
				if a == nil || a.PodName != pod.Name {
					t.Fatalf("task %s: attempt %+v, pod %s", task.Name, a, pod.Name)
				}
				if a.Warm {
					warm[task.Spec.Kind]++
					if want := pools[task.Spec.Kind]; pod.UID != want.UID {
						t.Errorf("task %s ran warm in %s, want the pool's %s", task.Name, pod.Name, want.Name)
					}
					claimed := logRecords(t, podLogs(ctx, cs, pod, "cli"), func(rec map[string]any) bool { return rec["msg"] == "pod claimed" })
					if len(claimed) != 1 || claimed[0]["task"] != task.Name {
						t.Errorf("pool pod %s: cli's claim lines %v, want one for %s", pod.Name, claimed, task.Name)
					}
					fetched := logRecords(t, podLogs(ctx, cs, pod, "wrapper"), func(rec map[string]any) bool { return rec["msg"] == "workspace ref fetched" })
					if want := task.Spec.Ref; want != "" && (len(fetched) != 1 || fetched[0]["ref"] != want) {
						t.Errorf("pool pod %s: wrapper's fetch lines %v, want one of ref %s", pod.Name, fetched, want)
					} else if want == "" && len(fetched) != 0 {
						t.Errorf("pool pod %s fetched %v for a Task on the pool's own ref", pod.Name, fetched)
					}
					if steps, err := startupPhases(ctx, cs, task, pod); err != nil {
						t.Error(err)
					} else {
						logf("warm start phases (%s): %s", task.Name, formatPhases(startOf(task), steps))
					}
					// Prometheus, scraping what the charts configure, has the start as the agent
					// saw it (the pod carries the Task's labels since its claim).
					waitProm(ctx, t, cs, "claim to first request of "+task.Name,
						fmt.Sprintf(`max_over_time(tatara_mcp_claim_to_first_request_seconds_count{namespace=%q,task=%q}[30m])`, agentNamespace, task.Name), oneSample(1))
				}
				profile := profiles.ForKind(string(task.Spec.Kind))
				checkGauge(ctx, t, cs, task.Name, profile, len(profileToolNames(profile)))
				if task.Spec.Kind == tatarav1.KindImplement {
					checkPushedAsTheTask(ctx, t, cfg, cs, &cur)
					// The agent's commit is on top of the ref the Task asked for, warm or cold.
					branch := agentPushBranch(&cur)
					if got, err := gitShow(ctx, cfg, demoRepo, branch, gitserver.HostileSettingsPath); err != nil || string(got) != gitserver.HostileSettings {
						t.Errorf("%s on %s = %q (%v): the checkout was not %s", gitserver.HostileSettingsPath, branch, got, err, task.Spec.Ref)
					}
					checkNoCredentialInAgentContainer(ctx, t, r, pod)
				} else {
					checkReportSeenTwice(ctx, t, cs, pod, task.Name)
				}
				if a.Warm {
					checkNoTaskTokenInAgentContainer(ctx, t, r, pod, &cur)
				}
				var stdout, stderr bytes.Buffer
				if err := r.ExecInPod(ctx, pod.Namespace, pod.Name, "wrapper", []string{"sh", "-c", "kill -TERM 1"}, &stdout, &stderr); err != nil {
					t.Fatalf("SIGTERM to the lingering wrapper of %s: %v %s", task.Name, err, stderr.String())
				}
			}
			if warm[tatarav1.KindImplement] != 1 || warm[tatarav1.KindBrainstorm] != 1 {
				t.Errorf("warm starts by kind %v, want one implement (of two) and the brainstorm", warm)
			}
			waitProm(ctx, t, cs, "the warm pool's gauge",
				fmt.Sprintf(`max(max_over_time(tatara_operator_warm_pool_pods{namespace=%q,project=%q,kind="implement",state="ready"}[30m]))`, agentNamespace, project.Name), oneSample(1))
			return ctx
		}).
		Assess("every Task Succeeded and both pools started new pods", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			for _, task := range tasks {
				if cur := terminalTask(ctx, t, r, task); cur.Status.Phase != tatarav1.PhaseSucceeded {
					t.Errorf("task %s: phase = %s, want Succeeded; conditions %+v", task.Name, cur.Status.Phase, cur.Status.Conditions)
				}
			}
			for kind, old := range pools {
				if next := claimablePoolPod(ctx, t, r, project.Name, kind); next.UID == old.UID {
					t.Errorf("the claimed %s pod %s is back in the pool", kind, old.Name)
				}
			}
			return ctx
		}).
		Teardown(deleting(&tasks, &project)).Feature()
	testenv.Test(t, f)
}

// agentPushBranch is the branch a Task's agent may push (the operator's agent.PushBranch for a
// first attempt), spelled out here so the suite checks the name rather than echoing it.
func agentPushBranch(task *tatarav1.Task) string {
	return "tatara/" + task.Name + "-" + strings.ReplaceAll(string(task.UID), "-", "")[:8]
}

// checkPushedAsTheTask: the Task's agent committed under the Task's name and pushed the change to
// the Task's branch, and only there.
func checkPushedAsTheTask(ctx context.Context, t *testing.T, cfg *envconf.Config, cs *kubernetes.Clientset, task *tatarav1.Task) {
	t.Helper()
	branch := agentPushBranch(task)
	var results strings.Builder
	for _, rec := range modelRecords(ctx, t, cs, task.Name) {
		for _, res := range rec.ToolResults {
			results.WriteString(res + "\n")
		}
		if len(rec.ToolErrors) > 0 {
			t.Errorf("task %s: tool errors %q", task.Name, rec.ToolErrors)
		}
	}
	for _, want := range []string{"Tatara agent (" + task.Name + ")", "refs/heads/" + branch} {
		if !strings.Contains(results.String(), want) {
			t.Errorf("task %s: the agent's tool results lack %q; results:\n%s", task.Name, want, results.String())
		}
	}
	got, err := gitShow(ctx, cfg, demoRepo, branch, demoFile)
	if err != nil || strings.TrimSpace(string(got)) != agentsLine {
		t.Errorf("%s on %s = %q (%v), want %q", demoFile, branch, got, err, agentsLine)
	}
}

// checkReportSeenTwice: the agent's report_internal_issue was logged by the cli, which handled it,
// and by the wrapper, which read it in the transcript, both naming the Task.
func checkReportSeenTwice(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, pod *corev1.Pod, task string) {
	t.Helper()
	cli := logRecords(t, podLogs(ctx, cs, pod, "cli"), func(rec map[string]any) bool {
		return rec["msg"] == "internal issue reported" && rec["category"] == "tool_error" && rec["severity"] == "warn"
	})
	if len(cli) != 1 || cli[0]["task"] != task {
		t.Errorf("cli lines of the report = %v, want one naming task %s", cli, task)
	}
	wrapper := logRecords(t, podLogs(ctx, cs, pod, "wrapper"), func(rec map[string]any) bool {
		return rec["action"] == "internal_issue_report" && rec["category"] == "tool_error"
	})
	if len(wrapper) != 1 || wrapper[0]["task"] != task {
		t.Errorf("wrapper lines of the report = %v, want one naming task %s", wrapper, task)
	}
}

// checkUnclaimedPoolPodHoldsNoTask reads an unclaimed pool pod: no container's spec has a Task's
// name, token or directive, and the agent's container (its processes' environment, every file it
// can read) holds no token, and no claim yet.
func checkUnclaimedPoolPodHoldsNoTask(ctx context.Context, t *testing.T, r *resources.Resources, pod *corev1.Pod) {
	t.Helper()
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		for _, e := range c.Env {
			if e.Name == "TATARA_TASK" || e.Name == "TATARA_TOKEN" || e.Name == "TATARA_DIRECTIVE" || e.Name == "TATARA_PUSH_BRANCH" {
				t.Errorf("pool pod %s: container %s has %s before any claim", pod.Name, c.Name, e.Name)
			}
		}
	}
	script := `for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ; done 2>/dev/null; cat /proc/self/mountinfo; ls -la /var/run/tatara/claim; [ -e /var/run/tatara/claim/assignment.json ] && echo ASSIGNMENT-PRESENT; ` +
		`find /var/run/tatara /workspace /home/agent /tmp /opt/tatara -type f -size -4M -print0 2>/dev/null | xargs -0 cat 2>/dev/null; true`
	var stdout, stderr bytes.Buffer
	if err := r.ExecInPod(ctx, pod.Namespace, pod.Name, "wrapper", []string{"sh", "-c", script}, &stdout, &stderr); err != nil {
		t.Fatalf("exec in the unclaimed pool pod %s: %v %s", pod.Name, err, stderr.String())
	}
	dump := stdout.String()
	if !strings.Contains(dump, demoLine) || !strings.Contains(dump, "TATARA_CLAIM_FILE=") {
		t.Fatalf("the pool pod's dump lacks its checkout or its env: it did not read what the agent will read (%d bytes)", len(dump))
	}
	if taskToken.MatchString(dump) {
		t.Errorf("an unclaimed pool pod's agent container holds a Task token")
	}
	for _, leak := range []string{"claim-token", "ASSIGNMENT-PRESENT", "TATARA_TASK=", "TATARA_PUSH_BRANCH="} {
		if strings.Contains(dump, leak) {
			t.Errorf("an unclaimed pool pod's agent container shows %q", leak)
		}
	}
}

// taskToken is a Task token's shape.
var taskToken = regexp.MustCompile(`tatara_[0-9a-f]{64}`)

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
