// Package metrics holds the wrapper's Prometheus metrics. Names are API (dashboards and alerts
// depend on them, see docs/architecture.md, "Observability contract") and are pinned by
// metrics_test.go.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"tatara.dev/cli/pkg/buildinfo"
)

// Metric names, exported so tests and docs refer to one spelling.
const (
	InternalIssueTotalName = "tatara_wrapper_internal_issue_total"
	StreamEventsTotalName  = "tatara_wrapper_stream_events_total"
	BuildInfoName          = "tatara_wrapper_build_info"
)

// Metrics is every wrapper metric, registered on the Registerer given to NewMetrics.
type Metrics struct {
	// InternalIssueTotal counts report_internal_issue tool_use blocks seen in the transcript, by
	// clamped category and severity. These are its only labels: project, task and kind go into log
	// fields, never into labels, so the series count stays bounded.
	InternalIssueTotal *prometheus.CounterVec
	// StreamEventsTotal counts transcript events by clamped type.
	StreamEventsTotal *prometheus.CounterVec
	// BuildInfo is always 1; its labels say which wrapper build runs.
	BuildInfo prometheus.Gauge
}

// NewMetrics builds the metrics and registers them on reg; it panics if a name is already
// registered there, which is a programming error caught by any test that builds the wrapper.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		InternalIssueTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: InternalIssueTotalName,
			Help: "report_internal_issue tool calls seen in the agent transcript, by category and severity.",
		}, []string{"category", "severity"}),
		StreamEventsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: StreamEventsTotalName,
			Help: "Agent transcript events processed, by event type (unknown types count as other).",
		}, []string{"type"}),
		// One definition for the three components (docs/architecture.md, "Observability contract").
		BuildInfo: buildinfo.NewGauge(BuildInfoName, "wrapper"),
	}
	reg.MustRegister(m.InternalIssueTotal, m.StreamEventsTotal, m.BuildInfo)
	return m
}

// NewRegistry returns a fresh registry with the standard process and Go collectors, so the
// wrapper's /metrics also shows its own memory and file descriptors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}
