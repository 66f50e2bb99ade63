package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	tataratest "tatara.dev/testkit/testutil"
)

func TestMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.InternalIssueTotal.WithLabelValues("auth", "warn").Inc()
	m.StreamEventsTotal.WithLabelValues("tool_use").Add(2)

	cases := []struct {
		name string
		want string
	}{
		{InternalIssueTotalName, `
# HELP tatara_wrapper_internal_issue_total report_internal_issue tool calls seen in the agent transcript, by category and severity.
# TYPE tatara_wrapper_internal_issue_total counter
tatara_wrapper_internal_issue_total{category="auth",severity="warn"} 1
`},
		{StreamEventsTotalName, `
# HELP tatara_wrapper_stream_events_total Agent transcript events processed, by event type (unknown types count as other).
# TYPE tatara_wrapper_stream_events_total counter
tatara_wrapper_stream_events_total{type="tool_use"} 2
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tc.want), tc.name); err != nil {
				t.Fatal(err)
			}
		})
	}
	if v := testutil.ToFloat64(m.BuildInfo); v != 1 {
		t.Fatalf("build info = %v, want 1", v)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("metric lint problems: %v", problems)
	}
}

func TestNewRegistryServesRuntimeMetrics(t *testing.T) {
	reg := NewRegistry()
	NewMetrics(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, n := range []string{"go_goroutines", "process_open_fds", BuildInfoName} {
		if !names[n] {
			t.Errorf("missing %s", n)
		}
	}
}

// tatara_wrapper_build_info, scraped from a real /metrics endpoint, is one gauge at 1 labelled
// exactly like tatara_mcp_build_info and tatara_operator_build_info (each module's test pins the
// same three names), none of them empty.
func TestBuildInfoLabels(t *testing.T) {
	reg := NewRegistry()
	NewMetrics(reg)
	tataratest.CheckBuildInfo(t, reg, "tatara_wrapper_build_info")
}
