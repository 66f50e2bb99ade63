//go:build e2e

package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/wait"
)

// The kind environment's Prometheus (helmfile release tatara-e2e-monitoring): prometheus-operator
// configures it from the charts' PodMonitors, ServiceMonitor and PrometheusRules, as in
// production. The suite asks its HTTP API through the API server's service proxy, the way
// docs/observability.md tells an SRE to.
const (
	monitoringNamespace = "monitoring"
	prometheusService   = "prometheus-operated"
	prometheusPort      = "web"
	// promWait bounds how long a series or an alert may take to appear: pod discovery, a 30 s
	// scrape (the charts' default interval), a 15 s rule evaluation, with room for a loaded node.
	promWait = 3 * time.Minute
)

// promSample is one series of an instant query's vector result.
type promSample struct {
	Labels map[string]string
	Value  float64
}

func (s promSample) String() string {
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, s.Labels[k])
	}
	return fmt.Sprintf("{%s} %g", strings.Join(parts, ","), s.Value)
}

// promQuery runs an instant query; an error is a query Prometheus refused or could not run.
func promQuery(ctx context.Context, cs *kubernetes.Clientset, expr string) ([]promSample, error) {
	raw, err := cs.CoreV1().Services(monitoringNamespace).
		ProxyGet("http", prometheusService, prometheusPort, "api/v1/query", map[string]string{"query": expr}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w: %s", expr, err, raw)
	}
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("query %q: answer is not JSON: %w: %s", expr, err, raw)
	}
	if resp.Status != "success" || resp.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: status %q, result type %q, error %q", expr, resp.Status, resp.Data.ResultType, resp.Error)
	}
	out := make([]promSample, 0, len(resp.Data.Result))
	for _, r := range resp.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %v: %w", expr, r.Value, err)
		}
		out = append(out, promSample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// waitProm polls expr until ok accepts its result, and returns that result; it fails the test
// with the last result when promWait passes.
func waitProm(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, what, expr string, ok func([]promSample) bool) []promSample {
	t.Helper()
	var last []promSample
	var lastErr error
	err := wait.For(func(ctx context.Context) (bool, error) {
		last, lastErr = promQuery(ctx, cs, expr)
		return lastErr == nil && ok(last), nil
	}, wait.WithContext(ctx), wait.WithTimeout(promWait), wait.WithInterval(5*time.Second))
	if err != nil {
		t.Fatalf("%s: Prometheus never answered as expected within %v to\n  %s\nlast answer: %v (error: %v)", what, promWait, expr, last, lastErr)
	}
	return last
}

// oneSample accepts a result of exactly one series with value want.
func oneSample(want float64) func([]promSample) bool {
	return func(s []promSample) bool { return len(s) == 1 && s[0].Value == want }
}

// checkGauge asserts, from Prometheus, the registered-tools gauge of a Task's agent pod: exactly
// one series over the pod's life, labelled with the profile, at the profile's count.
func checkGauge(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, task, profile string, want int) {
	t.Helper()
	expr := fmt.Sprintf(`max_over_time(tatara_mcp_registered_tools{namespace=%q,task=%q}[30m])`, agentNamespace, task)
	got := waitProm(ctx, t, cs, "registered tools of task "+task, expr, func(s []promSample) bool { return len(s) > 0 })
	if len(got) != 1 || got[0].Labels["profile"] != profile || got[0].Value != float64(want) {
		t.Errorf("task %s: %s = %v, want one series {profile=%q} %d", task, expr, got, profile, want)
	}
}

// checkDashboardQueries runs every Prometheus query of the deployed dashboard (ConfigMap
// tatara-operator-dashboard), with Grafana's range variables set to cover this run, and fails
// on any query that Prometheus refuses or that returns no series.
func checkDashboardQueries(ctx context.Context, t *testing.T, cs *kubernetes.Clientset) {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(systemNamespace).Get(ctx, "tatara-operator-dashboard", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("dashboard ConfigMap: %v", err)
	}
	var d struct {
		Panels []struct {
			Title      string `json:"title"`
			Datasource struct {
				Type string `json:"type"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(cm.Data["tatara-agents.json"]), &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	vars := strings.NewReplacer("$__rate_interval", "30m", "$__interval", "1m", "$__range", "1h")
	queried := 0
	for _, p := range d.Panels {
		if p.Datasource.Type != "prometheus" {
			continue
		}
		for _, tg := range p.Targets {
			expr := vars.Replace(tg.Expr)
			got := waitProm(ctx, t, cs, "dashboard panel "+p.Title, expr, func(s []promSample) bool { return len(s) > 0 })
			t.Logf("dashboard %q: %d series, e.g. %v", p.Title, len(got), got[0])
			queried++
		}
	}
	if queried == 0 {
		t.Fatal("the dashboard has no Prometheus query")
	}
}
