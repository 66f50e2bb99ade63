package obs

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tatara.dev/cli/internal/catalog"
	tataratest "tatara.dev/testkit/testutil"
)

func TestMetricsRegisteredAndNamed(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.RegisteredTools.WithLabelValues("implement").Set(46)
	m.ToolCalls.WithLabelValues("code_search", OutcomeSuccess).Inc()
	m.ToolCallDuration.WithLabelValues("code_search", OutcomeSuccess).Observe(0.02) // linted below

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric lint: %s: %s", p.Metric, p.Text)
	}
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP tatara_mcp_registered_tools Tools registered by this MCP server, by resolved tool profile (all = fail-open).
# TYPE tatara_mcp_registered_tools gauge
tatara_mcp_registered_tools{profile="implement"} 46
# HELP tatara_mcp_tool_calls_total Tool calls handled, by tool and outcome.
# TYPE tatara_mcp_tool_calls_total counter
tatara_mcp_tool_calls_total{outcome="success",tool="code_search"} 1
`), "tatara_mcp_registered_tools", "tatara_mcp_tool_calls_total")
	if err != nil {
		t.Error(err)
	}
	// Every category x severity series exists at 0 before the first report.
	if got := testutil.CollectAndCount(m.InternalIssues, "tatara_mcp_internal_issue_total"); got != 14 {
		t.Errorf("tatara_mcp_internal_issue_total has %d series, want 7 categories x 2 severities", got)
	}
}

// tatara_mcp_build_info, scraped from a real /metrics endpoint, is one gauge at 1 labelled
// exactly like tatara_wrapper_build_info and tatara_operator_build_info (each module's test
// pins the same three names).
func TestBuildInfoLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	tataratest.CheckBuildInfo(t, reg, "tatara_mcp_build_info")
}

// A tool's first call must be an increase from 0: ToolsRegistered creates every registered tool's
// call counters at 0 for every outcome, and no counter of a tool the profile left out.
func TestToolsRegisteredPrecreatesCallCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.ToolsRegistered("review", []string{"task_get", "code_search"})

	if got := testutil.ToFloat64(m.RegisteredTools.WithLabelValues("review")); got != 2 {
		t.Errorf("tatara_mcp_registered_tools{profile=review} = %v, want 2", got)
	}
	if got, want := testutil.CollectAndCount(m.ToolCalls, "tatara_mcp_tool_calls_total"), 2*len(Outcomes); got != want {
		t.Errorf("tatara_mcp_tool_calls_total has %d series, want %d (2 tools x %d outcomes)", got, want, len(Outcomes))
	}
	for _, tool := range []string{"task_get", "code_search"} {
		for _, o := range Outcomes {
			if got := testutil.ToFloat64(m.ToolCalls.WithLabelValues(tool, o)); got != 0 {
				t.Errorf("tatara_mcp_tool_calls_total{tool=%q,outcome=%q} = %v, want 0", tool, o, got)
			}
		}
	}
	// The histogram stays empty until a call: its buckets would multiply the series by 15.
	if got := testutil.CollectAndCount(m.ToolCallDuration, "tatara_mcp_tool_call_duration_seconds"); got != 0 {
		t.Errorf("tatara_mcp_tool_call_duration_seconds has %d series before any call, want 0", got)
	}
}

// The chart's PodMonitor drops a scrape above monitoring.sampleLimit: the cli's worst case, every
// tool of the fail-open profile called with every outcome, must fit with room to spare.
func TestWorstCaseScrapeFitsTheChartsSampleLimit(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := NewMetrics(reg)
	var tools []string
	for _, tool := range catalog.All() {
		tools = append(tools, tool.Name)
	}
	m.ToolsRegistered("all", tools)
	for _, tool := range tools {
		for _, o := range Outcomes {
			m.ToolCalls.WithLabelValues(tool, o).Inc()
			m.ToolCallDuration.WithLabelValues(tool, o).Observe(0.1)
		}
	}
	samples := scrapedSamples(t, reg)

	raw, err := os.ReadFile("../../../charts/tatara-cli/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The chart's values hold one sampleLimit (the cli module reads no YAML otherwise).
	match := regexp.MustCompile(`(?m)^\s+sampleLimit:\s*(\d+)\s*$`).FindSubmatch(raw)
	if match == nil {
		t.Fatal("charts/tatara-cli/values.yaml has no monitoring.sampleLimit")
	}
	limit, _ := strconv.Atoi(string(match[1]))
	t.Logf("worst-case scrape: %d samples; the chart's sampleLimit: %d", samples, limit)
	if samples*3/2 > limit {
		t.Errorf("the worst-case scrape has %d samples: the chart's sampleLimit %d leaves less than 50%% headroom", samples, limit)
	}
}

// scrapedSamples is how many samples Prometheus reads from reg: one per counter or gauge series, a
// histogram's buckets plus _sum and _count.
func scrapedSamples(t *testing.T, reg prometheus.Gatherer) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			if h := metric.GetHistogram(); h != nil {
				n += len(h.GetBucket()) + 3 // the buckets, +Inf, _sum, _count
				continue
			}
			if s := metric.GetSummary(); s != nil {
				n += len(s.GetQuantile()) + 2
				continue
			}
			n++
		}
	}
	return n
}
