// Package metrics holds the operator's Prometheus metrics. They are built on a registerer
// given by the caller (controller-runtime's metrics.Registry in production, a fresh registry
// per test), never registered at import time.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/cli/pkg/buildinfo"
)

// HTTPRequestDurationBuckets are the upper bounds, in seconds, of
// tatara_operator_http_request_duration_seconds. They are set explicitly because the caller, the
// cli, gives up on a call after its 30s call timeout (mcpserver.DefaultCallTimeout), which
// prometheus.DefBuckets (up to 10s) would lump into +Inf:
//   - 5ms to 100ms: rejected requests (401, 403, 404, 400) and reads from the informer cache;
//   - 250ms to 10s: writes through the API server (a Task status update, a subtask create, their
//     conflict retries) on a busy control plane;
//   - 30: the caller's timeout; a request slower than that has no one waiting for its answer.
var HTTPRequestDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Metrics are the operator's own metrics; controller-runtime adds its reconcile metrics.
type Metrics struct {
	// APIRequests counts REST API requests by operator tool and HTTP status code.
	APIRequests *prometheus.CounterVec
	// APIConnectionsRefused counts REST API connections closed unread because their source
	// address already held its cap of open connections.
	APIConnectionsRefused prometheus.Counter
	// HTTPRequestDuration observes REST API request latency by route (the registered path
	// pattern, never the raw path), method and HTTP status code.
	HTTPRequestDuration *prometheus.HistogramVec
	// AgentPodsCreated counts agent pods this process created (0 after a restart that finds them).
	AgentPodsCreated prometheus.Counter
	// TokenSecretsCreated counts per-Task token Secrets this process created.
	TokenSecretsCreated prometheus.Counter
	// TaskReconciles counts completed Task reconciles by result (ok, error).
	TaskReconciles *prometheus.CounterVec
	// IntentsRecorded counts intents by tool and result (recorded, replaced, idempotent, conflict).
	IntentsRecorded *prometheus.CounterVec
	// WarmPoolPods counts each warm pool's unclaimed pods by state: ready (claimable now),
	// starting, or failed; set by the pool controller.
	WarmPoolPods *prometheus.GaugeVec
	// WarmPoolClaims counts Tasks of a kind with a warm pool by how they started: claimed (a pool
	// pod), or a cold start because the pool had no ready pod (empty) or another Task took the
	// chosen one first (lost_race).
	WarmPoolClaims *prometheus.CounterVec
	// WarmPoolClaimDelivery observes the time from a claim to the claimed pod's cli receiving it.
	WarmPoolClaimDelivery prometheus.Histogram
	// InternalIssueReports counts report_internal_issue reports the REST API received, by result:
	// new, counted, reopened, duplicate, overflow (taskops) or rate_limited (rest).
	InternalIssueReports *prometheus.CounterVec
	// BuildInfo is always 1; its labels identify the running build.
	BuildInfo prometheus.Gauge
}

// Results of WarmPoolClaims.
const (
	ClaimClaimed  = "claimed"
	ClaimEmpty    = "empty"
	ClaimLostRace = "lost_race"
)

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_operator_api_requests_total",
			Help: "REST API requests by operator tool and HTTP status code.",
		}, []string{"tool", "code"}),
		APIConnectionsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tatara_operator_api_connections_refused_total",
			Help: "REST API connections closed unread because their source address held its cap of open connections.",
		}),
		HTTPRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tatara_operator_http_request_duration_seconds",
			Help:    "REST API request latency in seconds, by route pattern, method and HTTP status code.",
			Buckets: HTTPRequestDurationBuckets,
		}, []string{"route", "method", "code"}),
		AgentPodsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tatara_operator_agent_pods_created_total",
			Help: "Agent pods created by this operator process.",
		}),
		TokenSecretsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tatara_operator_token_secrets_created_total",
			Help: "Per-Task token Secrets created by this operator process.",
		}),
		WarmPoolPods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tatara_operator_warm_pool_pods",
			Help: "Unclaimed pods of each warm pool, by state (ready: claimable now; starting; failed: kept a minute for its logs, while the pool creates no pod).",
		}, []string{"namespace", "project", "kind", "state"}),
		WarmPoolClaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_operator_warm_pool_claims_total",
			Help: "Tasks of a kind with a warm pool, by result: claimed, or a cold start because the pool was empty or the chosen pod was taken first (lost_race).",
		}, []string{"kind", "result"}),
		WarmPoolClaimDelivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tatara_operator_warm_pool_claim_delivery_seconds",
			Help:    "Seconds from a Task's claim of a pool pod to the pod's cli receiving the claim.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}),
		TaskReconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_operator_task_reconciles_total",
			Help: "Task reconciles by result (ok, error).",
		}, []string{"result"}),
		IntentsRecorded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_operator_intents_total",
			Help: "Intent calls by tool and result (recorded, replaced, idempotent, conflict).",
		}, []string{"intent", "result"}),
		InternalIssueReports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_operator_internal_issue_reports_total",
			Help: "report_internal_issue reports received by the REST API, by result (new, counted, reopened, duplicate, overflow, rate_limited).",
		}, []string{"result"}),
		// One definition for the three components (docs/architecture.md, "Observability contract").
		BuildInfo: buildinfo.NewGauge("tatara_operator_build_info", "operator"),
	}
	reg.MustRegister(m.Collectors()...)
	return m
}

// Collectors returns every metric, e.g. to unregister them from a shared registry.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.APIRequests, m.APIConnectionsRefused, m.HTTPRequestDuration, m.AgentPodsCreated, m.TokenSecretsCreated, m.TaskReconciles, m.IntentsRecorded,
		m.WarmPoolPods, m.WarmPoolClaims, m.WarmPoolClaimDelivery, m.InternalIssueReports, m.BuildInfo}
}
