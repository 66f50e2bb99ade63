package obs

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	tataratest "tatara.dev/cli/pkg/testutil"
)

func TestMetricsRegisteredAndNamed(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.RegisteredTools.WithLabelValues("implement").Set(46)
	m.ToolCalls.WithLabelValues("code_search", OutcomeSuccess).Inc()
	m.ToolCallDuration.WithLabelValues("code_search", OutcomeSuccess).Observe(0.02) // linted below
	m.SetBuildInfo("1.2.3", "abc")

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
	NewMetrics(reg).SetBuildInfo("1.2.3", "unknown")
	tataratest.CheckBuildInfo(t, reg, "tatara_mcp_build_info")
}
