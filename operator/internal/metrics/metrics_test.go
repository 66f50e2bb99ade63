package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	tataratest "tatara.dev/testkit/testutil"
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
# HELP tatara_operator_intents_total Intent calls by tool and result (recorded, replaced, idempotent, conflict).
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
	tataratest.CheckBuildInfo(t, reg, "tatara_operator_build_info")
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
