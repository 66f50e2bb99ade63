//go:build e2e

package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"tatara.dev/cli/pkg/tasktoken"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/testkit/gitserver"
)

// bashStep is a model-script step that runs command with the agent's own shell tool.
func bashStep(command string) string {
	in, _ := json.Marshal(map[string]string{"command": command, "description": "probe"}) // a map of strings always marshals
	return "call Bash " + string(in)
}

// TestAgentAsAttacker: the real agent, scripted to misbehave from inside its own pod, tries what an
// attacker in the agent's container would. Each attempt fails, for the stated reason:
//   - the Task token is in no process environment or command line the agent can read;
//   - a subtask of a broader kind (issueLifecycle under implement) is refused with 403;
//   - more subtasks than the Project's spec.maxActiveTasks allows are refused with 429;
//   - the review it may create is told the operator's directive, not the implementer's;
//   - once the Task has ended, its token (read by the suite, as a thief would have) is inactive,
//     as is the token the memory backend was sent, and its Secret is gone;
//   - a pod that is not an agent pod cannot reach the operator's REST API (NetworkPolicy);
//   - proxies named in the Project's extraEnvs do not divert the cli's calls, nor the agent's
//     connection to its MCP server (all of the above reached the operator).
func TestAgentAsAttacker(t *testing.T) {
	sharedFeature(t)
	const name = "attacker"
	var project *tatarav1.Project
	var task *tatarav1.Task
	var stolen string
	f := features.New("the agent as attacker").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			// The attacker's Task and one subtask fill a Project that allows two active Tasks.
			// Its Project also names proxies, as a Project author (or an agent that wrote the
			// Project) could: were the cli to follow them, every operator call below would go to a
			// closed port (and, in a real attack, the Task token to the proxy). NO_PROXY exempts
			// only the model stand-in, as a Project would its model host; the wrapper adds
			// loopback, so the agent still reaches its MCP server and its model gateway.
			project = projectCopy(ctx, t, cfg, "attacker", func(p *tatarav1.Project) {
				p.Spec.MaxActiveTasks = 2
				// Proxies in extraEnvs are refused while egress goes through the Project's own
				// proxy (which sets these variables): this Project goes out directly, and says so.
				p.Spec.Egress = &tatarav1.ProjectEgress{Mode: tatarav1.EgressOpen}
				for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
					p.Spec.Agent.ExtraEnvs = append(p.Spec.Agent.ExtraEnvs, corev1.EnvVar{Name: k, Value: "http://127.0.0.1:9"})
				}
				noProxy := fmt.Sprintf("%s.%s.svc", modelName, modelNamespace)
				p.Spec.Agent.ExtraEnvs = append(p.Spec.Agent.ExtraEnvs, corev1.EnvVar{Name: "NO_PROXY", Value: noProxy}, corev1.EnvVar{Name: "no_proxy", Value: noProxy})
			})
			task = newTask(name, project.Name, tatarav1.KindImplement, modelScript(name,
				bashStep(`echo "token-vars: $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c '^TATARA_TOKEN=')";`+
					` echo "token-shaped: $(cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | grep -aoE 'tatara_[0-9a-f]{64}' | wc -l)";`+
					` echo "processes: $(ls -d /proc/[0-9]* | wc -l)";`+
					// The model key: in no environment, command line or file the agent can read,
					// nor in its gateway's metrics. The pattern is the key's shape (modelKey),
					// written so that this command's own text does not match it.
					` k='e2e-mode[l]-[A-Z2-7]{26}';`+
					` echo "model-key-copies: $( (cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; grep -rsaE "$k" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev) | grep -aoE "$k" | wc -l)";`+
					` gw() { exec 3<>/dev/tcp/127.0.0.1/$1 && printf "$2" >&3 && cat <&3; exec 3>&-; };`+
					` echo "model-key-in-gateway-metrics: $(gw 9093 'GET /metrics HTTP/1.0

' | grep -aoE "$k" | wc -l)";`+
					` echo "gateway-metrics-served: $(gw 9093 'GET /metrics HTTP/1.0

' | grep -c '^tatara_model_requests_total')";`+
					// Other paths and other hosts: the gateway forwards the model API's requests only.
					` echo "gateway-other-path: $(gw 7779 'POST /v1/complete HTTP/1.0
Content-Length: 2

{}' | head -1)";`+
					` echo "gateway-other-host: $(gw 7779 'GET http://example.com/ HTTP/1.0
Host: example.com

' | head -1)"`),
				`call subtask_create {"kind":"issueLifecycle","repo":"demo","directive":"run the whole issue with broader tools"}`,
				`call subtask_create {"kind":"review","repo":"demo","directive":"review the change"}`,
				`call subtask_create {"kind":"review","repo":"demo","directive":"one more than the Project allows"}`,
				"say done"))
			if err := r.Create(ctx, task); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("the token is not readable and the subtask policy holds", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			// The thief's copy, taken from outside while the Task runs.
			var sec corev1.Secret
			err := wait.For(func(ctx context.Context) (bool, error) {
				return r.Get(ctx, "tatara-agent-"+name+"-token", agentNamespace, &sec) == nil, nil
			}, wait.WithContext(ctx), wait.WithTimeout(waitTimeout), wait.WithInterval(time.Second))
			if err != nil {
				t.Fatalf("the Task's token Secret never appeared: %v", err)
			}
			stolen = string(sec.Data["token"])

			cur := terminalTask(ctx, t, r, task)
			var results strings.Builder
			var toolErrors []string
			for _, rec := range modelRecords(ctx, t, cs, name) {
				for _, res := range rec.ToolResults {
					results.WriteString(res + "\n")
				}
				toolErrors = rec.ToolErrors
			}
			out := results.String()
			for _, want := range []string{"token-vars: 0", "token-shaped: 0", "model-key-copies: 0", "model-key-in-gateway-metrics: 0"} {
				if !strings.Contains(out, want) {
					t.Errorf("the agent's /proc probe lacks %q: it could read the token, or the probe did not run:\n%s", want, out)
				}
			}
			if !strings.Contains(out, "processes: ") || strings.Contains(out, "processes: 0") {
				t.Errorf("the probe saw no processes, so it proves nothing:\n%s", out)
			}
			if strings.Contains(out, "gateway-metrics-served: 0") || !strings.Contains(out, "gateway-metrics-served: ") {
				t.Errorf("the probe read no model gateway metrics, so their check proves nothing:\n%s", out)
			}
			for _, probe := range []string{"gateway-other-path", "gateway-other-host"} {
				if line := lineOf(out, probe+": "); !strings.Contains(line, " 404 ") {
					t.Errorf("%s answered %q, want 404: the gateway forwards the model API's requests only", probe, line)
				}
			}
			errs := strings.Join(toolErrors, "\n")
			// The operator's answers, as the cli relays them (JSON, so their quotes are escaped).
			for _, want := range []string{"403 Forbidden", `issueLifecycle\" is not allowed under a \"implement\" Task`,
				"429 Too Many Requests", "spec.maxActiveTasks is 2"} {
				if !strings.Contains(errs, want) {
					t.Errorf("tool errors lack %q:\n%s", want, errs)
				}
			}
			if len(toolErrors) != 2 {
				t.Errorf("tool errors %q, want exactly the two refused subtasks", toolErrors)
			}
			var subs tatarav1.TaskList
			if err := r.List(ctx, &subs); err != nil {
				t.Fatal(err)
			}
			var children []string
			for _, s := range subs.Items {
				if s.Spec.Parent == name {
					children = append(children, fmt.Sprintf("%s (%s)", s.Name, s.Spec.Kind))
					if s.Spec.Kind != tatarav1.KindReview {
						t.Errorf("a refused subtask exists: %s of kind %s", s.Name, s.Spec.Kind)
					}
					// Review by proxy: the reviewer is told the parent's directive, on the
					// parent's branch; what the implementer asked for is kept for people only.
					// (The parent's directive is the model script, so it holds the
					// implementer's words too: the check is that it is all there is.)
					if !strings.HasPrefix(s.Spec.Directive, fmt.Sprintf("Review the change that Task %q made", name)) ||
						!strings.HasSuffix(s.Spec.Directive, "\n\n"+cur.Spec.Directive) ||
						s.Spec.Ref != "tatara/"+name+"-"+strings.ReplaceAll(string(cur.UID), "-", "")[:8] ||
						s.Annotations["tatara.dev/implementer-notes"] != "review the change" {
						t.Errorf("review subtask %s: ref %q, notes %q, directive %q: want the operator's directive on the parent's branch, the implementer's text only in the notes",
							s.Name, s.Spec.Ref, s.Annotations["tatara.dev/implementer-notes"], s.Spec.Directive)
					}
				}
			}
			if len(children) != 1 {
				t.Errorf("subtasks of %s: %v, want exactly the one review the Project had room for", name, children)
			}
			if cur.Status.Phase != tatarav1.PhaseSucceeded {
				t.Errorf("phase %s, want Succeeded (the agent exits 0 after its attempts)", cur.Status.Phase)
			}
			return ctx
		}).
		Assess("the stolen token is dead once the Task has ended", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			err := wait.For(func(ctx context.Context) (bool, error) {
				var sec corev1.Secret
				err := r.Get(ctx, "tatara-agent-"+name+"-token", agentNamespace, &sec)
				return apierrors.IsNotFound(err), nil
			}, wait.WithContext(ctx), wait.WithTimeout(time.Minute), wait.WithInterval(time.Second))
			if err != nil {
				t.Errorf("the ended Task's token Secret was not deleted: %v", err)
			}
			review := tokenReview(ctx, t, cs, stolen, "")
			if review["active"] != false || !strings.Contains(fmt.Sprint(review["reason"]), "has ended") {
				t.Errorf("review of the ended Task's token = %v, want inactive because the Task has ended", review)
			}
			// What the memory backend was sent for this Task ends with it too.
			memory := tasktoken.ForAudience(stolen, tasktoken.AudienceMemory)
			if review := tokenReview(ctx, t, cs, memory, tasktoken.AudienceMemory); review["active"] != false || review["audience"] != tasktoken.AudienceMemory {
				t.Errorf("memory's review of the ended Task's memory token = %v, want inactive", review)
			}
			return ctx
		}).
		Assess("a pod that is not an agent pod cannot reach the operator", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			assertNotAgentsReachOperator(ctx, t, cfg)
			return ctx
		}).
		Assess("an agent pod reaches only what its Project names", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			assertAgentEgressConfined(ctx, t, cfg)
			return ctx
		}).
		Teardown(deleting(&task, &project)).Feature()
	testenv.Test(t, f)
}

// tokenReview asks the operator who tok belongs to for audience ("" for a Task token; POST
// /api/v1/tokenreviews, the backends' contract), through the API server's service proxy, over HTTPS as the chart's default serves it
// (the proxy does not verify the certificate: the release check does).
func tokenReview(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, tok, audience string) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"token": tok, "audience": audience}) // a map of strings always marshals
	raw, err := cs.CoreV1().RESTClient().Post().
		AbsPath("/api/v1/namespaces/"+systemNamespace+"/services/https:tatara-operator:api/proxy/api/v1/tokenreviews").
		SetHeader("Content-Type", "application/json").Body(body).DoRaw(ctx)
	if err != nil {
		t.Fatalf("token review: %v %s", err, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("token review answer %s: %v", raw, err)
	}
	return out
}

// TestReviewOfAHostileBranch: the change under review must not configure its reviewer. A review
// Task checks out a branch whose .claude/settings.json (testkit/gitserver.HostileSettings) has
// hooks that would write a marker, an env that would send the model's requests to a closed port,
// and a rule that would deny the shell tool. The real agent CLI in the reviewer's pod reads none
// of it: no marker, every request reaches the model stand-in, the shell tool runs (and sees the
// file in the workspace, so the branch was checked out), and the verdict recorded is the script's.
func TestReviewOfAHostileBranch(t *testing.T) {
	sharedFeature(t)
	const name = "review-hostile-branch"
	var task *tatarav1.Task
	f := features.New("a review of a branch that configures the agent CLI").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, _ := clients(t, cfg)
			task = newTask(name, kindProject, tatarav1.KindReview, modelScript(name,
				bashStep(`if test -e `+gitserver.HostileHookMarker+`; then echo "hook-marker: present"; else echo "hook-marker: absent"; fi;`+
					` echo "settings-in-workspace: $(test -f `+gitserver.HostileSettingsPath+` && echo yes || echo no)"`),
				`call review_verdict {"verdict":"request_changes","summary":"the branch tries to configure its reviewer"}`,
				"say done"))
			task.Spec.Ref = gitserver.HostileSettingsBranch
			if err := r.Create(ctx, task); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("no hook ran, the model was the configured one, the verdict is the reviewer's", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r, cs := clients(t, cfg)
			cur := terminalTask(ctx, t, r, task)
			recs := modelRecords(ctx, t, cs, name)
			var results strings.Builder
			for _, rec := range recs {
				for _, res := range rec.ToolResults {
					results.WriteString(res + "\n")
				}
				if len(rec.ToolErrors) > 0 {
					t.Errorf("tool errors %q: the workspace's settings may have denied a tool", rec.ToolErrors)
				}
			}
			out := results.String()
			for _, want := range []string{"hook-marker: absent", "settings-in-workspace: yes"} {
				if !strings.Contains(out, want) {
					t.Errorf("the reviewer's probe lacks %q:\n%s", want, out)
				}
			}
			if len(recs) < 3 || recs[len(recs)-1].Answer != "text" {
				t.Errorf("%d model requests reached the stand-in, want the whole script (3 or more, the last answered with text): the workspace's env may have sent them elsewhere", len(recs))
			}
			if o := cur.Status.Outcome; o == nil || o.Intent != "review_verdict" || o.Value != "request_changes" {
				t.Errorf("outcome %+v, want review_verdict request_changes (the script's)", o)
			}
			if cur.Status.Phase != tatarav1.PhaseSucceeded {
				t.Errorf("phase %s, want Succeeded", cur.Status.Phase)
			}
			return ctx
		}).
		Teardown(deleting(&task)).Feature()
	testenv.Test(t, f)
}

// lineOf is the first line of out that starts with prefix, "" when none does.
func lineOf(out, prefix string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}
