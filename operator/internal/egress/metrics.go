package egress

import (
	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/operator/internal/egress/allowlist"
)

// Decisions of tatara_egress_proxy_requests_total.
const (
	DecisionAllowed = "allowed"
	DecisionDenied  = "denied"
)

// Metrics are the proxy's Prometheus metrics, each labelled with its Project.
type Metrics struct {
	// Requests counts CONNECTs and plain HTTP requests by decision (allowed, denied) and Reason.
	Requests *prometheus.CounterVec
	// UpstreamErrors counts allowed requests whose host could not be reached.
	UpstreamErrors prometheus.Counter
	// OpenUpstream is the number of open connections to allowed hosts (tunnels and plain HTTP).
	OpenUpstream prometheus.Gauge
	// ConnectionsRefused counts connections closed unread for their source's cap.
	ConnectionsRefused prometheus.Counter
	// EventsSuppressed counts refusals recorded without a Kubernetes Event: past the per-Task or
	// the overall Event budget.
	EventsSuppressed prometheus.Counter
	// InvalidAllowEntries is the number of entries and URLs of the Project left off its allow-list.
	InvalidAllowEntries prometheus.Gauge
}

// NewMetrics creates the metrics of project's proxy on reg, every series of Requests at 0.
func NewMetrics(reg prometheus.Registerer, project string) *Metrics {
	cl := prometheus.Labels{"project": project}
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_egress_proxy_requests_total", ConstLabels: cl,
			Help: "Egress proxy requests (CONNECT and plain HTTP) by decision (allowed, denied) and reason.",
		}, []string{"decision", "reason"}),
		UpstreamErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tatara_egress_proxy_upstream_errors_total", ConstLabels: cl,
			Help: "Allowed egress proxy requests whose host could not be reached.",
		}),
		OpenUpstream: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tatara_egress_proxy_upstream_connections", ConstLabels: cl,
			Help: "Open egress proxy connections to allowed hosts (CONNECT tunnels and plain HTTP requests).",
		}),
		ConnectionsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tatara_egress_proxy_connections_refused_total", ConstLabels: cl,
			Help: "Egress proxy connections closed unread because their source address held its cap of open connections.",
		}),
		EventsSuppressed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tatara_egress_proxy_events_suppressed_total", ConstLabels: cl,
			Help: "Egress proxy refusals logged and counted without a Kubernetes Event, past the Event budget.",
		}),
		InvalidAllowEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tatara_egress_proxy_invalid_allow_entries", ConstLabels: cl,
			Help: "Entries of the Project's egress allow-list, repo URLs and model URL left off the allow-list as invalid.",
		}),
	}
	for _, r := range allowlist.Reasons {
		d := DecisionDenied
		if r == allowlist.ReasonAllowed {
			d = DecisionAllowed
		}
		m.Requests.WithLabelValues(d, string(r))
	}
	reg.MustRegister(m.Requests, m.UpstreamErrors, m.OpenUpstream, m.ConnectionsRefused, m.EventsSuppressed,
		m.InvalidAllowEntries)
	return m
}
