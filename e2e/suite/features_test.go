//go:build e2e

package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/klient/k8s"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/yaml"

	"tatara.dev/cli/pkg/profiles"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// helmfilePins reads the image tag each release pins in helmfile/helmfile.yaml.
func helmfilePins(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "helmfile", "helmfile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pins := map[string]string{}
	// helmfile v1 files are multi-document: environments first, releases after a "---".
	for _, doc := range strings.Split(string(raw), "\n---") {
		var hf struct {
			Releases []struct {
				Name   string `json:"name"`
				Values []any  `json:"values"` // inline maps and values-file paths
			} `json:"releases"`
		}
		if err := yaml.Unmarshal([]byte(doc), &hf); err != nil {
			t.Fatalf("helmfile.yaml: %v", err)
		}
		for _, rel := range hf.Releases {
			for _, v := range rel.Values {
				inline, _ := v.(map[string]any)
				if img, ok := inline["image"].(map[string]any); ok {
					pins[rel.Name] = fmt.Sprint(img["tag"])
				}
			}
		}
	}
	if len(pins) < 3 {
		t.Fatalf("found image pins for %d releases in helmfile.yaml, want the cli, wrapper and operator: %v", len(pins), pins)
	}
	return pins
}

func TestInstall(t *testing.T) {
	sharedFeature(t)
	f := features.New("install").
		Assess("the operator Deployment is Available", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "tatara-operator", Namespace: systemNamespace}}
			if err := wait.For(conditions.New(r).DeploymentConditionMatch(dep, appsv1.DeploymentAvailable, corev1.ConditionTrue),
				wait.WithTimeout(waitTimeout)); err != nil {
				t.Fatalf("operator not Available: %v", err)
			}
			return ctx
		}).
		Assess("the operator sets its Go memory limit under its container's", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_, cs := clients(t, cfg)
			pods, err := cs.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tatara-operator,app.kubernetes.io/component=operator"})
			if err != nil || len(pods.Items) == 0 {
				t.Fatalf("operator pods: %v (%d found)", err, len(pods.Items))
			}
			for i := range pods.Items {
				pod := &pods.Items[i]
				c, ok := container(pod, "operator")
				limit := c.Resources.Limits.Memory().Value()
				if !ok || limit == 0 {
					t.Fatalf("operator pod %s has no memory limit on its container", pod.Name)
				}
				set := logRecords(t, podLogs(ctx, cs, pod, "operator"), func(rec map[string]any) bool { return rec["msg"] == "GOMEMLIMIT is updated" })
				if len(set) != 1 {
					t.Errorf("operator pod %s logged %d GOMEMLIMIT updates, want 1", pod.Name, len(set))
					continue
				}
				// Below the container's limit, with room left for what the Go runtime does not count.
				if got, _ := set[0]["GOMEMLIMIT"].(float64); got <= 0.8*float64(limit) || got >= float64(limit) {
					t.Errorf("operator pod %s: GOMEMLIMIT %.0f, want between 80%% and 100%% of its container's limit %d", pod.Name, got, limit)
				}
			}
			return ctx
		}).
		Assess("the Project and Task CRDs are Established", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg) // its scheme has the CRD types
			for _, name := range []string{"projects.tatara.dev", "tasks.tatara.dev"} {
				crd := &apiextv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
				err := wait.For(conditions.New(r).ResourceMatch(crd, func(obj k8s.Object) bool {
					for _, c := range obj.(*apiextv1.CustomResourceDefinition).Status.Conditions {
						if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
							return true
						}
					}
					return false
				}), wait.WithTimeout(waitTimeout))
				if err != nil {
					t.Errorf("CRD %s not Established: %v", name, err)
				}
			}
			return ctx
		}).
		Assess("the runtime ConfigMaps carry the images helmfile pins", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			pins := helmfilePins(t)
			for cm, release := range map[string]string{"tatara-cli-runtime": "tatara-cli", "tatara-wrapper-runtime": "tatara-wrapper"} {
				var got corev1.ConfigMap
				if err := r.Get(ctx, cm, systemNamespace, &got); err != nil {
					t.Errorf("ConfigMap %s: %v", cm, err)
					continue
				}
				want := fmt.Sprintf("tatara.local/%s:%s", release, pins[release])
				if pins[release] == "" || got.Data["image"] != want {
					t.Errorf("ConfigMap %s image = %q, want %q (helmfile pin)", cm, got.Data["image"], want)
				}
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// projectCopy creates a copy of the helmfile-deployed Project, changed by mutate.
func projectCopy(ctx context.Context, t *testing.T, cfg *envconf.Config, name string, mutate func(*tatarav1.Project)) *tatarav1.Project {
	t.Helper()
	r, _ := clients(t, cfg)
	var base tatarav1.Project
	if err := r.Get(ctx, kindProject, agentNamespace, &base); err != nil {
		t.Fatalf("project %s: %v", kindProject, err)
	}
	p := &tatarav1.Project{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: agentNamespace}, Spec: *base.Spec.DeepCopy()}
	mutate(p)
	if err := r.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// withToolSearch returns a mutation: the agent's tool search is mode, and extra env entries are
// appended after the kind environment's. Nothing else changes: the pods run the production
// defaults, and what they counted is read from Prometheus after they have gone.
func withToolSearch(mode tatarav1.ToolSearchMode, extra ...corev1.EnvVar) func(*tatarav1.Project) {
	return func(p *tatarav1.Project) {
		p.Spec.Agent.ToolSearch = mode
		p.Spec.Agent.ExtraEnvs = append(p.Spec.Agent.ExtraEnvs, extra...)
	}
}

func deleteProjects(ctx context.Context, t *testing.T, r *resources.Resources, projects ...*tatarav1.Project) {
	for _, p := range projects {
		if err := r.Delete(ctx, p); err != nil {
			t.Logf("failed to delete project %s: %v", p.Name, err)
		}
	}
}

// TestGatingPerProfile: brainstorm and implement Tasks run the real agent CLI, in both
// tool-search modes. Each pod's cli registers exactly its kind's profile (env, startup log,
// gauge), and the model is offered exactly that profile's tatara tools: with their schemas when
// tool search is off, by name only when it is on.
func TestGatingPerProfile(t *testing.T) {
	sharedFeature(t)
	type run struct {
		task       *tatarav1.Task
		toolSearch bool
	}
	var runs []run
	var projects []*tatarav1.Project
	f := features.New("gating per profile, real agent").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			for _, mode := range []tatarav1.ToolSearchMode{tatarav1.ToolSearchOff, tatarav1.ToolSearchOn} {
				p := projectCopy(ctx, t, cfg, "gating-search-"+string(mode), withToolSearch(mode))
				projects = append(projects, p)
				for _, kind := range []tatarav1.TaskKind{tatarav1.KindBrainstorm, tatarav1.KindImplement} {
					name := "gating-" + strings.ToLower(string(kind)) + "-search-" + string(mode)
					task := newTask(name, p.Name, kind, modelScript(name, "say tools seen"))
					if err := r.Create(ctx, task); err != nil {
						t.Fatal(err)
					}
					runs = append(runs, run{task, mode == tatarav1.ToolSearchOn})
				}
			}
			return ctx
		}).
		Assess("each pod registers, and the model is offered, exactly its kind's profile", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			for _, run := range runs {
				task, want := run.task, wantTools(run.task.Spec.Kind)
				pod := finishedAgentPod(ctx, t, r, cs, task)
				checkAgentImageHostsWrapper(ctx, t, r, pod)
				for _, name := range []string{"cli", "wrapper"} {
					c, ok := container(pod, name)
					if !ok {
						t.Fatalf("pod %s has no %s container", pod.Name, name)
					}
					if got := envValues(c, "TATARA_TOOL_PROFILE"); len(got) != 1 || got[0] != want.profile {
						t.Errorf("pod %s container %s TATARA_TOOL_PROFILE = %v, want [%s]", pod.Name, name, got, want.profile)
					}
				}
				starts := logRecords(t, podLogs(ctx, cs, pod, "cli"), func(rec map[string]any) bool { return rec["msg"] == "mcp server started" })
				if len(starts) != 1 || starts[0]["profile"] != want.profile || starts[0]["resolved_profile"] != want.profile ||
					starts[0]["registered_tools"] != float64(want.count) {
					t.Errorf("pod %s cli startup log = %v, want profile=%s registered_tools=%d", pod.Name, starts, want.profile, want.count)
				}
				checkGauge(ctx, t, cs, task.Name, want.profile, want.count)
				checkModelSawProfile(ctx, t, cs, task.Name, want.profile, run.toolSearch)
				if all := len(profiles.All()); want.count >= all {
					t.Errorf("profile %s must register fewer tools than the fail-open %d", want.profile, all)
				}
				t.Logf("kind %-10s tool search %-5t: the model was offered %d tatara tools", task.Spec.Kind, run.toolSearch, want.count)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			for _, run := range runs {
				deleteTasks(ctx, t, r, run.task)
			}
			deleteProjects(ctx, t, r, projects...)
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// TestEveryKind: one Task per CRD kind, each running the real agent CLI; each pod's gauge is
// exactly its profile's count, and so is the set of tatara tools the model was offered.
func TestEveryKind(t *testing.T) {
	sharedFeature(t)
	var tasks []*tatarav1.Task
	var project *tatarav1.Project
	f := features.New("every task kind").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			project = projectCopy(ctx, t, cfg, "every-kind", withToolSearch(tatarav1.ToolSearchOff))
			for _, kind := range tatarav1.TaskKinds {
				name := "kind-" + strings.ToLower(string(kind))
				task := newTask(name, project.Name, kind, modelScript(name, "say tools seen"))
				if err := createTimed(ctx, r, task); err != nil {
					t.Fatal(err)
				}
				tasks = append(tasks, task)
			}
			return ctx
		}).
		Assess("each kind's pod registers its profile's count", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			if len(tasks) != len(profiles.Kinds()) {
				t.Fatalf("%d CRD kinds, but the catalog maps %d kinds to profiles", len(tasks), len(profiles.Kinds()))
			}
			for _, task := range tasks {
				want := wantTools(task.Spec.Kind)
				if want.profile == "" {
					t.Fatalf("no profile for kind %s in the catalog", task.Spec.Kind)
				}
				pod := finishedAgentPod(ctx, t, r, cs, task)
				checkGauge(ctx, t, cs, task.Name, want.profile, want.count)
				checkModelSawProfile(ctx, t, cs, task.Name, want.profile, false)
				recordStartup(ctx, t, cs, task, pod)
				t.Logf("kind %-15s profile %-12s pod %s: %d tools", task.Spec.Kind, want.profile, pod.Name, want.count)
			}
			return ctx
		}).
		Teardown(deleting(&tasks, &project)).Feature()
	testenv.Test(t, f)
}

// TestOverrideAndFailOpen: a Project's extraEnvs entry overrides the kind's profile (the later
// duplicate wins on the real kubelet); an unknown profile fails open to every tool with a WARN.
func TestOverrideAndFailOpen(t *testing.T) {
	sharedFeature(t)
	var projects []*tatarav1.Project
	var override, unknown *tatarav1.Task
	f := features.New("override and fail-open").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			projects = append(projects,
				projectCopy(ctx, t, cfg, "override-review", withToolSearch(tatarav1.ToolSearchOff, corev1.EnvVar{Name: "TATARA_TOOL_PROFILE", Value: "review"})),
				projectCopy(ctx, t, cfg, "override-unknown", withToolSearch(tatarav1.ToolSearchOff, corev1.EnvVar{Name: "TATARA_TOOL_PROFILE", Value: "no-such-profile"})))
			override = newTask("override-review", "override-review", tatarav1.KindImplement, modelScript("override-review", "say tools seen"))
			unknown = newTask("override-unknown", "override-unknown", tatarav1.KindImplement, modelScript("override-unknown", "say tools seen"))
			for _, task := range []*tatarav1.Task{override, unknown} {
				if err := r.Create(ctx, task); err != nil {
					t.Fatal(err)
				}
			}
			return ctx
		}).
		Assess("extraEnvs TATARA_TOOL_PROFILE=review wins over the implement kind", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			pod := finishedAgentPod(ctx, t, r, cs, override)
			c, _ := container(pod, "cli")
			if got := envValues(c, "TATARA_TOOL_PROFILE"); len(got) != 2 || got[0] != "implement" || got[1] != "review" {
				t.Errorf("cli env TATARA_TOOL_PROFILE entries = %v, want [implement review] (profile first, extras last)", got)
			}
			checkGauge(ctx, t, cs, override.Name, "review", len(profileToolNames("review")))
			checkModelSawProfile(ctx, t, cs, override.Name, "review", false)
			return ctx
		}).
		Assess("an unknown profile serves every tool, labels the gauge all and logs a WARN", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			pod := finishedAgentPod(ctx, t, r, cs, unknown)
			checkGauge(ctx, t, cs, unknown.Name, "all", len(profiles.All()))
			checkModelSawProfile(ctx, t, cs, unknown.Name, "no-such-profile", false)
			warns := logRecords(t, podLogs(ctx, cs, pod, "cli"), func(rec map[string]any) bool {
				return rec["level"] == "WARN" && rec["profile"] == "no-such-profile" && strings.Contains(fmt.Sprint(rec["msg"]), "fail-open")
			})
			if len(warns) != 1 {
				t.Errorf("cli log has %d fail-open WARN lines for profile no-such-profile, want 1", len(warns))
			}
			return ctx
		}).
		Teardown(deleting(&override, &unknown, &projects)).Feature()
	testenv.Test(t, f)
}

// TestReportInternalIssue: the real agent reports twice, right at its start, and exits within
// seconds, under the production defaults (no linger). Each report is observed twice on purpose:
// the cli logs and counts it when it handles the call, the wrapper when it reads the tool_use in
// the real transcript. Both counts reach Prometheus before the pod ends (each container waits
// for a final scrape), and both charts' alerts fire, naming the project, the Task kind and the
// report's severity.
func TestReportInternalIssue(t *testing.T) {
	sharedFeature(t)
	var task *tatarav1.Task
	var project *tatarav1.Project
	reports := []struct{ category, severity, level string }{
		{"tool_error", "error", "ERROR"},
		{"tool_error", "warn", "WARN"},
		{"workspace_broken", "warn", "WARN"},
	}
	f := features.New("report_internal_issue end to end, real agent, real Prometheus").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			project = projectCopy(ctx, t, cfg, "report-issue", withToolSearch(tatarav1.ToolSearchOff))
			var steps []string
			for _, rep := range reports {
				steps = append(steps, fmt.Sprintf(`call report_internal_issue {"category":%q,"severity":%q,"description":"e2e %s report","offending_tool":"code_search","resource_id":"demo"}`,
					rep.category, rep.severity, rep.severity))
			}
			task = newTask("report-issue", project.Name, tatarav1.KindBrainstorm, modelScript("report-issue", append(steps, "say reports sent")...))
			if err := r.Create(ctx, task); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("the cli and the wrapper each log every report at its severity", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			pod := finishedAgentPod(ctx, t, r, cs, task)
			checkModelSawProfile(ctx, t, cs, task.Name, "brainstorm", false)
			wrapperLog := podLogs(ctx, cs, pod, "wrapper")
			cliLog := podLogs(ctx, cs, pod, "cli")
			for _, rep := range reports {
				cliLines := logRecords(t, cliLog, func(rec map[string]any) bool {
					return rec["msg"] == "internal issue reported" && rec["category"] == rep.category && rec["severity"] == rep.severity
				})
				if len(cliLines) != 1 || cliLines[0]["level"] != rep.level ||
					cliLines[0]["task"] != task.Name || cliLines[0]["project"] != project.Name || cliLines[0]["offending_tool"] != "code_search" {
					t.Errorf("cli log lines for %s/%s = %v, want one %s line with task, project and offending_tool", rep.category, rep.severity, cliLines, rep.level)
				}
				wrapperLines := logRecords(t, wrapperLog, func(rec map[string]any) bool {
					return rec["action"] == "internal_issue_report" && rec["category"] == rep.category && rec["severity"] == rep.severity
				})
				if len(wrapperLines) != 1 || wrapperLines[0]["level"] != rep.level || wrapperLines[0]["resource_id"] != "demo" {
					t.Errorf("wrapper log lines for %s/%s = %v, want one %s line with action=internal_issue_report", rep.category, rep.severity, wrapperLines, rep.level)
				}
			}
			return ctx
		}).
		Assess("Prometheus has both counts, and both alerts fire with the report's severity", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			sel := fmt.Sprintf(`namespace=%q,task=%q`, agentNamespace, task.Name)
			for _, rep := range reports {
				for _, metric := range []string{"tatara_mcp_internal_issue_total", "tatara_wrapper_internal_issue_total"} {
					expr := fmt.Sprintf(`max_over_time(%s{%s,category=%q,severity=%q}[30m])`, metric, sel, rep.category, rep.severity)
					waitProm(ctx, t, cs, metric+" of the report", expr, oneSample(1))
				}
			}
			// The real agent CLI's own transcript records are all known to the wrapper.
			waitProm(ctx, t, cs, "transcript events counted as other",
				fmt.Sprintf(`max_over_time(tatara_wrapper_stream_events_total{%s,type="other"}[30m])`, sel), oneSample(0))
			for _, alert := range []string{"TataraMCPInternalIssueReported", "TataraWrapperInternalIssueReported"} {
				for _, rep := range reports {
					expr := fmt.Sprintf(`ALERTS{alertname=%q,alertstate="firing",namespace=%q,project=%q,task_kind="brainstorm",category=%q,report_severity=%q,severity="warning"}`,
						alert, agentNamespace, project.Name, rep.category, rep.severity)
					waitProm(ctx, t, cs, alert+" for "+rep.category+"/"+rep.severity, expr, oneSample(1))
				}
			}
			// Nothing held the pod but its final scrape: it has ended, and both containers say
			// Prometheus scraped them before they exited.
			pod := terminalPod(ctx, t, r, task)
			for _, c := range []string{"cli", "wrapper"} {
				final := logRecords(t, podLogs(ctx, cs, pod, c), func(rec map[string]any) bool { return rec["msg"] == "final metrics scrape" })
				if len(final) != 1 || final[0]["scraped"] != true {
					t.Errorf("container %s: 'final metrics scrape' lines = %v, want one with scraped=true", c, final)
				}
			}
			return ctx
		}).
		Assess("every Prometheus query of the dashboard parses and returns data", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_, cs := clients(t, cfg)
			checkDashboardQueries(ctx, t, cs)
			return ctx
		}).
		Teardown(deleting(&task, &project)).Feature()
	testenv.Test(t, f)
}

// TestTerminalIntent: the real agent of an implement Task records change_summary then
// pr_outcome through the cli; the operator records both, the agent exits, and the Task ends
// Succeeded with the outcome in its status.
func TestTerminalIntent(t *testing.T) {
	sharedFeature(t)
	var task *tatarav1.Task
	f := features.New("terminal intent, real agent").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			task = newTask("terminal-intent", kindProject, tatarav1.KindImplement, modelScript("terminal-intent",
				`call change_summary {"summary":"e2e: add the widget"}`,
				`call pr_outcome {"outcome":"opened","url":"https://git.example.com/tatara/demo/merge_requests/1"}`,
				"say done"))
			if err := r.Create(ctx, task); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("the Task ends Succeeded with the pr_outcome and the change summary recorded", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			var cur tatarav1.Task
			err := wait.For(func(ctx context.Context) (bool, error) {
				if err := r.Get(ctx, task.Name, task.Namespace, &cur); err != nil {
					return false, err
				}
				return cur.Status.Phase.Terminal(), nil
			}, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(2*time.Second))
			if err != nil {
				t.Fatalf("task never reached a final phase: %v; status %+v", err, cur.Status)
			}
			if cur.Status.Phase != tatarav1.PhaseSucceeded {
				t.Errorf("phase = %s, want Succeeded; conditions %+v", cur.Status.Phase, cur.Status.Conditions)
			}
			if cur.Status.Outcome == nil || cur.Status.Outcome.Intent != "pr_outcome" || cur.Status.Outcome.Value != "opened" {
				t.Errorf("outcome = %+v, want pr_outcome opened", cur.Status.Outcome)
			}
			if !strings.Contains(cur.Status.ChangeSummary, "add the widget") {
				t.Errorf("changeSummary = %q", cur.Status.ChangeSummary)
			}
			checkModelSawProfile(ctx, t, cs, task.Name, "implement", false)
			return ctx
		}).
		Teardown(deleting(&task)).Feature()
	testenv.Test(t, f)
}

// checkAgentImageHostsWrapper: with the Project's agent image, the main container runs that image
// and the wrapper reached it through the pod's first init container, from the wrapper image pinned
// in helmfile: workspace-init, which also clones, when the Task names a repo, else
// wrapper-install. The real kubelet ran it to completion.
func checkAgentImageHostsWrapper(ctx context.Context, t *testing.T, r *resources.Resources, pod *corev1.Pod) {
	t.Helper()
	var project tatarav1.Project
	if err := r.Get(ctx, kindProject, agentNamespace, &project); err != nil {
		t.Fatal(err)
	}
	wrapperImage := "tatara.local/tatara-wrapper:" + helmfilePins(t)["tatara-wrapper"]
	if c, ok := container(pod, "wrapper"); !ok || project.Spec.Agent.Image == "" || c.Image != project.Spec.Agent.Image {
		t.Errorf("pod %s main container image = %q, want the Project's agent image %q", pod.Name, c.Image, project.Spec.Agent.Image)
	}
	installer := "wrapper-install"
	if _, ok := container(pod, "workspace-init"); ok {
		installer = "workspace-init"
	}
	if len(pod.Spec.InitContainers) == 0 || pod.Spec.InitContainers[0].Name != installer {
		t.Errorf("pod %s: the first init container is not %s", pod.Name, installer)
	}
	if c, ok := container(pod, installer); !ok || c.Image != wrapperImage {
		t.Errorf("pod %s %s image = %q, want %q", pod.Name, installer, c.Image, wrapperImage)
	}
	i := slices.IndexFunc(pod.Status.InitContainerStatuses, func(st corev1.ContainerStatus) bool { return st.Name == installer })
	if i < 0 {
		t.Errorf("pod %s has no %s status", pod.Name, installer)
	} else if st := pod.Status.InitContainerStatuses[i]; st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
		t.Errorf("pod %s %s did not complete: %+v", pod.Name, installer, st.State)
	}
}
