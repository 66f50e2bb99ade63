//go:build e2e

package suite

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"tatara.dev/cli/pkg/workspace"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// The kind environment's demo repo reads its credentials from these Secrets of the agent
// namespace (helmfile/environments/kind.yaml), which the suite fills with the git server's tokens.
const (
	demoRepo         = "demo"
	demoReadSecret   = "demo-git-read"
	demoPushSecret   = "demo-git-push"
	wrongTokenSecret = "demo-git-wrong-token"
	// demoFile is a file of the demo repository and demoLine its only line.
	demoFile   = "greeting.txt"
	demoLine   = "Hello from the demo repository."
	agentsLine = "Hello from a Tatara agent."
)

// createRepoSecrets puts the git server's tokens into the agent namespace before helmfile
// creates the Project that references them (helm adopts the existing namespace).
func createRepoSecrets(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		return ctx, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctx, err
	}
	for name, token := range map[string]string{
		demoReadSecret:   gitReadToken,
		demoPushSecret:   gitWriteToken,
		wrongTokenSecret: "not-the-servers-token-" + gitReadToken[:8],
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: agentNamespace},
			StringData: map[string]string{"token": token}}
		_, err := cs.CoreV1().Secrets(agentNamespace).Create(ctx, s, metav1.CreateOptions{})
		if kept := reusedCluster && apierrors.IsAlreadyExists(err); err != nil && !kept {
			return ctx, fmt.Errorf("secret %s: %w", name, err)
		}
	}
	return ctx, nil
}

// TestCodingRun is the platform's main job, end to end: an implement Task's pod clones the demo
// repository with the read token, the real agent edits a file with its own tools, looks at
// `git diff` and commits through its shell, pushes its branch through the git gateway (a push to
// main is refused), then records change_summary and pr_outcome over MCP. Neither token reaches the
// agent's container or any log.
// pushOptionAttempt is what git itself will not send when the server does not advertise push
// options: a receive-pack request, written by hand to the pod's git gateway, that rewinds the
// Task's own branch to its parent with the push options a GitLab-style host acts on (open a merge
// request into main). The gateway must refuse it whole; its answer is printed for the test.
const pushOptionAttempt = `url=$(git remote get-url origin); ` +
	`perl -MIO::Socket::INET -MDigest::SHA=sha1 -e '` +
	`my ($url, $old, $new, $ref) = @ARGV; $url =~ m{^http://([^/:]+):(\d+)(/.*)?$} or die "origin $url"; ` +
	`my ($host, $port, $path) = ($1, $2, $3 // ""); $path =~ s{/+$}{}; sub pkt { sprintf("%04x", length($_[0]) + 4) . $_[0] } ` +
	`my $pack = "PACK" . pack("NN", 2, 0); $pack .= sha1($pack); ` +
	`my $body = pkt("$old $new refs/heads/$ref\0report-status push-options\n") . "0000" . ` +
	`pkt("merge_request.create\n") . pkt("merge_request.target=main\n") . "0000" . $pack; ` +
	`my $s = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port) or die "connect: $!"; ` +
	`print $s "POST $path/git-receive-pack HTTP/1.0\r\nHost: $host\r\nContent-Type: application/x-git-receive-pack-request\r\nContent-Length: " . length($body) . "\r\n\r\n" . $body; ` +
	`local $/; my $r = <$s>; $r =~ s/[^\x20-\x7e\n]/./g; print $r;` +
	`' "$url" "$(git rev-parse HEAD)" "$(git rev-parse HEAD~1)" "$(git rev-parse --abbrev-ref HEAD)"`

func TestCodingRun(t *testing.T) {
	sharedFeature(t)
	const name = "coding-run"
	var branch string // tatara/<task>-<uid>: known once the Task exists
	var project *tatarav1.Project
	var task *tatarav1.Task
	var mainBefore string
	f := features.New("coding run, real agent, real git").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			branches, err := gitBranches(ctx, cfg, demoRepo)
			if err != nil {
				t.Fatal(err)
			}
			mainBefore = branches["main"]
			// The wrapper lingers after the agent exits, so the agent's container can be inspected.
			project = projectCopy(ctx, t, cfg, "coding", func(p *tatarav1.Project) {
				p.Spec.Agent.ExtraEnvs = append(p.Spec.Agent.ExtraEnvs, corev1.EnvVar{Name: "TATARA_WRAPPER_LINGER", Value: "10m"})
			})
			file := "/workspace/" + demoRepo + "/" + demoFile
			task = newTask(name, project.Name, tatarav1.KindImplement, modelScript(name,
				fmt.Sprintf(`call Read {"file_path":%q}`, file),
				fmt.Sprintf(`call Edit {"file_path":%q,"old_string":%q,"new_string":%q}`, file, demoLine, agentsLine),
				`call Bash {"command":"git diff","description":"Show the change"}`,
				`call Bash {"command":"git commit -q -am 'greeting: say who wrote it' && git log --oneline -1","description":"Commit"}`,
				`call Bash {"command":"git push origin HEAD:refs/heads/main 2>&1","description":"Push to main"}`,
				`call Bash {"command":"git push -q origin HEAD 2>&1 && git ls-remote origin","description":"Push the branch"}`,
				bashStep(pushOptionAttempt),
				`call change_summary {"summary":"greeting.txt now says a Tatara agent wrote it"}`,
				fmt.Sprintf(`call pr_outcome {"outcome":"opened","url":"%s"}`, gitServerURL(demoRepo)),
				"say done"))
			if err := r.Create(ctx, task); err != nil {
				t.Fatal(err)
			}
			// The contract: the Task's name and the first 8 hex digits of its UID.
			branch = "tatara/" + name + "-" + strings.ReplaceAll(string(task.UID), "-", "")[:8]
			return ctx
		}).
		Assess("the agent's tools worked in the clone, and its container never saw a credential", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			pod := finishedAgentPod(ctx, t, r, cs, task)
			var results strings.Builder
			var toolErrors []string
			for _, rec := range modelRecords(ctx, t, cs, name) {
				for _, res := range rec.ToolResults {
					results.WriteString(res + "\n")
				}
				toolErrors = rec.ToolErrors // each record has the conversation's errors so far
			}
			all := results.String()
			for _, want := range []string{demoLine, "-" + demoLine, "+" + agentsLine, "greeting: say who wrote it", "refs/heads/" + branch,
				"ng refs/heads/" + branch + " push options (git push -o) are not supported by the git gateway"} {
				if !strings.Contains(all, want) {
					t.Errorf("the agent's tool results lack %q; results:\n%s", want, all)
				}
			}
			// Exactly one tool failed: the push to main, refused by the gateway, which told git why.
			if len(toolErrors) != 1 || !strings.HasPrefix(toolErrors[0], "Bash:") || !strings.Contains(toolErrors[0], "[remote rejected] HEAD -> main") {
				t.Errorf("tool errors %q, want only the push to main, rejected by the gateway", toolErrors)
			}
			checkNoCredentialInAgentContainer(ctx, t, r, pod)
			// Let the lingering wrapper go: the pod ends and the Task with it.
			var stdout, stderr bytes.Buffer
			if err := r.ExecInPod(ctx, pod.Namespace, pod.Name, "wrapper", []string{"sh", "-c", "kill -TERM 1"}, &stdout, &stderr); err != nil {
				t.Fatalf("SIGTERM to the lingering wrapper: %v %s", err, stderr.String())
			}
			return ctx
		}).
		Assess("the branch is on the server, main is not touched, the Task Succeeded with both intents", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			cur := terminalTask(ctx, t, r, task)
			if cur.Status.Phase != tatarav1.PhaseSucceeded {
				t.Errorf("phase = %s, want Succeeded; conditions %+v", cur.Status.Phase, cur.Status.Conditions)
			}
			if cur.Status.Outcome == nil || cur.Status.Outcome.Intent != "pr_outcome" || cur.Status.Outcome.Value != "opened" {
				t.Errorf("outcome = %+v, want pr_outcome opened", cur.Status.Outcome)
			}
			if !strings.Contains(cur.Status.ChangeSummary, "a Tatara agent wrote it") {
				t.Errorf("changeSummary = %q", cur.Status.ChangeSummary)
			}
			branches, err := gitBranches(ctx, cfg, demoRepo)
			if err != nil {
				t.Fatal(err)
			}
			if branches["main"] != mainBefore {
				t.Errorf("main moved from %s to %s: the gateway let a push to main through", mainBefore, branches["main"])
			}
			if branches[branch] == "" || branches[branch] == mainBefore {
				t.Errorf("branches %v: want %s with a new commit", branches, branch)
			}
			got, err := gitShow(ctx, cfg, demoRepo, branch, demoFile)
			if err != nil || strings.TrimSpace(string(got)) != agentsLine {
				t.Errorf("%s on %s = %q (%v), want %q", demoFile, branch, got, err, agentsLine)
			}
			var pod corev1.Pod
			if err := r.Get(ctx, cur.Status.PodName, cur.Namespace, &pod); err != nil {
				t.Fatal(err)
			}
			checkNoCredentialInLogs(ctx, t, cs, &pod)
			logf("coding run phases: %s", podPhases(ctx, t, cs, &pod))
			return ctx
		}).
		Teardown(deleting(&task, &project)).Feature()
	testenv.Test(t, f)
}

// TestWorkspaceAuthFailed: a repo whose Secret holds a wrong token ends the Task Failed with
// WorkspaceFailed/AuthFailed, and neither the cli nor the agent ever starts.
func TestWorkspaceAuthFailed(t *testing.T) {
	sharedFeature(t)
	const name = "wrong-token"
	var project *tatarav1.Project
	var task *tatarav1.Task
	f := features.New("workspace with a wrong token").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			project = projectCopy(ctx, t, cfg, "wrong-token", func(p *tatarav1.Project) {
				p.Spec.Repos[0].Credentials = &tatarav1.RepoCredentials{SecretName: wrongTokenSecret}
			})
			task = newTask(name, project.Name, tatarav1.KindImplement, modelScript(name, "say this must never run"))
			if err := r.Create(ctx, task); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("the Task fails with WorkspaceFailed/AuthFailed and the agent never starts", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			cur := terminalTask(ctx, t, r, task)
			wf := meta.FindStatusCondition(cur.Status.Conditions, tatarav1.ConditionWorkspaceFailed)
			if cur.Status.Phase != tatarav1.PhaseFailed || wf == nil || wf.Status != metav1.ConditionTrue || wf.Reason != workspace.AuthFailed {
				t.Fatalf("phase %s, WorkspaceFailed %+v; want Failed with reason %s", cur.Status.Phase, wf, workspace.AuthFailed)
			}
			if !strings.Contains(wf.Message, "Authentication failed") {
				t.Errorf("WorkspaceFailed message %q should carry git's words", wf.Message)
			}
			var pod corev1.Pod
			if err := r.Get(ctx, cur.Status.PodName, cur.Namespace, &pod); err != nil {
				t.Fatal(err)
			}
			for _, s := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
				if s.Name == "wrapper-install" || s.Name == "workspace-init" {
					continue
				}
				if s.State.Running != nil || s.State.Terminated != nil || s.LastTerminationState.Terminated != nil || (s.Started != nil && *s.Started) {
					t.Errorf("container %s started after a failed clone: %+v", s.Name, s.State)
				}
			}
			if recs := modelRecords(ctx, t, cs, name); len(recs) != 0 {
				t.Errorf("the model got %d requests from a Task whose workspace failed", len(recs))
			}
			checkNoCredentialInLogs(ctx, t, cs, &pod)
			return ctx
		}).
		Teardown(deleting(&task, &project)).Feature()
	testenv.Test(t, f)
}

func terminalTask(ctx context.Context, t *testing.T, r *resources.Resources, task *tatarav1.Task) tatarav1.Task {
	t.Helper()
	var cur tatarav1.Task
	err := wait.For(func(ctx context.Context) (bool, error) {
		if err := r.Get(ctx, task.Name, task.Namespace, &cur); err != nil {
			return false, err
		}
		return cur.Status.Phase.Terminal(), nil
	}, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(time.Second))
	if err != nil {
		t.Fatalf("task %s never reached a final phase: %v; status %+v", task.Name, err, cur.Status)
	}
	return cur
}

// checkNoCredentialInAgentContainer dumps what the agent can read in its container (every
// process's environment and command line, its mounts, git's view of its config, and every file
// under its writable directories) and looks for either token. Markers the dump must contain prove
// it really read the agent's world.
func checkNoCredentialInAgentContainer(ctx context.Context, t *testing.T, r *resources.Resources, pod *corev1.Pod) {
	t.Helper()
	script := `for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ; tr '\0' ' ' < $p/cmdline; echo; done 2>/dev/null
cat /proc/self/mountinfo
ls -la /var/run/tatara 2>&1
git -C /workspace/` + demoRepo + ` config --list --show-origin
find /workspace /home/agent /tmp /opt/tatara /var/run/tatara -type f -size -4M -print0 2>/dev/null | xargs -0 cat 2>/dev/null
true`
	var stdout, stderr bytes.Buffer
	if err := r.ExecInPod(ctx, pod.Namespace, pod.Name, "wrapper", []string{"sh", "-c", script}, &stdout, &stderr); err != nil {
		t.Fatalf("exec in the agent container: %v %s", err, stderr.String())
	}
	dump := stdout.String()
	// The push branch is in the wrapper's env; a pool pod's wrapper read it from the claim.
	branchMarker := "TATARA_PUSH_BRANCH=tatara/"
	if pod.Labels[poolLabel] != "" {
		branchMarker = `"pushBranch":"tatara/`
	}
	for _, marker := range []string{branchMarker, agentsLine, "remote.origin.url=http://127.0.0.1:7778/", "/workspace"} {
		if !strings.Contains(dump, marker) {
			t.Fatalf("the agent container's dump lacks %q: it did not read what the agent can read (%d bytes)", marker, len(dump))
		}
	}
	for what, token := range map[string]string{"read": gitReadToken, "write": gitWriteToken} {
		if strings.Contains(dump, token) {
			t.Errorf("the git server's %s token is readable in the agent's container", what)
		}
	}
	if strings.Contains(dump, "/var/run/tatara/git-") {
		t.Errorf("a git credential directory is mounted in the agent's container")
	}
}

// checkNoCredentialInLogs reads every container's log of the pod, the operator's and the git
// server's, and looks for either token.
func checkNoCredentialInLogs(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, pod *corev1.Pod) {
	t.Helper()
	var logs strings.Builder
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		logs.WriteString(podLogs(ctx, cs, pod, c.Name))
	}
	for _, sel := range []struct{ ns, label string }{
		{"tatara-system", "app.kubernetes.io/name=tatara-operator"},
		{gitServerNamespace, "app.kubernetes.io/name=git-server"},
	} {
		pods, err := cs.CoreV1().Pods(sel.ns).List(ctx, metav1.ListOptions{LabelSelector: sel.label})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("no pods %s in %s (%v): cannot check their logs", sel.label, sel.ns, err)
		}
		for i := range pods.Items {
			for _, c := range pods.Items[i].Spec.Containers {
				logs.WriteString(podLogs(ctx, cs, &pods.Items[i], c.Name))
			}
		}
	}
	if logs.Len() == 0 {
		t.Fatal("read no logs at all")
	}
	for what, token := range map[string]string{"read": gitReadToken, "write": gitWriteToken} {
		if strings.Contains(logs.String(), token) {
			t.Errorf("the git server's %s token is in a log", what)
		}
	}
}

// podPhases says how long each step of the agent pod took, from the pod's creation: the clone
// (workspace-init, with git's own clone time from its log), the cli sidecar's start, and the agent.
func podPhases(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, pod *corev1.Pod) string {
	t.Helper()
	created := pod.CreationTimestamp.Time
	since := func(tm metav1.Time) string { return tm.Sub(created).Round(100 * time.Millisecond).String() }
	var parts []string
	for _, s := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if term := s.State.Terminated; term != nil {
			parts = append(parts, fmt.Sprintf("%s %s..%s", s.Name, since(term.StartedAt), since(term.FinishedAt)))
		} else if run := s.State.Running; run != nil {
			parts = append(parts, fmt.Sprintf("%s started %s", s.Name, since(run.StartedAt)))
		}
	}
	for _, rec := range logRecords(t, podLogs(ctx, cs, pod, "workspace-init"), func(m map[string]any) bool { return m["msg"] == "workspace ready" }) {
		parts = append(parts, fmt.Sprintf("git clone %.2fs", rec["clone_seconds"]))
	}
	return strings.Join(parts, ", ")
}
