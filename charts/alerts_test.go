package charts_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// TestInternalIssueAlertsFireOnOneReport evaluates each chart's rendered alert expression with
// Prometheus's own PromQL engine over a scraped history: two agent pods scraped every 30 s, whose
// counters exist at 0 from the start (the cli and the wrapper create every series at 0; their
// metrics tests pin that), one of which records a single report. The alert must name exactly
// that {category, severity} from the next scrape on, stay quiet before it, and clear once the
// report has left the window.
func TestInternalIssueAlertsFireOnOneReport(t *testing.T) {
	for _, tc := range internalIssueAlerts {
		t.Run(tc.chart, func(t *testing.T) {
			expr, ok := promExprs(t, mustRender(t, tc.chart, monitoringOn()))[tc.alert]
			if !ok {
				t.Fatalf("no alert %s", tc.alert)
			}
			// 0 at 0 s .. 90 s, the report lands between the 90 s and 120 s scrapes; 40 minutes in all.
			storage := promqltest.LoadedStorage(t, `
load 30s
  `+tc.metric+`{pod="a",category="tool_error",severity="error"} 0x3 1x76
  `+tc.metric+`{pod="a",category="auth",severity="warn"} 0x79
  `+tc.metric+`{pod="b",category="tool_error",severity="error"} 0x79
`)
			t.Cleanup(func() { _ = storage.Close() })
			engine := promqltest.NewTestEngineWithOpts(t, promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute})

			firing := func(at time.Duration) []string {
				q, err := engine.NewInstantQuery(context.Background(), storage, nil, expr, time.Unix(0, 0).Add(at))
				if err != nil {
					t.Fatalf("%s: %v", expr, err)
				}
				defer q.Close()
				vec, err := q.Exec(context.Background()).Vector()
				if err != nil {
					t.Fatalf("%s at %v: %v", expr, at, err)
				}
				var got []string
				for _, s := range vec {
					got = append(got, s.Metric.String())
				}
				return got
			}
			want := `{category="tool_error", severity="error"}`
			for _, step := range []struct {
				at   time.Duration
				want []string
			}{
				{90 * time.Second, nil},
				{2 * time.Minute, []string{want}},
				{10 * time.Minute, []string{want}},
				{35 * time.Minute, nil}, // the 15m window has passed
			} {
				got := firing(step.at)
				if len(got) != len(step.want) || (len(got) == 1 && got[0] != step.want[0]) {
					t.Errorf("at %v: %s fires for %v, want %v", step.at, tc.alert, got, step.want)
				}
			}
		})
	}
}
