package mcpserver

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/internal/obs"
	tataratest "tatara.dev/testkit/testutil"
)

const durationMetric = "tatara_mcp_tool_call_duration_seconds"

func withPrefix(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// Every tools/call is observed once in the latency histogram, with the counter's labels.
func TestToolCallDurationObservedOncePerCall(t *testing.T) {
	h := newHarness(t, "implement")
	metricsSrv := httptest.NewServer(promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{}))
	defer metricsSrv.Close()

	if lines := tataratest.ScrapeLines(t, metricsSrv.URL, durationMetric); len(lines) != 0 {
		t.Fatalf("%s has series before any call: %q", durationMetric, lines)
	}

	if res := h.call(t, "code_stats", map[string]any{"repo": "r"}); res.IsError {
		t.Fatalf("code_stats failed: %s", resultText(res))
	}
	lines := tataratest.ScrapeLines(t, metricsSrv.URL, durationMetric)
	const success = `outcome="success",tool="code_stats"`
	if got, want := withPrefix(lines, durationMetric+"_count"), []string{durationMetric + "_count{" + success + "} 1"}; !slices.Equal(got, want) {
		t.Fatalf("after one call, _count series = %q, want %q", got, want)
	}
	buckets := withPrefix(lines, durationMetric+"_bucket")
	tataratest.CheckHistogramBuckets(t, buckets, durationMetric, success, obs.ToolCallDurationBuckets, 1)
	// The counter's series exist at 0 from the start (obs.Metrics.ToolsRegistered); the call moved
	// exactly the histogram's one series.
	var nonZero []string
	for _, l := range tataratest.ScrapeLines(t, metricsSrv.URL, "tatara_mcp_tool_calls_total") {
		if !strings.HasSuffix(l, "} 0") {
			nonZero = append(nonZero, l)
		}
	}
	if !slices.Equal(nonZero, []string{`tatara_mcp_tool_calls_total{` + success + `} 1`}) {
		t.Errorf("non-zero counter series = %q, want the histogram's one series", nonZero)
	}

	// A failing call gets its own series, labelled with its outcome; the first stays at 1.
	if res := h.call(t, "code_search", map[string]any{"repo": "r"}); !res.IsError {
		t.Fatalf("code_search without query succeeded: %s", resultText(res))
	}
	lines = tataratest.ScrapeLines(t, metricsSrv.URL, durationMetric)
	want := []string{
		durationMetric + `_count{outcome="invalid_arguments",tool="code_search"} 1`,
		durationMetric + "_count{" + success + "} 1",
	}
	if got := withPrefix(lines, durationMetric+"_count"); !slices.Equal(got, want) {
		t.Errorf("after two calls, _count series = %q, want %q", got, want)
	}
}

// The buckets' two upper bounds are the call timeout and the timeout of the longest long poll.
func TestToolCallDurationBucketsCoverTheTimeouts(t *testing.T) {
	b := obs.ToolCallDurationBuckets
	if !slices.IsSorted(b) {
		t.Fatalf("buckets are not sorted: %v", b)
	}
	if !slices.Contains(b, DefaultCallTimeout.Seconds()) {
		t.Errorf("buckets %v lack the call timeout %v", b, DefaultCallTimeout.Seconds())
	}
	if longest := (DefaultCallTimeout + catalog.MaxWaitSeconds*time.Second).Seconds(); b[len(b)-1] != longest {
		t.Errorf("last bucket = %v, want the longest deadline (call timeout + max wait) %v", b[len(b)-1], longest)
	}
}

// A report storm from one agent (1,000 calls, most with made-up categories and severities)
// leaves the metric's label sets where they started: 7 categories x 2 severities, and the tool
// counters at the registered tools x outcomes.
func TestReportStormKeepsLabelSetsBounded(t *testing.T) {
	h := newHarness(t, "brainstorm")
	count := func(name string) int {
		n, err := testutil.GatherAndCount(h.reg, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	issues, calls := count("tatara_mcp_internal_issue_total"), count("tatara_mcp_tool_calls_total")
	if issues != 14 || calls != len(h.srv.Tools)*len(obs.Outcomes) {
		t.Fatalf("before the storm: %d issue series, %d call series; want 14 and %d", issues, calls, len(h.srv.Tools)*len(obs.Outcomes))
	}
	accepted := 0
	for i := range 1000 {
		args := map[string]any{"category": fmt.Sprintf("made-up-%d", i), "severity": fmt.Sprintf("sev-%d", i), "description": "storm"}
		if i%10 == 0 {
			args["category"], args["severity"] = "tool_error", "warn"
		}
		if res := h.call(t, "report_internal_issue", args); !res.IsError {
			accepted++
		}
	}
	if got := count("tatara_mcp_internal_issue_total"); got != issues {
		t.Errorf("after the storm: %d issue series, want %d", got, issues)
	}
	if got := count("tatara_mcp_tool_calls_total"); got != calls {
		t.Errorf("after the storm: %d call series, want %d", got, calls)
	}
	if v := testutil.ToFloat64(h.srv.cfg.Metrics.InternalIssues.WithLabelValues("tool_error", "warn")); v != float64(accepted) || accepted != 100 {
		t.Errorf("tool_error/warn = %v with %d reports accepted, want 100 (only the valid ones)", v, accepted)
	}
}
