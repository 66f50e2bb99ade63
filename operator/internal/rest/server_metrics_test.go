package rest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/index"
	"tatara.dev/operator/internal/metrics"
	"tatara.dev/operator/internal/token"
	tataratest "tatara.dev/testkit/testutil"
)

const durationMetric = "tatara_operator_http_request_duration_seconds"

// fieldIndexer hands the production indexes (index.Register) to the fake client's builder.
type fieldIndexer struct{ b *fake.ClientBuilder }

func (f fieldIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	f.b.WithIndex(obj, field, fn)
	return nil
}

// metricsServer is the REST API on a fake client holding one Task and its token Secret, next to
// a /metrics endpoint serving the API's registry.
func metricsServer(t *testing.T) (api, metricsURL, tok string) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := tatarav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tok = "tatara_" + strings.Repeat("5e", 32)
	task := &tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t1", UID: types.UID("uid-t1")},
		Spec:       tatarav1.TaskSpec{Kind: tatarav1.KindSelfImprove, ProjectRef: tatarav1.ProjectReference{Name: "p"}},
		Status:     tatarav1.TaskStatus{Phase: tatarav1.PhaseRunning, TokenHash: token.Hash(tok)},
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(task, agent.BuildSecret(task, tok))
	if err := index.Register(context.Background(), fieldIndexer{b}); err != nil {
		t.Fatal(err)
	}
	c := b.Build()
	reg := prometheus.NewRegistry()
	s := New(Options{Client: c, APIReader: c, Metrics: metrics.NewMetrics(reg)})
	apiSrv := httptest.NewServer(s.Handler())
	t.Cleanup(apiSrv.Close)
	metricsSrv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(metricsSrv.Close)
	return apiSrv.URL, metricsSrv.URL, tok
}

func do(t *testing.T, method, url, tok string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// One REST request is one observation, labelled with its route pattern, not its path.
func TestRequestDurationByRoutePattern(t *testing.T) {
	api, metricsURL, tok := metricsServer(t)
	if lines := tataratest.ScrapeLines(t, metricsURL, durationMetric); len(lines) != 0 {
		t.Fatalf("%s has series before any request: %q", durationMetric, lines)
	}

	if code := do(t, http.MethodGet, api+"/api/v1/tasks/t1", tok); code != http.StatusOK {
		t.Fatalf("task_get = %d, want 200", code)
	}
	const taskGet = `code="200",method="get",route="/api/v1/tasks/{task}"`
	if got, want := tataratest.ScrapeLines(t, metricsURL, durationMetric+"_count"), []string{durationMetric + "_count{" + taskGet + "} 1"}; !slices.Equal(got, want) {
		t.Fatalf("after one request, _count series = %q, want %q", got, want)
	}
	buckets := tataratest.ScrapeLines(t, metricsURL, durationMetric+"_bucket")
	tataratest.CheckHistogramBuckets(t, buckets, durationMetric, taskGet, metrics.HTTPRequestDurationBuckets, 1)
	// The tool counter sits next to it and counted the same request.
	if got, want := tataratest.ScrapeLines(t, metricsURL, "tatara_operator_api_requests_total{"), []string{`tatara_operator_api_requests_total{code="200",tool="task_get"} 1`}; !slices.Equal(got, want) {
		t.Errorf("api requests counter = %q, want %q", got, want)
	}

	// Other paths of the same route share its series; unmatched paths and odd methods share the
	// fallback's, so no raw path or method becomes a label value.
	do(t, http.MethodGet, api+"/api/v1/tasks/someone-else", tok) // 403
	do(t, http.MethodGet, api+"/api/v1/tasks/t1", "")            // 401
	do(t, http.MethodGet, api+"/no/such/route", tok)             // 404
	do(t, "BREW", api+"/api/v1/tasks/t1/notes", tok)             // 404
	want := []string{
		durationMetric + "_count{" + taskGet + "} 1",
		durationMetric + `_count{code="401",method="get",route="/api/v1/tasks/{task}"} 1`,
		durationMetric + `_count{code="403",method="get",route="/api/v1/tasks/{task}"} 1`,
		durationMetric + `_count{code="404",method="get",route="/"} 1`,
		durationMetric + `_count{code="404",method="unknown",route="/"} 1`,
	}
	if got := tataratest.ScrapeLines(t, metricsURL, durationMetric+"_count"); !slices.Equal(got, want) {
		t.Errorf("_count series = %q, want %q", got, want)
	}
}
