// Package obs holds the cli's Prometheus metrics. Their names are API (dashboards, alerts
// and the e2e suite read them), so tests pin them.
package obs

import (
	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/cli/internal/catalog"

	"tatara.dev/cli/pkg/buildinfo"
)

// Tool call outcomes, the values of tatara_mcp_tool_calls_total's outcome label.
const (
	OutcomeSuccess         = "success"
	OutcomeInvalidArgs     = "invalid_arguments"
	OutcomeBackendError    = "backend_error"
	OutcomeBackendMissing  = "backend_not_configured"
	OutcomeHandlerRejected = "rejected"
)

// Outcomes lists every outcome, for pre-creating series.
var Outcomes = []string{OutcomeSuccess, OutcomeInvalidArgs, OutcomeBackendError, OutcomeBackendMissing, OutcomeHandlerRejected}

// ToolCallDurationBuckets are the upper bounds, in seconds, of
// tatara_mcp_tool_call_duration_seconds. They are set explicitly because a tool call is bounded by
// the server's call timeout (mcpserver.DefaultCallTimeout, 30s), which prometheus.DefBuckets (up
// to 10s) would lump into +Inf:
//   - 5ms to 100ms: answers without a backend (argument errors, report_internal_issue, a missing
//     backend) and in-cluster round trips to memory, chat and the operator;
//   - 250ms to 10s: slow backends (code search over a large index, a contended API server);
//   - 30: the call timeout, so le="30" counts every call that finished in time and a call cut off
//     by the timeout (it takes a hair over 30s) lands above it;
//   - 90: the timeout plus chat_wait_messages' longest wait (catalog.MaxWaitSeconds, 60s), the
//     only tool whose deadline is extended; a long poll cut off at its deadline lands in +Inf.
//
// TestToolCallDurationBucketsCoverTheTimeouts keeps 30 and 90 in step with those constants.
var ToolCallDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 90}

// Metrics are the cli's metrics.
type Metrics struct {
	RegisteredTools *prometheus.GaugeVec
	InternalIssues  *prometheus.CounterVec
	// InternalIssueRecords counts the reports sent to the operator to be recorded, by outcome
	// (issuerecord's); its series exist only where recording is on.
	InternalIssueRecords *prometheus.CounterVec
	ToolCalls            *prometheus.CounterVec
	// ToolCallDuration observes every tools/call with the same labels as ToolCalls.
	ToolCallDuration *prometheus.HistogramVec
	BuildInfo        prometheus.Gauge
	// ClaimToFirstRequest observes, in a warm pool pod, the time from the Task's claim (the
	// operator's clock) to the agent's first MCP request: a warm start as the agent sees it.
	ClaimToFirstRequest prometheus.Histogram
}

// ClaimToFirstRequestBuckets are the upper bounds, in seconds, of
// tatara_mcp_claim_to_first_request_seconds: a warm start's goal is under 1 s, a cold one's 3 s.
var ClaimToFirstRequestBuckets = []float64{0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30}

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
		InternalIssueRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_mcp_internal_issue_records_total",
			Help: "report_internal_issue reports sent to the operator to be recorded, by outcome (recorded, rate_limited, refused, failed, dropped).",
		}, []string{"outcome"}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_mcp_tool_calls_total",
			Help: "Tool calls handled, by tool and outcome.",
		}, []string{"tool", "outcome"}),
		ToolCallDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tatara_mcp_tool_call_duration_seconds",
			Help:    "Tool call latency in seconds, by tool and outcome (the labels of tatara_mcp_tool_calls_total).",
			Buckets: ToolCallDurationBuckets,
		}, []string{"tool", "outcome"}),
		// One definition for the three components (docs/architecture.md, "Observability contract").
		BuildInfo: buildinfo.NewGauge("tatara_mcp_build_info", "cli"),
	}
	m.ClaimToFirstRequest = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tatara_mcp_claim_to_first_request_seconds",
		Help:    "In a warm pool pod: seconds from the Task's claim to the agent's first MCP request.",
		Buckets: ClaimToFirstRequestBuckets,
	})
	reg.MustRegister(m.RegisteredTools, m.InternalIssues, m.InternalIssueRecords, m.ToolCalls, m.ToolCallDuration, m.BuildInfo, m.ClaimToFirstRequest)
	// Every category/severity series exists from the start at 0: a scrape before the first
	// report gives increase() the 0 it needs (the alerts also count a series first seen above 0,
	// for a report made before the pod's first scrape).
	for _, c := range catalog.IssueCategories {
		for _, s := range catalog.IssueSeverities {
			m.InternalIssues.WithLabelValues(c, s)
		}
	}
	return m
}

// ToolsRegistered records the tools this server registered for profile and creates their call
// counters at 0 for every outcome, so a dashboard's increase() counts each tool's first call.
// The histogram is left to be created on first use: its series are many times the counters'.
func (m *Metrics) ToolsRegistered(profile string, tools []string) {
	m.RegisteredTools.WithLabelValues(profile).Set(float64(len(tools)))
	for _, t := range tools {
		for _, o := range Outcomes {
			m.ToolCalls.WithLabelValues(t, o)
		}
	}
}
