// Package obs holds the cli's Prometheus metrics. Their names are API (dashboards, alerts
// and the e2e suite read them), so tests pin them.
package obs

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/cli/internal/catalog"
)

// Tool call outcomes, the values of tatara_mcp_tool_calls_total's outcome label.
const (
	OutcomeSuccess         = "success"
	OutcomeInvalidArgs     = "invalid_arguments"
	OutcomeBackendError    = "backend_error"
	OutcomeBackendMissing  = "backend_not_configured"
	OutcomeHandlerRejected = "rejected"
)

// Metrics are the cli's metrics.
type Metrics struct {
	RegisteredTools *prometheus.GaugeVec
	InternalIssues  *prometheus.CounterVec
	ToolCalls       *prometheus.CounterVec
	BuildInfo       *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		RegisteredTools: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tatara_mcp_registered_tools",
			Help: "Tools registered by this MCP server, by resolved tool profile (all = fail-open).",
		}, []string{"profile"}),
		InternalIssues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_mcp_internal_issue_total",
			Help: "report_internal_issue calls accepted, by category and severity.",
		}, []string{"category", "severity"}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_mcp_tool_calls_total",
			Help: "Tool calls handled, by tool and outcome.",
		}, []string{"tool", "outcome"}),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tatara_mcp_build_info",
			Help: "Always 1; labels carry the build's version, revision and Go version.",
		}, []string{"version", "revision", "goversion"}),
	}
	reg.MustRegister(m.RegisteredTools, m.InternalIssues, m.ToolCalls, m.BuildInfo)
	// Every category/severity series exists from the start at 0, so an increase() alert fires
	// on the very first report instead of needing a previous sample.
	for _, c := range catalog.IssueCategories {
		for _, s := range catalog.IssueSeverities {
			m.InternalIssues.WithLabelValues(c, s)
		}
	}
	return m
}

// SetBuildInfo records the build's identity.
func (m *Metrics) SetBuildInfo(version, revision string) {
	m.BuildInfo.WithLabelValues(version, revision, runtime.Version()).Set(1)
}
