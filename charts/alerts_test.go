package charts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	promrules "github.com/prometheus/prometheus/rules"
)

// alertRule builds the chart's rendered alert as the Prometheus rule manager does: expression,
// `for`, labels and annotations, so evaluating it also applies the rule's labels to the result
// (where a label collision makes a rule fail).
func alertRule(t *testing.T, chart, alert string) *promrules.AlertingRule {
	t.Helper()
	for _, o := range mustRender(t, chart, monitoringOn()).objects {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		for _, g := range nested(t, o, "spec", "groups").([]any) {
			for _, raw := range g.(map[string]any)["rules"].([]any) {
				r := raw.(map[string]any)
				if r["alert"] != alert {
					continue
				}
				expr, err := promParser.ParseExpr(r["expr"].(string))
				if err != nil {
					t.Fatalf("alert %s: %v", alert, err)
				}
				hold, err := model.ParseDuration(r["for"].(string))
				if err != nil {
					t.Fatalf("alert %s: for: %v", alert, err)
				}
				return promrules.NewAlertingRule(alert, expr, time.Duration(hold), 0,
					stringMap(r["labels"]), stringMap(r["annotations"]), labels.EmptyLabels(), "", false, slog.New(slog.DiscardHandler))
			}
		}
	}
	t.Fatalf("chart %s renders no alert %s", chart, alert)
	return nil
}

func stringMap(v any) labels.Labels {
	m := map[string]string{}
	for k, v := range v.(map[string]any) {
		m[k] = v.(string)
	}
	return labels.FromMap(m)
}

// reportSeries is one scraped internal-issue counter series of an agent pod, as the charts'
// PodMonitors label it (namespace and pod from discovery; project, task and task_kind relabelled
// from the pod's labels), followed by its samples in promqltest notation.
func reportSeries(metric, pod, category, severity, samples string) string {
	return fmt.Sprintf("  %s{namespace=%q,pod=%q,project=\"demo\",task=%q,task_kind=\"implement\",category=%q,severity=%q} %s\n",
		metric, "tatara-agents", "tatara-"+pod, pod, category, severity, samples)
}

// TestInternalIssueAlertsFireForShortLivedPods evaluates each chart's rendered alert, with
// Prometheus's own rule code and PromQL engine, over the scrape histories agent pods produce
// (30 s scrapes, the chart's 15 m window). An agent pod may live seconds: its counter series can
// be first scraped with the report already counted, once or twice, and then vanish.
func TestInternalIssueAlertsFireForShortLivedPods(t *testing.T) {
	// Alert labels, as Alertmanager gets them, for one aggregated report series.
	alertLabels := func(alert, component, category, reportSeverity string) string {
		return labels.FromStrings("alertname", alert, "category", category, "component", component,
			"namespace", "tatara-agents", "project", "demo", "report_severity", reportSeverity,
			"severity", "warning", "task_kind", "implement").String()
	}
	cases := []struct {
		name string
		// series builds the load block for one counter name.
		series func(metric string) string
		at     time.Duration
		// want: category/report_severity -> the alert's value (within 10%: increase() extrapolates).
		want map[[2]string]float64
	}{
		{"a long-lived pod: 0, then one report", func(m string) string {
			return reportSeries(m, "a", "tool_error", "error", "0x20 1x60") + reportSeries(m, "a", "auth", "warn", "0x80")
		}, 12 * time.Minute, map[[2]string]float64{{"tool_error", "error"}: 1}},
		{"the long-lived pod's report has left the window", func(m string) string {
			return reportSeries(m, "a", "tool_error", "error", "0x20 1x60")
		}, 30 * time.Minute, nil},
		{"a series first scraped at 1 (a report before the pod's first scrape)", func(m string) string {
			return reportSeries(m, "b", "workspace_broken", "warn", "_x10 1")
		}, 6 * time.Minute, map[[2]string]float64{{"workspace_broken", "warn"}: 1}},
		{"the same, 14 minutes later, still inside the window", func(m string) string {
			return reportSeries(m, "b", "workspace_broken", "warn", "_x10 1")
		}, 19 * time.Minute, map[[2]string]float64{{"workspace_broken", "warn"}: 1}},
		{"a series scraped twice at 1 (a lingering pod)", func(m string) string {
			return reportSeries(m, "c", "tool_error", "warn", "_x10 1 1")
		}, 6 * time.Minute, map[[2]string]float64{{"tool_error", "warn"}: 1}},
		{"a pod scraped at 1, then at 2", func(m string) string {
			return reportSeries(m, "c", "tool_error", "warn", "_x10 1 2")
		}, 6 * time.Minute, map[[2]string]float64{{"tool_error", "warn"}: 2}},
		{"20 short pods, each scraped once at 1", func(m string) string {
			var b strings.Builder
			for i := range 20 {
				b.WriteString(reportSeries(m, fmt.Sprintf("p%d", i), "auth", "error", fmt.Sprintf("_x%d 1", 2+i%10)))
			}
			return b.String()
		}, 7 * time.Minute, map[[2]string]float64{{"auth", "error"}: 20}},
		{"warn and error in one category", func(m string) string {
			return reportSeries(m, "d", "tool_error", "warn", "_x4 1") + reportSeries(m, "d", "tool_error", "error", "_x4 1") +
				reportSeries(m, "e", "tool_error", "error", "0x20 1x10")
		}, 11 * time.Minute, map[[2]string]float64{{"tool_error", "warn"}: 1, {"tool_error", "error"}: 2}},
		{"pods that never reported (every series pre-created at 0)", func(m string) string {
			return reportSeries(m, "f", "tool_error", "error", "0x40") + reportSeries(m, "g", "auth", "warn", "_x10 0 0")
		}, 12 * time.Minute, nil},
	}
	for _, tc := range internalIssueAlerts {
		for _, c := range cases {
			t.Run(tc.chart+"/"+c.name, func(t *testing.T) {
				storage := promqltest.LoadedStorage(t, "load 30s\n"+c.series(tc.metric))
				t.Cleanup(func() { _ = storage.Close() })
				engine := promqltest.NewTestEngineWithOpts(t, promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute})
				rule := alertRule(t, tc.chart, tc.alert)

				_, err := rule.Eval(context.Background(), 0, time.Unix(0, 0).Add(c.at), promrules.EngineQueryFunc(engine, storage), &url.URL{}, 0)
				if err != nil {
					t.Fatalf("rule %s fails to evaluate (no alert is sent while it does): %v", tc.alert, err)
				}
				got := map[string]float64{}
				for _, a := range rule.ActiveAlerts() {
					if a.State != promrules.StateFiring {
						t.Errorf("alert %s is %v, want firing (for: 0m)", a.Labels, a.State)
					}
					got[a.Labels.String()] = a.Value
				}
				want := map[string]float64{}
				for k, v := range c.want {
					want[alertLabels(tc.alert, tc.chart, k[0], k[1])] = v
				}
				if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
					t.Fatalf("at %v, firing:\n  %v\nwant:\n  %v", c.at, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
				}
				for k, v := range want {
					if g := got[k]; g < v || g > v*1.1 {
						t.Errorf("alert %s has value %v, want %v", k, g, v)
					}
				}
			})
		}
	}
}

// TestDashboardShowsShortLivedPods evaluates every Prometheus query of the dashboard over the
// history of one agent pod that lived a minute, 5 minutes into a 1-hour range that ends at 64 minutes: its tool counters
// pre-created at 0 but first scraped after its first calls, one report made before its first
// scrape. Each panel must show that pod's data, 55 minutes after it ended.
func TestDashboardShowsShortLivedPods(t *testing.T) {
	raw := nested(t, mustRender(t, "tatara-operator", monitoringOn()).find("ConfigMap", "tatara-operator-dashboard"), "data", "tatara-agents.json").(string)
	var d dashboard
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatal(err)
	}
	pod := `namespace="tatara-agents",pod="tatara-t1",project="demo",task="t1",task_kind="implement"`
	storage := promqltest.LoadedStorage(t, `
load 30s
  tatara_mcp_registered_tools{`+pod+`,profile="implement"} _x10 46 46
  tatara_mcp_tool_calls_total{`+pod+`,tool="task_get",outcome="success"} _x10 1 2
  tatara_mcp_tool_calls_total{`+pod+`,tool="code_search",outcome="success"} _x10 0 0
  tatara_mcp_internal_issue_total{`+pod+`,category="auth",severity="error"} _x10 1 1
  tatara_wrapper_internal_issue_total{`+pod+`,category="auth",severity="error"} _x10 1 1
`)
	t.Cleanup(func() { _ = storage.Close() })
	engine := promqltest.NewTestEngineWithOpts(t, promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute})
	query := func(expr string, at time.Duration) promql.Vector {
		t.Helper()
		q, err := engine.NewInstantQuery(context.Background(), storage, nil, expr, time.Unix(0, 0).Add(at))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		defer q.Close()
		v, err := q.Exec(context.Background()).Vector()
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	// Table panels: at the end of a 1-hour range. Time series: at the pod's last scrape, with a
	// 2-minute interval.
	tables := strings.NewReplacer("$__range", "1h")
	series := strings.NewReplacer("$__rate_interval", "2m")
	got := map[string][]string{}
	for _, p := range d.Panels {
		if p.Datasource.Type != "prometheus" {
			continue
		}
		for _, tg := range p.Targets {
			at, expr := 330*time.Second, series.Replace(tg.Expr)
			if strings.Contains(tg.Expr, "$__range") {
				at, expr = 64*time.Minute, tables.Replace(tg.Expr)
			}
			for _, s := range query(expr, at) {
				got[p.Title] = append(got[p.Title], fmt.Sprintf("%s %g", s.Metric, s.F))
			}
		}
	}
	wantByPanel := map[string][]string{
		"Internal issues reported (cli, tatara_mcp_internal_issue_total)":                    {`{category="auth", project="demo", severity="error"} 1`},
		"Internal issues seen in transcripts (wrapper, tatara_wrapper_internal_issue_total)": {`{category="auth", project="demo", severity="error"} 1`},
		"Registered tools per profile over the range (tatara_mcp_registered_tools)":          {`{profile="implement"} 46`, `{profile="implement"} 1`},
		"Tool calls by outcome per interval (tatara_mcp_tool_calls_total)":                   {`{outcome="success"} 2`},
		"Tool calls per tool and outcome over the range":                                     {`{outcome="success", tool="task_get"} 2`, `{outcome="success", tool="code_search"} 0`},
	}
	for panel, w := range wantByPanel {
		g := got[panel]
		slices.Sort(g)
		w = slices.Sorted(slices.Values(w))
		if !slices.Equal(g, w) {
			t.Errorf("panel %q shows %q, want %q", panel, g, w)
		}
	}
	if len(got) != len(wantByPanel) {
		t.Errorf("Prometheus panels with data: %v, want exactly %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(wantByPanel)))
	}
}

// TestWarmPoolAlerts evaluates the operator chart's warm pool alerts, with Prometheus's own rule
// code and PromQL engine, every 30 s over the gauge's history, as the rule manager does: their
// `for` (10 m) is part of what is tested.
func TestWarmPoolAlerts(t *testing.T) {
	pool := func(state, samples string) string {
		return fmt.Sprintf("  tatara_operator_warm_pool_pods{namespace=\"tatara-agents\",project=\"demo\",kind=\"implement\",state=%q} %s\n", state, samples)
	}
	cases := []struct {
		name, series string
		at           time.Duration
		firing       []string
	}{
		{"pods that never become ready", pool("ready", "0x40") + pool("starting", "1x40"), 15 * time.Minute, []string{"TataraWarmPoolEmpty"}},
		{"the same, before the alert's 10 minutes", pool("ready", "0x40"), 9 * time.Minute, nil},
		{"a new pool whose pod is ready after a minute", pool("ready", "0x2 1x40"), 15 * time.Minute, nil},
		{"drained by a burst for 5 minutes, then refilled", pool("ready", "1x10 0x10 1x20"), 15 * time.Minute, nil},
		{"every new pod fails", pool("failed", "1x40") + pool("ready", "0x40"), 15 * time.Minute, []string{"TataraWarmPoolEmpty", "TataraWarmPoolPodsFailing"}},
		{"one pod failed once", pool("failed", "0x5 1x2 0x30") + pool("ready", "1x5 0x2 1x30"), 15 * time.Minute, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			storage := promqltest.LoadedStorage(t, "load 30s\n"+c.series)
			t.Cleanup(func() { _ = storage.Close() })
			engine := promqltest.NewTestEngineWithOpts(t, promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute})
			var firing []string
			for _, alert := range []string{"TataraWarmPoolEmpty", "TataraWarmPoolPodsFailing"} {
				rule := alertRule(t, "tatara-operator", alert)
				for at := time.Duration(0); at <= c.at; at += 30 * time.Second {
					if _, err := rule.Eval(context.Background(), 0, time.Unix(0, 0).Add(at), promrules.EngineQueryFunc(engine, storage), &url.URL{}, 0); err != nil {
						t.Fatalf("rule %s fails to evaluate: %v", alert, err)
					}
				}
				for _, a := range rule.ActiveAlerts() {
					if a.State != promrules.StateFiring {
						continue
					}
					want := labels.FromStrings("alertname", alert, "component", "tatara-operator", "kind", "implement",
						"namespace", "tatara-agents", "project", "demo", "severity", "warning")
					if !labels.Equal(a.Labels, want) {
						t.Errorf("alert labels %s, want %s", a.Labels, want)
					}
					firing = append(firing, alert)
				}
			}
			if !slices.Equal(firing, c.firing) {
				t.Errorf("at %v firing %v, want %v", c.at, firing, c.firing)
			}
		})
	}
}
