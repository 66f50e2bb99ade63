package modelgateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	tataratest "tatara.dev/testkit/testutil"
)

// The metrics lint clean, carry the pod's kind and profile, and every series that can be known
// in advance exists at 0 before the first request.
func TestMetricsLintAndStartAtZero(t *testing.T) {
	f := newFixture(t, Config{TaskKind: "implement", Profile: "implement"})
	problems, err := promtest.GatherAndLint(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric lint: %s: %s", p.Metric, p.Text)
	}
	want := `
# HELP tatara_model_budget_refusals_total Requests the model gateway refused because the Task's token budget was spent.
# TYPE tatara_model_budget_refusals_total counter
tatara_model_budget_refusals_total{kind="implement",profile="implement"} 0
# HELP tatara_model_requests_total Requests the model gateway answered, by the model that answered (none for an error or a refusal) and the HTTP status the agent got.
# TYPE tatara_model_requests_total counter
tatara_model_requests_total{code="400",kind="implement",model="none",profile="implement"} 0
tatara_model_requests_total{code="404",kind="implement",model="none",profile="implement"} 0
tatara_model_requests_total{code="413",kind="implement",model="none",profile="implement"} 0
tatara_model_requests_total{code="500",kind="implement",model="none",profile="implement"} 0
tatara_model_requests_total{code="502",kind="implement",model="none",profile="implement"} 0
tatara_model_requests_total{code="503",kind="implement",model="none",profile="implement"} 0
`
	if err := promtest.GatherAndCompare(f.reg, strings.NewReader(want), "tatara_model_budget_refusals_total", "tatara_model_requests_total"); err != nil {
		t.Error(err)
	}
	for name, n := range map[string]int{"tatara_model_request_duration_seconds": 1, "tatara_model_time_to_first_byte_seconds": 1, "tatara_model_tokens_total": 0} {
		if got := promtest.CollectAndCount(f.reg, name); got != n {
			t.Errorf("%s has %d series at start, want %d", name, got, n)
		}
	}

	// The first response of a model creates its four token series at once, so a type first
	// used later still increases from 0.
	_ = f.post(t, PathMessages)
	tokens := `
# HELP tatara_model_tokens_total Tokens the upstream reported, by model and type (input, output, cache_creation, cache_read).
# TYPE tatara_model_tokens_total counter
tatara_model_tokens_total{kind="implement",model="claude-test-1",profile="implement",type="cache_creation"} 0
tatara_model_tokens_total{kind="implement",model="claude-test-1",profile="implement",type="cache_read"} 0
tatara_model_tokens_total{kind="implement",model="claude-test-1",profile="implement",type="input"} 10
tatara_model_tokens_total{kind="implement",model="claude-test-1",profile="implement",type="output"} 3
`
	if err := promtest.GatherAndCompare(f.reg, strings.NewReader(tokens), "tatara_model_tokens_total"); err != nil {
		t.Error(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(f.reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	for _, h := range []struct {
		metric, labels string
		buckets        []float64
	}{
		{"tatara_model_time_to_first_byte_seconds", `kind="implement",profile="implement"`, TimeToFirstByteBuckets},
		{"tatara_model_request_duration_seconds", `code="200",kind="implement",profile="implement"`, RequestDurationBuckets},
	} {
		lines := tataratest.ScrapeLines(t, srv.URL, h.metric+"_bucket{"+h.labels)
		tataratest.CheckHistogramBuckets(t, lines, h.metric, h.labels, h.buckets, 1)
	}
}

func TestBuildInfo(t *testing.T) {
	f := newFixture(t, Config{})
	tataratest.CheckBuildInfo(t, f.reg, "tatara_model_gateway_build_info")
}

// The model label takes the upstream's model name, never the agent's, and at most maxModels
// values: a permissive upstream that echoes whatever model the agent names cannot grow the
// series without bound.
func TestModelLabelIsBounded(t *testing.T) {
	f := newFixture(t, Config{})
	for i := range maxModels + 4 {
		f.up.setAnswer(streamAnswer(messageStream(fmt.Sprintf("model-%02d", i), apiUsage{InputTokens: 1})))
		_ = f.do(t, http.MethodPost, PathMessages, `{"model":"agent-named-model"}`, nil)
	}
	f.up.setAnswer(streamAnswer(messageStream(strings.Repeat("m", 500), apiUsage{InputTokens: 1})))
	_ = f.post(t, PathMessages)
	if got := promtest.CollectAndCount(f.gw.metrics.requests, "tatara_model_requests_total"); got != len(gatewayCodes)+maxModels+1 {
		t.Errorf("%d request series, want the gateway's %d, %d models and other", got, len(gatewayCodes), maxModels)
	}
	if got := promtest.ToFloat64(f.gw.metrics.requests.WithLabelValues(modelOther, "200")); got != 5 {
		t.Errorf("requests of model other = %v, want 5", got)
	}
	if got := promtest.ToFloat64(f.gw.metrics.requests.WithLabelValues("agent-named-model", "200")); got != 0 {
		t.Errorf("the agent's model name became a label")
	}
}
