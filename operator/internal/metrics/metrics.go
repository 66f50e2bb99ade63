// Package metrics holds the operator's Prometheus metrics. They are built on a registerer
// given by the caller (controller-runtime's metrics.Registry in production, a fresh registry
// per test), never registered at import time.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the operator's own metrics; controller-runtime adds its reconcile metrics.
type Metrics struct {
	// APIRequests counts REST API requests by operator tool and HTTP status code.
	APIRequests *prometheus.CounterVec
	// AgentPodsCreated counts agent pods this process created (0 after a restart that finds them).
	AgentPodsCreated prometheus.Counter
	// TokenSecretsCreated counts per-Task token Secrets this process created.
	TokenSecretsCreated prometheus.Counter
	// TaskReconciles counts completed Task reconciles by result (ok, error).
	TaskReconciles *prometheus.CounterVec
	// IntentsRecorded counts intents by tool and result (recorded, idempotent, conflict).
	IntentsRecorded *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_operator_api_requests_total",
			Help: "REST API requests by operator tool and HTTP status code.",
		}, []string{"tool", "code"}),
		AgentPodsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tatara_operator_agent_pods_created_total",
			Help: "Agent pods created by this operator process.",
		}),
		TokenSecretsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tatara_operator_token_secrets_created_total",
			Help: "Per-Task token Secrets created by this operator process.",
		}),
		TaskReconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_operator_task_reconciles_total",
			Help: "Task reconciles by result (ok, error).",
		}, []string{"result"}),
		IntentsRecorded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tatara_operator_intents_total",
			Help: "Intent calls by tool and result (recorded, idempotent, conflict).",
		}, []string{"intent", "result"}),
	}
	reg.MustRegister(m.Collectors()...)
	return m
}

// Collectors returns every metric, e.g. to unregister them from a shared registry.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.APIRequests, m.AgentPodsCreated, m.TokenSecretsCreated, m.TaskReconciles, m.IntentsRecorded}
}
