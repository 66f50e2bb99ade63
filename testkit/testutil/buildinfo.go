package testutil

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// BuildInfoLabels are the label names every tatara_<component>_build_info gauge carries, so the
// three components' build info joins on the same labels.
var BuildInfoLabels = []string{"goversion", "revision", "version"}

// CheckBuildInfo scrapes g through a real /metrics endpoint and fails t unless metric is a gauge
// with exactly one series, at 1, labelled BuildInfoLabels with no empty value.
func CheckBuildInfo(t testing.TB, g prometheus.Gatherer, metric string) {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL) //nolint:noctx // a local test server
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if !strings.Contains(text, "# TYPE "+metric+" gauge\n") {
		t.Errorf("%s is not a gauge:\n%s", metric, text)
	}
	var series []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, metric+"{") {
			series = append(series, line)
		}
	}
	if len(series) != 1 || !strings.HasSuffix(series[0], "} 1") {
		t.Fatalf("%s series = %q, want one at 1", metric, series)
	}
	labels, _, _ := strings.Cut(strings.TrimPrefix(series[0], metric+"{"), "}")
	var names []string
	for pair := range strings.SplitSeq(labels, ",") {
		name, value, _ := strings.Cut(pair, "=")
		names = append(names, name)
		if value == `""` {
			t.Errorf("%s: label %s is empty", series[0], name)
		}
	}
	if !slices.Equal(names, BuildInfoLabels) {
		t.Errorf("%s label names = %v, want %v", metric, names, BuildInfoLabels)
	}
}
