package internalissue

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tatara.dev/cli/pkg/internalissue"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

// OpenGaugeName is the gauge of the records not marked resolved.
const OpenGaugeName = "tatara_operator_internal_issues_open"

// collectTimeout bounds the cache read of one scrape.
const collectTimeout = 5 * time.Second

// OpenCollector exports tatara_operator_internal_issues_open{category,severity}: the InternalIssue
// records not marked resolved, in every namespace the operator serves, read from the manager's
// cache at each scrape (so every replica exports the same numbers, and none keeps a count of its
// own). Every category and severity of the tool has a series, 0 included, so the labels are
// bounded by the tool's enums and a panel or an alert never meets an absent series.
type OpenCollector struct {
	reader client.Reader
	log    *slog.Logger
	desc   *prometheus.Desc
}

// NewOpenCollector reads the records through reader (the manager's cached client).
func NewOpenCollector(reader client.Reader, log *slog.Logger) *OpenCollector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &OpenCollector{reader: reader, log: log, desc: prometheus.NewDesc(OpenGaugeName,
		"InternalIssue records not marked resolved, by category and highest severity reported.", []string{"category", "severity"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *OpenCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. A failed read (the cache not started yet) exports no
// sample rather than zeros that would read as "nothing open".
func (c *OpenCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	var list tatarav1.InternalIssueList
	if err := c.reader.List(ctx, &list); err != nil {
		c.log.Warn("failed to read the internal issues for their gauge", "error", err.Error())
		return
	}
	open := map[[2]string]float64{}
	for _, category := range internalissue.Categories() {
		for _, severity := range internalissue.Severities() {
			open[[2]string{category, severity}] = 0
		}
	}
	for _, r := range list.Items {
		key := [2]string{r.Spec.Category, r.Status.Severity}
		if _, known := open[key]; !known || r.Spec.Resolved || r.Status.Count == 0 {
			continue // a record created a moment ago has no report counted yet
		}
		open[key]++
	}
	for key, n := range open {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, n, key[0], key[1])
	}
}
