package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.APIRequests.WithLabelValues("task_get", "200").Inc()
	m.APIRequests.WithLabelValues("pr_outcome", "409").Add(2)
	m.AgentPodsCreated.Inc()
	m.IntentsRecorded.WithLabelValues("pr_outcome", "conflict").Inc()
	m.HTTPRequestDuration.WithLabelValues("/api/v1/tasks/{task}", "get", "200").Observe(0.02) // linted below

	want := `
# HELP tatara_operator_api_requests_total REST API requests by operator tool and HTTP status code.
# TYPE tatara_operator_api_requests_total counter
tatara_operator_api_requests_total{code="200",tool="task_get"} 1
tatara_operator_api_requests_total{code="409",tool="pr_outcome"} 2
# HELP tatara_operator_agent_pods_created_total Agent pods created by this operator process.
# TYPE tatara_operator_agent_pods_created_total counter
tatara_operator_agent_pods_created_total 1
# HELP tatara_operator_intents_total Intent calls by tool and result (recorded, idempotent, conflict).
# TYPE tatara_operator_intents_total counter
tatara_operator_intents_total{intent="pr_outcome",result="conflict"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"tatara_operator_api_requests_total", "tatara_operator_agent_pods_created_total", "tatara_operator_intents_total"); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("metric lint problems: %+v", problems)
	}
}

// tatara_operator_build_info, scraped from a real /metrics endpoint, is one gauge at 1 labelled
// exactly like tatara_mcp_build_info and tatara_wrapper_build_info (each module's test pins the
// same three names), none of them empty.
func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()

	if !strings.Contains(string(text), "# TYPE tatara_operator_build_info gauge\n") {
		t.Errorf("tatara_operator_build_info is not a gauge:\n%s", text)
	}
	var series []string
	for line := range strings.SplitSeq(string(text), "\n") {
		if strings.HasPrefix(line, "tatara_operator_build_info{") {
			series = append(series, line)
		}
	}
	if len(series) != 1 || !strings.HasSuffix(series[0], "} 1") {
		t.Fatalf("tatara_operator_build_info series = %q, want one at 1", series)
	}
	labels, _, _ := strings.Cut(strings.TrimPrefix(series[0], "tatara_operator_build_info{"), "}")
	var names []string
	for pair := range strings.SplitSeq(labels, ",") {
		name, value, _ := strings.Cut(pair, "=")
		names = append(names, name)
		if value == `""` {
			t.Errorf("%s: label %s is empty", series[0], name)
		}
	}
	if want := []string{"goversion", "revision", "version"}; !slices.Equal(names, want) {
		t.Errorf("tatara_operator_build_info label names = %v, want %v", names, want)
	}
}

func TestNewMetricsTwiceOnOneRegistryPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	defer func() {
		if recover() == nil {
			t.Fatal("registering the same metrics twice must fail loudly")
		}
	}()
	NewMetrics(reg)
}
