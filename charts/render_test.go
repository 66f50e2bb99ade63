package charts_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// requiredLabels are the labels every rendered object carries (the helpers' labels).
var requiredLabels = []string{
	"helm.sh/chart",
	"app.kubernetes.io/name",
	"app.kubernetes.io/instance",
	"app.kubernetes.io/version",
	"app.kubernetes.io/managed-by",
	"app.kubernetes.io/part-of",
	"app.kubernetes.io/component",
}

type renderCase struct {
	name  string
	chart string
	vals  map[string]any
}

// renderCases is every chart with its default values, with monitoring on where it has it, and
// the operator with REST API TLS on.
func renderCases() []renderCase {
	var cases []renderCase
	for _, c := range chartNames {
		cases = append(cases, renderCase{name: c + "/defaults", chart: c})
	}
	for _, c := range monitoringCharts {
		cases = append(cases, renderCase{name: c + "/monitoring", chart: c, vals: monitoringOn()})
	}
	cases = append(cases, renderCase{name: "tatara-project/full", chart: "tatara-project", vals: fullProjectValues()})
	cases = append(cases, renderCase{name: "tatara-operator/api-tls", chart: "tatara-operator", vals: apiTLSOn()})
	return cases
}

func fullProjectValues() map[string]any {
	return map[string]any{
		"repos": map[string]any{
			"operator": map[string]any{"url": "https://git.example.com/tatara/operator.git", "defaultBranch": "main",
				"credentialsSecret": "operator-read", "pushSecret": "operator-push"},
			"cli": map[string]any{"url": "https://git.example.com/tatara/cli.git"},
		},
		"workspace":      map[string]any{"cloneDepth": 0, "timeoutSeconds": 60},
		"maxActiveTasks": 20,
		"agent": map[string]any{
			"image":      "tatara.local/tatara-agent-standin:0.0.0-test",
			"binaryPath": "/agent",
			"extraEnvs": map[string]any{"TATARA_TOOL_PROFILE": "review", "LOG_LEVEL": "debug",
				"ANTHROPIC_API_KEY": map[string]any{"secretKeyRef": map[string]any{"name": "agent-model", "key": "api-key"}}},
			"runtimeClassName":     "gvisor",
			"resources":            map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "256Mi"}, "limits": map[string]any{"memory": "2Gi"}},
			"serviceAccountName":   "agent",
			"createServiceAccount": true,
		},
	}
}

func TestRenderedObjectsCarryStandardLabels(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, tc.chart, tc.vals)
			if len(r.objects) == 0 {
				t.Fatal("rendered no objects")
			}
			for _, o := range append(r.objects, r.hooks...) {
				labels := o.GetLabels()
				for _, l := range requiredLabels {
					if labels[l] == "" {
						t.Errorf("%s lacks label %s (labels: %v)", describe(o), l, labels)
					}
				}
				if labels["app.kubernetes.io/instance"] != tc.chart {
					t.Errorf("%s: instance label %q, want the release name %q", describe(o), labels["app.kubernetes.io/instance"], tc.chart)
				}
				if labels["app.kubernetes.io/part-of"] != "tatara" {
					t.Errorf("%s: part-of %q, want tatara", describe(o), labels["app.kubernetes.io/part-of"])
				}
			}
		})
	}
}

func TestMonitoringIsOffByDefaultAndOneSwitchTurnsItOn(t *testing.T) {
	want := map[string][]string{
		"tatara-cli":      {"PodMonitor", "PrometheusRule"},
		"tatara-wrapper":  {"PodMonitor", "PrometheusRule"},
		"tatara-operator": {"ServiceMonitor", "ConfigMap/tatara-operator-dashboard"},
	}
	for _, chart := range monitoringCharts {
		t.Run(chart, func(t *testing.T) {
			off := mustRender(t, chart, nil)
			on := mustRender(t, chart, monitoringOn())
			for _, k := range want[chart] {
				kind, name, _ := strings.Cut(k, "/")
				if o := off.find(kind, name); o != nil {
					t.Errorf("default render has %s; monitoring must be off by default", describe(o))
				}
				if on.find(kind, name) == nil {
					t.Errorf("monitoring.enabled=true does not render %s (got %v)", k, on.kinds())
				}
			}
		})
	}
}

// TestValuesFiles checks the values.yaml rules: no list anywhere, a comment on every value.
func TestValuesFiles(t *testing.T) {
	for _, chart := range chartNames {
		t.Run(chart, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(chartDir(t, chart), "values.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var doc yaml.Node
			if err := yaml.Unmarshal(data, &doc); err != nil {
				t.Fatalf("values.yaml does not parse: %v", err)
			}
			for _, p := range valuesProblems(&doc) {
				t.Error(p)
			}
		})
	}
}

// valuesProblems walks a values document and names every list and every uncommented key.
func valuesProblems(doc *yaml.Node) []string {
	var problems []string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.SequenceNode:
			problems = append(problems, "values.yaml:"+strconv.Itoa(n.Line)+": "+path+" is a list; use a map keyed by name (no lists in values.yaml)")
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := strings.TrimPrefix(path+"."+k.Value, ".")
				if strings.TrimSpace(k.HeadComment) == "" {
					problems = append(problems, "values.yaml:"+strconv.Itoa(k.Line)+": "+p+" has no comment above it")
				}
				walk(v, p)
			}
		}
	}
	walk(doc, "")
	return problems
}

func TestValuesProblemsFindsListsAndMissingComments(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"clean", "# a\na: 1\n# b\nb:\n  # c\n  c: x\n", nil},
		{"list", "# a\na:\n  - x\n", []string{"a is a list"}},
		{"nested list", "# a\na:\n  # b\n  b: [1, 2]\n", []string{"a.b is a list"}},
		{"no comment", "# a\na:\n  b: 1\n", []string{"a.b has no comment"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(tc.in), &doc); err != nil {
				t.Fatal(err)
			}
			got := valuesProblems(&doc)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %q does not mention %q", got[i], tc.want[i])
				}
			}
		})
	}
}

// TestOperatorPodIsRestricted checks the Pod Security Standards "restricted" fields of the
// operator's pod template (the API server test below also runs it through PodSecurity admission).
func TestOperatorPodIsRestricted(t *testing.T) {
	r := mustRender(t, "tatara-operator", nil)
	dep := r.find("Deployment", "tatara-operator")
	if dep == nil {
		t.Fatalf("no Deployment tatara-operator in %v", r.kinds())
	}
	spec := nested(t, dep, "spec", "template", "spec").(map[string]any)
	for _, f := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		if v, _ := spec[f].(bool); v {
			t.Errorf("pod sets %s", f)
		}
	}
	psc := spec["securityContext"].(map[string]any)
	if psc["runAsNonRoot"] != true {
		t.Errorf("pod securityContext.runAsNonRoot = %v, want true", psc["runAsNonRoot"])
	}
	if sp, _ := psc["seccompProfile"].(map[string]any); sp["type"] != "RuntimeDefault" {
		t.Errorf("pod seccompProfile = %v, want RuntimeDefault", psc["seccompProfile"])
	}
	containers := spec["containers"].([]any)
	if len(containers) != 1 {
		t.Fatalf("want 1 container, got %d", len(containers))
	}
	for _, c := range containers {
		c := c.(map[string]any)
		sc := c["securityContext"].(map[string]any)
		checks := map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true}
		for k, want := range checks {
			if sc[k] != want {
				t.Errorf("container %s securityContext.%s = %v, want %v", c["name"], k, sc[k], want)
			}
		}
		if uid, _ := sc["runAsUser"].(int64); uid != 65532 {
			t.Errorf("container %s runAsUser = %v, want 65532 (the images' user)", c["name"], sc["runAsUser"])
		}
		drop, _ := sc["capabilities"].(map[string]any)["drop"].([]any)
		if !slices.Contains(drop, any("ALL")) {
			t.Errorf("container %s drops %v, want ALL", c["name"], drop)
		}
		if _, ok := sc["privileged"]; ok && sc["privileged"] != false {
			t.Errorf("container %s is privileged", c["name"])
		}
		args := c["args"].([]any)
		for _, want := range []string{"--leader-elect=true", "--runtime-namespace=tatara-system"} {
			if !slices.Contains(args, any(want)) {
				t.Errorf("container %s args %v lack %s", c["name"], args, want)
			}
		}
	}
}

func TestOperatorServiceExposesAPIAndMetrics(t *testing.T) {
	r := mustRender(t, "tatara-operator", nil)
	svc := r.find("Service", "tatara-operator")
	if svc == nil {
		t.Fatalf("no Service tatara-operator in %v", r.kinds())
	}
	ports := map[string]int64{}
	for _, p := range nested(t, svc, "spec", "ports").([]any) {
		p := p.(map[string]any)
		ports[p["name"].(string)] = p["port"].(int64)
	}
	// The operator's --operator-url default, given to agent pods, names port 8082 (operator/cmd/main.go).
	if ports["api"] != 8082 || ports["metrics"] == 0 {
		t.Errorf("Service ports %v, want api=8082 and a metrics port", ports)
	}
}

// TestRuntimeConfigMapsCarryThePinnedImage renders the cli and wrapper charts with the image.tag
// helmfile pins and checks the ConfigMap the operator reads names exactly the image make images
// builds.
func TestRuntimeConfigMapsCarryThePinnedImage(t *testing.T) {
	st := loadPins(t)
	tests := []struct {
		chart, component, configMap string
	}{
		{"tatara-cli", "cli", "tatara-cli-runtime"},
		{"tatara-wrapper", "wrapper", "tatara-wrapper-runtime"},
	}
	for _, tc := range tests {
		t.Run(tc.chart, func(t *testing.T) {
			version := componentVersion(t, st, tc.component)
			for _, vals := range []map[string]any{
				nil, // the chart alone: the tag defaults to appVersion, which check-pins ties to the pin
				{"image": map[string]any{"repository": "tatara.local/" + tc.chart, "tag": version}},
			} {
				r := mustRender(t, tc.chart, vals)
				cm := r.find("ConfigMap", tc.configMap)
				if cm == nil {
					t.Fatalf("no ConfigMap %s in %v", tc.configMap, r.kinds())
				}
				want := "tatara.local/" + tc.chart + ":" + version
				if got := nested(t, cm, "data", "image"); got != want {
					t.Errorf("ConfigMap %s data.image = %q, want %q", tc.configMap, got, want)
				}
				if cm.GetNamespace() != "tatara-system" {
					t.Errorf("ConfigMap in namespace %q, want the release namespace", cm.GetNamespace())
				}
			}
		})
	}
}

func TestProjectMapsBecomeSortedLists(t *testing.T) {
	r := mustRender(t, "tatara-project", fullProjectValues())
	p := r.find("Project", "tatara-project")
	if p == nil {
		t.Fatalf("no Project in %v", r.kinds())
	}
	repos := nested(t, p, "spec", "repos").([]any)
	var names []string
	for _, r := range repos {
		names = append(names, r.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "cli,operator" {
		t.Errorf("repos %v, want [cli operator] (sorted by key)", names)
	}
	agent := nested(t, p, "spec", "agent").(map[string]any)
	if agent["image"] != "tatara.local/tatara-agent-standin:0.0.0-test" || agent["binaryPath"] != "/agent" {
		t.Errorf("agent %v lacks image/binaryPath", agent)
	}
	envs := agent["extraEnvs"].([]any)
	// Sorted by name; a map value becomes valueFrom, so a credential stays in its Secret.
	if len(envs) != 3 || envs[0].(map[string]any)["name"] != "ANTHROPIC_API_KEY" || envs[1].(map[string]any)["name"] != "LOG_LEVEL" ||
		envs[2].(map[string]any)["value"] != "review" {
		t.Errorf("extraEnvs %v, want ANTHROPIC_API_KEY, LOG_LEVEL, TATARA_TOOL_PROFILE=review", envs)
	}
	ref, _, _ := unstructured.NestedStringMap(envs[0].(map[string]any), "valueFrom", "secretKeyRef")
	if ref["name"] != "agent-model" || ref["key"] != "api-key" {
		t.Errorf("ANTHROPIC_API_KEY valueFrom %v, want secretKeyRef agent-model/api-key", envs[0])
	}
	if sa := r.find("ServiceAccount", "agent"); sa == nil || sa.Object["automountServiceAccountToken"] != false {
		t.Errorf("agent ServiceAccount missing or mounts a token: %v", sa)
	}
}

// TestSchemaRejectsBadValues: a typo'd or wrong value fails the render with a message naming it.
func TestSchemaRejectsBadValues(t *testing.T) {
	tests := []struct {
		name  string
		chart string
		vals  map[string]any
		want  []string
	}{
		{"typo at top level", "tatara-cli", map[string]any{"imgae": map[string]any{"tag": "0.1.0"}}, []string{"imgae", "additional properties"}},
		{"typo in monitoring", "tatara-wrapper", map[string]any{"monitoring": map[string]any{"enabeld": true}}, []string{"enabeld"}},
		{"latest tag", "tatara-cli", map[string]any{"image": map[string]any{"repository": "x/tatara-cli", "tag": "latest"}}, []string{"/image/tag"}},
		{"list instead of map", "tatara-project", map[string]any{"repos": []any{map[string]any{"name": "a", "url": "u"}}}, []string{"/repos", "object"}},
		{"repo without url", "tatara-project", map[string]any{"repos": map[string]any{"a": map[string]any{"defaultBranch": "main"}}}, []string{"url"}},
		{"typo in operator resources", "tatara-operator", map[string]any{"resources": map[string]any{"limit": map[string]any{}}}, []string{"limit"}},
		{"bad port", "tatara-operator", map[string]any{"ports": map[string]any{"api": 70000, "metrics": 8080, "health": 8081}}, []string{"/ports/api"}},
		{"no agent namespace", "tatara-operator", map[string]any{"agentNamespaces": map[string]any{"tatara-agents": nil}}, []string{"/agentNamespaces", "minProperties"}},
		{"agent namespaces as a list", "tatara-operator", map[string]any{"agentNamespaces": []any{"team-a"}}, []string{"/agentNamespaces", "object"}},
		{"bad agent namespace name", "tatara-operator", map[string]any{"agentNamespaces": map[string]any{"Team_A": map[string]any{}}}, []string{"Team_A"}},
		{"bad log level", "tatara-operator", map[string]any{"logLevel": "verbose"}, []string{"/logLevel"}},
		{"metrics namespace not a name", "tatara-operator", map[string]any{"networkPolicy": map[string]any{"metricsNamespaces": map[string]any{"Monitoring_NS": map[string]any{}}}}, []string{"Monitoring_NS"}},
		{"denied egress not a CIDR", "tatara-project", map[string]any{"networkPolicy": map[string]any{"egressDenied": map[string]any{"metadata": "169.254.169.254"}}}, []string{"/networkPolicy/egressDenied/metadata"}},
		{"bad env name", "tatara-project", map[string]any{"agent": map[string]any{"extraEnvs": map[string]any{"1BAD": "x"}}}, []string{"1BAD"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.chart, tc.vals)
			if err == nil {
				t.Fatalf("chart %s accepted %v", tc.chart, tc.vals)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			t.Logf("rejected: %v", err)
			if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
				t.Errorf("error %q does not come from values.schema.json", err)
			}
		})
	}
}

// promExprs returns every PrometheusRule expression of a render, with its alert name.
func promExprs(t *testing.T, r *rendered) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	for _, o := range r.objects {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		for _, g := range nested(t, o, "spec", "groups").([]any) {
			for _, rule := range g.(map[string]any)["rules"].([]any) {
				rule := rule.(map[string]any)
				name, _ := rule["alert"].(string)
				if name == "" {
					name, _ = rule["record"].(string)
				}
				exprs[name] = rule["expr"].(string)
				if f, ok := rule["for"].(string); ok {
					if _, err := model.ParseDuration(f); err != nil {
						t.Errorf("rule %s: for %q: %v", name, f, err)
					}
				}
			}
		}
	}
	return exprs
}

// promParser is the Prometheus server's own PromQL parser with its default options.
var promParser = parser.NewParser(parser.Options{})

// metricNames returns the metric names an expression selects.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	e, err := promParser.ParseExpr(expr)
	if err != nil {
		t.Fatalf("expression %q does not parse: %v", expr, err)
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names
}

// internalIssueAlerts are the charts' alerts on the two internal-issue counters.
var internalIssueAlerts = []struct {
	chart, alert, metric string
}{
	{"tatara-cli", "TataraMCPInternalIssueReported", "tatara_mcp_internal_issue_total"},
	{"tatara-wrapper", "TataraWrapperInternalIssueReported", "tatara_wrapper_internal_issue_total"},
}

func TestPrometheusRulesParseAndAlertOnTheInternalIssueCounters(t *testing.T) {
	for _, tc := range internalIssueAlerts {
		t.Run(tc.chart, func(t *testing.T) {
			r := mustRender(t, tc.chart, monitoringOn())
			for _, o := range r.objects {
				if o.GetKind() != "PrometheusRule" {
					continue
				}
				// The spec of a PrometheusRule is a Prometheus rule file: validate it as
				// `promtool check rules` does (exprs, durations, label and annotation templates).
				spec, err := yaml.Marshal(o.Object["spec"])
				if err != nil {
					t.Fatal(err)
				}
				if _, errs := rulefmt.Parse(spec, false, model.UTF8Validation, promParser, slog.New(slog.DiscardHandler)); len(errs) > 0 {
					t.Errorf("%s is not a valid Prometheus rule file: %v\n%s", describe(o), errs, spec)
				}
			}
			exprs := promExprs(t, r)
			expr, ok := exprs[tc.alert]
			if !ok {
				t.Fatalf("no alert %s in %v", tc.alert, exprs)
			}
			if got := slices.Compact(metricNames(t, expr)); !slices.Equal(got, []string{tc.metric}) {
				t.Errorf("alert %s selects %v, want [%s]", tc.alert, got, tc.metric)
			}
			// The alert names where to look, and keeps the report's severity apart from its own
			// (alerts_test.go evaluates it).
			if !strings.Contains(expr, "sum by (namespace, project, task_kind, category, report_severity)") {
				t.Errorf("alert %s expression %q does not keep namespace, project, task_kind, category and report_severity", tc.alert, expr)
			}
		})
	}
}

type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Title      string `json:"title"`
		Type       string `json:"type"`
		Datasource struct {
			Type string `json:"type"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVars are Grafana's built-in range variables, replaced by a duration before parsing.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "6h")

func TestDashboardParsesAndCoversTheObservabilityContract(t *testing.T) {
	r := mustRender(t, "tatara-operator", monitoringOn())
	cm := r.find("ConfigMap", "tatara-operator-dashboard")
	if cm == nil {
		t.Fatalf("no dashboard ConfigMap in %v", r.kinds())
	}
	raw := nested(t, cm, "data", "tatara-agents.json").(string)
	var d dashboard
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatalf("dashboard JSON does not parse: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard has no uid/title")
	}
	selected := map[string]bool{}
	var loki []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			switch p.Datasource.Type {
			case "prometheus":
				for _, m := range metricNames(t, grafanaVars.Replace(tg.Expr)) {
					selected[m] = true
				}
			case "loki":
				loki = append(loki, tg.Expr)
			default:
				t.Errorf("panel %q has datasource type %q", p.Title, p.Datasource.Type)
			}
		}
	}
	for _, m := range []string{"tatara_mcp_internal_issue_total", "tatara_wrapper_internal_issue_total", "tatara_mcp_registered_tools", "tatara_mcp_tool_calls_total",
		"tatara_operator_internal_issues_open"} {
		if !selected[m] {
			t.Errorf("no dashboard panel queries %s (queried: %v)", m, selected)
		}
	}
	if len(loki) != 1 || !strings.Contains(loki[0], `action="internal_issue_report"`) {
		t.Errorf("Loki panels %q, want one query for action=\"internal_issue_report\"", loki)
	}
	wantBy := map[string]string{"tatara_mcp_registered_tools": "by (profile)", "tatara_mcp_tool_calls_total": "by (outcome)"}
	for metric, by := range wantBy {
		found := false
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				if strings.Contains(tg.Expr, metric) && strings.Contains(tg.Expr, by) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("no panel shows %s %s", metric, by)
		}
	}
}

// TestNotesTellTheSREWhatToCheck: the post-deploy checks (docs/architecture.md), as commands.
func TestNotesTellTheSREWhatToCheck(t *testing.T) {
	tests := []struct {
		chart string
		want  []string
	}{
		{"tatara-cli", []string{"kubectl get --raw \"/api/v1/namespaces/${NS}/pods/${POD}:9091/proxy/metrics\"", "tatara_mcp_", "registered_tools", `"msg":"mcp server started"`, "configmap tatara-cli-runtime", "helm test tatara-cli -n tatara-system --logs"}},
		{"tatara-wrapper", []string{":9090/proxy/metrics", "tatara_wrapper_", "internal_issue_total", `"action":"internal_issue_report"`, "configmap tatara-wrapper-runtime", "helm test tatara-wrapper -n tatara-system --logs"}},
		{"tatara-operator", []string{"rollout status deployment/tatara-operator", ":9091/proxy/metrics", "tatara_mcp_registered_tools", ":9090/proxy/metrics", `"action":"internal_issue_report"`, "helm test tatara-operator -n tatara-system --logs"}},
		{"tatara-project", []string{`spec.projectRef.name=="tatara-project"`, `@.type=="Ready"`, ":9091/proxy/metrics", ":9090/proxy/metrics", "WARNING: agent.image is empty", "helm test tatara-project -n tatara-agents --logs"}},
	}
	for _, tc := range tests {
		t.Run(tc.chart, func(t *testing.T) {
			notes := mustRender(t, tc.chart, nil).notes
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES.txt lacks %q:\n%s", w, notes)
				}
			}
			if strings.Contains(notes, "<no value>") {
				t.Errorf("NOTES.txt renders <no value>:\n%s", notes)
			}
		})
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			a, b := mustRender(t, tc.chart, tc.vals), mustRender(t, tc.chart, tc.vals)
			ja, _ := json.Marshal(a.objects)
			jb, _ := json.Marshal(b.objects)
			if string(ja) != string(jb) {
				t.Error("two renders with the same values differ")
			}
		})
	}
}

// TestSchemasAreClosed: every object with named properties in a values.schema.json sets
// additionalProperties: false, so no typo anywhere in values passes silently.
func TestSchemasAreClosed(t *testing.T) {
	for _, chart := range chartNames {
		t.Run(chart, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(chartDir(t, chart), "values.schema.json"))
			if err != nil {
				t.Fatal(err)
			}
			var schema map[string]any
			if err := json.Unmarshal(data, &schema); err != nil {
				t.Fatalf("values.schema.json does not parse: %v", err)
			}
			var walk func(s map[string]any, path string)
			walk = func(s map[string]any, path string) {
				if props, ok := s["properties"].(map[string]any); ok {
					if s["additionalProperties"] != false {
						t.Errorf("%s: an object with properties allows additional properties", path)
					}
					for name, p := range props {
						if p, ok := p.(map[string]any); ok {
							walk(p, path+"/"+name)
						}
					}
				}
				for _, k := range []string{"definitions", "additionalProperties"} {
					if sub, ok := s[k].(map[string]any); ok {
						if k == "definitions" {
							for name, d := range sub {
								walk(d.(map[string]any), path+"/definitions/"+name)
							}
						} else {
							walk(sub, path+"/*")
						}
					}
				}
			}
			walk(schema, "#")
		})
	}
}

// TestRuntimeConfigMapsCarryResources: the runtime ConfigMaps hold, under the keys the operator
// reads (operator/internal/controller/runtime_resources.go), strict JSON ResourceRequirements
// with CPU and memory requests and a memory limit for every container of the agent pod.
func TestRuntimeConfigMapsCarryResources(t *testing.T) {
	for _, tc := range []struct {
		chart, configMap string
		keys             []string
	}{
		{"tatara-cli", "tatara-cli-runtime", []string{"resources", "gitGatewayResources"}},
		{"tatara-wrapper", "tatara-wrapper-runtime", []string{"installResources", "workspaceInitResources", "agentResources"}},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			cm := mustRender(t, tc.chart, nil).find("ConfigMap", tc.configMap)
			if cm == nil {
				t.Fatalf("no ConfigMap %s", tc.configMap)
			}
			data := nested(t, cm, "data").(map[string]any)
			for _, key := range tc.keys {
				raw, _ := data[key].(string)
				dec := json.NewDecoder(strings.NewReader(raw))
				dec.DisallowUnknownFields()
				var r corev1.ResourceRequirements
				if err := dec.Decode(&r); err != nil {
					t.Errorf("%s key %q = %q: not a ResourceRequirements: %v", tc.configMap, key, raw, err)
					continue
				}
				_, cpu := r.Requests[corev1.ResourceCPU]
				_, mem := r.Requests[corev1.ResourceMemory]
				_, lim := r.Limits[corev1.ResourceMemory]
				if !cpu || !mem || !lim {
					t.Errorf("%s key %q = %s: want cpu and memory requests and a memory limit", tc.configMap, key, raw)
				}
			}
		})
	}
}
