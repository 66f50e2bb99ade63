package charts_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// releaseCheckPod returns the one Helm test hook of a render: the release check's pod.
func releaseCheckPod(t *testing.T, chart string, r *rendered) *unstructured.Unstructured {
	t.Helper()
	if len(r.hooks) != 1 {
		t.Fatalf("%s renders %d hooks, want exactly one (the release check's pod)", chart, len(r.hooks))
	}
	pod := r.hooks[0]
	if pod.GetKind() != "Pod" || pod.GetName() != chart+"-release-check" {
		t.Fatalf("%s's hook is %s, want Pod %s-release-check", chart, describe(pod), chart)
	}
	return pod
}

func releaseCheckContainer(t *testing.T, pod *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs := nested(t, pod, "spec", "containers").([]any)
	if len(cs) != 1 {
		t.Fatalf("%s has %d containers, want 1", describe(pod), len(cs))
	}
	return cs[0].(map[string]any)
}

func stringList(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// releaseImage is the image of a render's own component: the runtime ConfigMap's for the cli and
// wrapper, the operator container's for the operator, and the operator image of the chart's
// appVersion for the project (its default values; helmfile sets the registry).
func releaseImage(t *testing.T, chart string, r *rendered) string {
	t.Helper()
	switch chart {
	case "tatara-cli", "tatara-wrapper":
		return nested(t, r.find("ConfigMap", chart+"-runtime"), "data", "image").(string)
	case "tatara-operator":
		dep := r.find("Deployment", "tatara-operator")
		return nested(t, dep, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["image"].(string)
	default:
		op := mustRender(t, "tatara-operator", nil)
		return releaseImage(t, "tatara-operator", op)
	}
}

// TestReleaseCheckPodIsAPinnedRestrictedTestHook: every chart ships exactly one Helm test hook,
// <release>-release-check, deleted before the next run creates it again; it runs once
// (restartPolicy Never) in the release's own image, meets the restricted Pod Security Standard
// with small resources, and passes the chart's appVersion, against which the image checks itself.
func TestReleaseCheckPodIsAPinnedRestrictedTestHook(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, tc.chart, tc.vals)
			pod := releaseCheckPod(t, tc.chart, r)
			ann := pod.GetAnnotations()
			if ann["helm.sh/hook"] != "test" || ann["helm.sh/hook-delete-policy"] != "before-hook-creation" {
				t.Errorf("annotations %v, want helm.sh/hook=test and hook-delete-policy=before-hook-creation", ann)
			}
			if got := nested(t, pod, "spec", "restartPolicy"); got != "Never" {
				t.Errorf("restartPolicy %v, want Never", got)
			}
			if pod.GetNamespace() != namespaceOf[tc.chart] {
				t.Errorf("namespace %q, want the release's %q", pod.GetNamespace(), namespaceOf[tc.chart])
			}
			psc := nested(t, pod, "spec", "securityContext").(map[string]any)
			if psc["runAsNonRoot"] != true || psc["runAsUser"] != int64(65532) ||
				!reflect.DeepEqual(psc["seccompProfile"], map[string]any{"type": "RuntimeDefault"}) {
				t.Errorf("pod securityContext %v is not restricted (runAsNonRoot, runAsUser 65532, RuntimeDefault seccomp)", psc)
			}
			c := releaseCheckContainer(t, pod)
			sc := c["securityContext"].(map[string]any)
			if sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true || sc["runAsNonRoot"] != true ||
				!reflect.DeepEqual(sc["capabilities"], map[string]any{"drop": []any{"ALL"}}) ||
				!reflect.DeepEqual(sc["seccompProfile"], map[string]any{"type": "RuntimeDefault"}) {
				t.Errorf("container securityContext %v is not restricted", sc)
			}
			res := c["resources"].(map[string]any)
			req, lim := res["requests"].(map[string]any), res["limits"].(map[string]any)
			if req["cpu"] == nil || req["memory"] == nil || lim["memory"] == nil {
				t.Errorf("resources %v: want cpu and memory requests and a memory limit (the agent namespace's quota needs them)", res)
			}
			if want := releaseImage(t, tc.chart, r); c["image"] != want {
				t.Errorf("image %v, want the release's own %s", c["image"], want)
			}
			args := stringList(c["args"])
			if args[0] != "release-check" {
				t.Errorf("args %v do not start with release-check", args)
			}
			component := map[string]string{"tatara-cli": "cli", "tatara-wrapper": "wrapper", "tatara-operator": "operator", "tatara-project": "operator"}[tc.chart]
			appVersion := componentVersion(t, loadPins(t), component)
			if !slices.Contains(args, "--app-version="+appVersion) {
				t.Errorf("args %v lack --app-version=%s (the chart's appVersion)", args, appVersion)
			}
		})
	}
}

// TestCLIReleaseCheckGetsTheGoldenToolCounts: the cli's test pod carries tool-counts.json (which
// the cli's TestChartToolCountsUpToDate keeps equal to the catalog) and mounts the runtime
// ConfigMap it checks, optionally, so a missing ConfigMap is a FAIL line and not a pod that never
// starts.
func TestCLIReleaseCheckGetsTheGoldenToolCounts(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir(t, "tatara-cli"), "tool-counts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Profiles map[string]int `json:"profiles"`
		FailOpen int            `json:"failOpen"`
	}
	if err := json.Unmarshal(raw, &want); err != nil || len(want.Profiles) == 0 || want.FailOpen == 0 {
		t.Fatalf("tool-counts.json %s: %v (want profiles and failOpen)", raw, err)
	}
	for _, chart := range []string{"tatara-cli", "tatara-wrapper"} {
		t.Run(chart, func(t *testing.T) {
			pod := releaseCheckPod(t, chart, mustRender(t, chart, nil))
			args := stringList(releaseCheckContainer(t, pod)["args"])
			var counts string
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "--tool-counts="); ok {
					counts = v
				}
			}
			if chart == "tatara-cli" {
				var got struct {
					Profiles map[string]int `json:"profiles"`
					FailOpen int            `json:"failOpen"`
				}
				if err := json.Unmarshal([]byte(counts), &got); err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("--tool-counts %q (%v), want the content of tool-counts.json %+v", counts, err, want)
				}
			} else if counts != "" {
				t.Errorf("the wrapper's check got --tool-counts")
			}
			vols := nested(t, pod, "spec", "volumes").([]any)
			cm := vols[0].(map[string]any)["configMap"].(map[string]any)
			if cm["name"] != chart+"-runtime" || cm["optional"] != true {
				t.Errorf("volume %v, want the optional ConfigMap %s-runtime", cm, chart)
			}
			if pod.Object["spec"].(map[string]any)["automountServiceAccountToken"] != false {
				t.Error("the cli and wrapper checks need no API access, yet a token is mounted")
			}
		})
	}
}

// selectors returns every pod selector of a render: Deployments', Services', NetworkPolicies'
// (their target and every pod peer) and PodMonitors'.
func selectors(t *testing.T, objs []*unstructured.Unstructured) map[string]labels.Selector {
	t.Helper()
	out := map[string]labels.Selector{}
	add := func(what string, v any) {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var ls metav1.LabelSelector
		if err := json.Unmarshal(raw, &ls); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sel, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		out[what] = sel
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			add(describe(o)+" spec.selector", nested(t, o, "spec", "selector"))
		case "Service":
			add(describe(o)+" spec.selector", map[string]any{"matchLabels": nested(t, o, "spec", "selector")})
		case "PodMonitor":
			add(describe(o)+" spec.selector", nested(t, o, "spec", "selector"))
		case "NetworkPolicy":
			add(describe(o)+" spec.podSelector", nested(t, o, "spec", "podSelector"))
		}
	}
	return out
}

// TestNoSelectorOfTheReleaseMatchesItsReleaseCheck: the release check's pod has labels of its own
// (name <chart>-release-check, component release-check): no Deployment would adopt it, no Service
// would route to it, and no NetworkPolicy of the release confines it. The Deployment's selector
// does match its own pod template, so the comparison can fail.
func TestNoSelectorOfTheReleaseMatchesItsReleaseCheck(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, tc.chart, tc.vals)
			pod := releaseCheckPod(t, tc.chart, r)
			podLabels := labels.Set(pod.GetLabels())
			if podLabels["app.kubernetes.io/component"] != "release-check" || podLabels["app.kubernetes.io/name"] != tc.chart+"-release-check" {
				t.Errorf("labels %v, want component release-check and name %s-release-check", podLabels, tc.chart)
			}
			sels := selectors(t, r.objects)
			for what, sel := range sels {
				if sel.Empty() {
					t.Errorf("%s selects every pod", what)
				}
				if sel.Matches(podLabels) {
					t.Errorf("%s (%s) matches the release check's pod %v", what, sel, podLabels)
				}
			}
			if dep := r.find("Deployment", ""); dep != nil {
				raw := nested(t, dep, "spec", "template", "metadata", "labels").(map[string]any)
				set := labels.Set{}
				for k, v := range raw {
					set[k] = v.(string)
				}
				if !sels[describe(dep)+" spec.selector"].Matches(set) {
					t.Errorf("the Deployment's selector does not match its own pod template %v: the check above proves nothing", set)
				}
			}
		})
	}
}

// TestOperatorNetworkPolicyAdmitsTheReleaseCheck: the operator's NetworkPolicy has a rule that
// admits exactly the release check's pod (same namespace, its labels) to the api and metrics ports,
// so GET /healthz and /metrics through the Service work where NetworkPolicies are enforced.
func TestOperatorNetworkPolicyAdmitsTheReleaseCheck(t *testing.T) {
	r := mustRender(t, "tatara-operator", nil)
	pod := releaseCheckPod(t, "tatara-operator", r)
	np := r.find("NetworkPolicy", "tatara-operator")
	var admitted []string
	for _, rule := range rules(t, np, "ingress") {
		for _, peer := range rule["from"].([]any) {
			p := peer.(map[string]any)
			if p["namespaceSelector"] != nil || p["podSelector"] == nil {
				continue
			}
			var ls metav1.LabelSelector
			raw, _ := json.Marshal(p["podSelector"])
			if err := json.Unmarshal(raw, &ls); err != nil {
				t.Fatal(err)
			}
			sel, err := metav1.LabelSelectorAsSelector(&ls)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Empty() {
				t.Errorf("a same-namespace peer selects every pod: %v", p)
			}
			if !sel.Matches(labels.Set(pod.GetLabels())) {
				continue
			}
			for _, port := range rule["ports"].([]any) {
				admitted = append(admitted, port.(map[string]any)["port"].(string))
			}
		}
	}
	slices.Sort(admitted)
	if !reflect.DeepEqual(admitted, []string{"api", "metrics"}) {
		t.Errorf("the release check's pod is admitted to ports %v, want [api metrics]", admitted)
	}
}

// TestReleaseCheckRBACIsExact: the operator and project checks read the cluster as
// <release>-release-check, an ordinary release object (not a hook: helm test --logs reads every
// hook as a pod) with no automounted token; only the test pod mounts one. Its Role grants get on
// exactly the checked objects, by name, and follows the values that render them.
func TestReleaseCheckRBACIsExact(t *testing.T) {
	type rule struct {
		Resource string
		Names    []string
	}
	tests := []struct {
		name  string
		chart string
		vals  map[string]any
		want  []rule
		args  []string // args the pod must have
		nargs []string // args the pod must not have
	}{
		{name: "operator", chart: "tatara-operator", want: []rule{{"deployments", []string{"tatara-operator"}}},
			args: []string{"--deployment=tatara-operator", "--service=tatara-operator", "--namespace=tatara-system", "--api-port=8082", "--metrics-port=8080",
				"--api-ca-file=/var/run/tatara/api-tls/ca.crt"}},
		{name: "operator with a mounted API certificate", chart: "tatara-operator", vals: apiTLSOn(), want: []rule{{"deployments", []string{"tatara-operator"}}},
			args: []string{"--api-ca-file=/var/run/tatara/api-tls/ca.crt"}},
		{name: "operator without API TLS", chart: "tatara-operator", vals: apiTLSOff(), want: []rule{{"deployments", []string{"tatara-operator"}}},
			nargs: []string{"--api-ca-file=/var/run/tatara/api-tls/ca.crt"}},
		{name: "project", chart: "tatara-project", want: []rule{
			{"projects", []string{"tatara-project"}}, {"limitranges", []string{"tatara-project-limits"}},
			{"resourcequotas", []string{"tatara-project-quota"}}, {"networkpolicies", []string{"tatara-project-agents"}},
		}, args: []string{"project", "--project=tatara-project", "--namespace=tatara-agents", "--limit-range=tatara-project-limits",
			"--resource-quota=tatara-project-quota", "--network-policy=tatara-project-agents"}},
		{name: "project without limits and policy", chart: "tatara-project",
			vals: map[string]any{"namespaceLimits": map[string]any{"enabled": false}, "networkPolicy": map[string]any{"enabled": false}},
			want: []rule{{"projects", []string{"tatara-project"}}},
			args: []string{"--project=tatara-project"}, nargs: []string{"--limit-range=tatara-project-limits", "--network-policy=tatara-project-agents"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, tc.chart, tc.vals)
			name := tc.chart + "-release-check"
			sa, role, rb := r.find("ServiceAccount", name), r.find("Role", name), r.find("RoleBinding", name)
			if sa == nil || role == nil || rb == nil {
				t.Fatalf("want ServiceAccount, Role and RoleBinding %s among the release's objects, got %v", name, r.kinds())
			}
			for _, o := range []*unstructured.Unstructured{sa, role, rb} {
				if _, hook := o.GetAnnotations()["helm.sh/hook"]; hook {
					t.Errorf("%s is a hook", describe(o))
				}
			}
			if sa.Object["automountServiceAccountToken"] != false {
				t.Errorf("%s automounts its token", describe(sa))
			}
			var got []rule
			for _, raw := range nested(t, role, "rules").([]any) {
				m := raw.(map[string]any)
				verbs, res := stringList(m["verbs"]), stringList(m["resources"])
				if !reflect.DeepEqual(verbs, []string{"get"}) || len(res) != 1 || m["resourceNames"] == nil {
					t.Errorf("rule %v: want verb get on one resource, by resourceNames", m)
					continue
				}
				got = append(got, rule{res[0], stringList(m["resourceNames"])})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rules %+v, want %+v", got, tc.want)
			}
			var binding rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rb.Object, &binding); err != nil {
				t.Fatal(err)
			}
			if binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != name || len(binding.Subjects) != 1 ||
				binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != name || binding.Subjects[0].Namespace != namespaceOf[tc.chart] {
				t.Errorf("RoleBinding %+v does not bind Role %s to ServiceAccount %s", binding, name, name)
			}
			pod := releaseCheckPod(t, tc.chart, r)
			spec := pod.Object["spec"].(map[string]any)
			if spec["serviceAccountName"] != name || spec["automountServiceAccountToken"] != true {
				t.Errorf("pod serviceAccountName %v, automountServiceAccountToken %v; want %s and true", spec["serviceAccountName"], spec["automountServiceAccountToken"], name)
			}
			args := stringList(releaseCheckContainer(t, pod)["args"])
			for _, a := range tc.args {
				if !slices.Contains(args, a) {
					t.Errorf("args %v lack %s", args, a)
				}
			}
			for _, a := range tc.nargs {
				if slices.Contains(args, a) {
					t.Errorf("args %v have %s", args, a)
				}
			}
		})
	}
}
