package metrics_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"tatara.dev/wrapper/internal/metrics"
	"tatara.dev/wrapper/internal/transcript"
)

// The chart's PodMonitor drops a scrape above monitoring.sampleLimit: the wrapper's scrape, every
// bounded series present as the wrapper creates them, must fit with room to spare. Its series do
// not grow with the transcript (every label is clamped to a closed set).
func TestScrapeFitsTheChartsSampleLimit(t *testing.T) {
	reg := metrics.NewRegistry()
	m := metrics.NewMetrics(reg)
	for _, l := range transcript.InternalIssueLabels() {
		m.InternalIssueTotal.WithLabelValues(l[0], l[1]).Inc()
	}
	for _, l := range transcript.StreamEventLabels() {
		m.StreamEventsTotal.WithLabelValues(l).Inc()
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	samples := 0
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			switch {
			case metric.GetHistogram() != nil:
				samples += len(metric.GetHistogram().GetBucket()) + 3
			case metric.GetSummary() != nil:
				samples += len(metric.GetSummary().GetQuantile()) + 2
			default:
				samples++
			}
		}
	}
	raw, err := os.ReadFile("../../../charts/tatara-wrapper/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	match := regexp.MustCompile(`(?m)^\s+sampleLimit:\s*(\d+)\s*$`).FindSubmatch(raw)
	if match == nil {
		t.Fatal("charts/tatara-wrapper/values.yaml has no monitoring.sampleLimit")
	}
	limit, _ := strconv.Atoi(string(match[1]))
	t.Logf("scrape: %d samples; the chart's sampleLimit: %d", samples, limit)
	if samples*3/2 > limit {
		t.Errorf("a scrape has %d samples: the chart's sampleLimit %d leaves less than 50%% headroom", samples, limit)
	}
}
