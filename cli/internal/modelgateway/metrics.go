package modelgateway

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/cli/pkg/buildinfo"
)

// The gateway's metrics. Every label is bounded: kind and profile are the pod's (one value
// each, set by the operator), code an HTTP status, type one of four, and model comes from the
// upstream's responses, never from the agent's requests, and is capped at maxModels values. No
// Task or Project name: a pod's metrics join its Task through the pod's own labels.

// Values of the model label that name no model.
const (
	// modelNone: the response named no model (an error, count_tokens), or there was none.
	modelNone = "none"
	// modelOther: a model beyond the first maxModels.
	modelOther = "other"
	// maxModels bounds the model label's values; a pod's agent uses one or two models.
	maxModels = 16
	// maxModelBytes bounds one model name.
	maxModelBytes = 100
)

// The token types, the values of tatara_model_tokens_total's type label.
const (
	TokensInput         = "input"
	TokensOutput        = "output"
	TokensCacheCreation = "cache_creation"
	TokensCacheRead     = "cache_read"
)

// gatewayCodes are the statuses the gateway answers with itself, created at zero at start.
var gatewayCodes = []int{http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge,
	http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}

// RequestDurationBuckets are the upper bounds, in seconds, of
// tatara_model_request_duration_seconds: a model request takes from a second (a short answer,
// count_tokens) to many minutes (a long answer with extended thinking); the gateway's own
// refusals fall in the first bucket.
var RequestDurationBuckets = []float64{0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200}

// TimeToFirstByteBuckets are the upper bounds, in seconds, of
// tatara_model_time_to_first_byte_seconds: a stream's first event comes once the prompt is
// read, from well under a second to tens of seconds for a long context.
var TimeToFirstByteBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120}

type metrics struct {
	requests  *prometheus.CounterVec
	tokens    *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	ttfb      prometheus.Histogram
	refusals  prometheus.Counter
	buildInfo prometheus.Gauge

	mu     sync.Mutex
	models map[string]bool
}

func newMetrics(reg prometheus.Registerer, kind, profile string) (*metrics, error) {
	pod := prometheus.Labels{"kind": kind, "profile": profile}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "tatara_model_requests_total",
			Help:        "Requests the model gateway answered, by the model that answered (none for an error or a refusal) and the HTTP status the agent got.",
			ConstLabels: pod,
		}, []string{"model", "code"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "tatara_model_tokens_total",
			Help:        "Tokens the upstream reported, by model and type (input, output, cache_creation, cache_read).",
			ConstLabels: pod,
		}, []string{"model", "type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "tatara_model_request_duration_seconds",
			Help:        "Seconds from a request's arrival to the end of its response (a stream's last event), by the HTTP status the agent got.",
			ConstLabels: pod,
			Buckets:     RequestDurationBuckets,
		}, []string{"code"}),
		ttfb: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "tatara_model_time_to_first_byte_seconds",
			Help:        "Seconds from a forwarded request's arrival to the first byte of the upstream's response body (its headers, for an empty body).",
			ConstLabels: pod,
			Buckets:     TimeToFirstByteBuckets,
		}),
		refusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "tatara_model_budget_refusals_total",
			Help:        "Requests the model gateway refused because the Task's token budget was spent.",
			ConstLabels: pod,
		}),
		// One definition for every component (docs/architecture.md, "Observability contract").
		buildInfo: buildinfo.NewGauge("tatara_model_gateway_build_info", "model gateway"),
		models:    map[string]bool{},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.tokens, m.duration, m.ttfb, m.refusals, m.buildInfo} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("failed to register the model gateway's metrics: %w", err)
			}
		}
	}
	// Every series that can be known before the first request starts at 0, so increase() counts
	// the first one: the gateway's own answers, a success, and the tokens of each model once it
	// is first seen (modelLabel).
	for _, code := range gatewayCodes {
		m.requests.WithLabelValues(modelNone, strconv.Itoa(code))
	}
	m.duration.WithLabelValues("200")
	return m, nil
}

// modelLabel returns the model label value of a model name from a response.
func (m *metrics) modelLabel(name string) string {
	if name == "" {
		return modelNone
	}
	if len(name) > maxModelBytes {
		name = name[:maxModelBytes]
	}
	name = strings.ToValidUTF8(name, "?")
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.models[name]:
		return name
	case len(m.models) >= maxModels:
		name = modelOther
	}
	m.models[name] = true
	for _, t := range []string{TokensInput, TokensOutput, TokensCacheCreation, TokensCacheRead} {
		m.tokens.WithLabelValues(name, t)
	}
	return name
}

// observe counts one answered request.
func (m *metrics) observe(model string, code int, elapsed time.Duration) {
	c := strconv.Itoa(code)
	m.requests.WithLabelValues(model, c).Inc()
	m.duration.WithLabelValues(c).Observe(elapsed.Seconds())
}

func (m *metrics) addTokens(model string, u apiUsage) {
	for t, n := range map[string]int64{TokensInput: u.InputTokens, TokensOutput: u.OutputTokens,
		TokensCacheCreation: u.CacheCreationInputTokens, TokensCacheRead: u.CacheReadInputTokens} {
		m.tokens.WithLabelValues(model, t).Add(float64(n))
	}
}
