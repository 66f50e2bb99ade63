package buildinfo

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRevisionPrefersTheStampedValue(t *testing.T) {
	old := revision
	t.Cleanup(func() { revision = old })
	revision = ""
	if got := Revision(); got == "" {
		t.Fatal("an unstamped build must still name a revision (or unknown)")
	}
	revision = "abc123"
	if got := Revision(); got != "abc123" {
		t.Fatalf("Revision() = %q, want the stamped abc123", got)
	}
}

func TestNewGaugeCarriesTheStamp(t *testing.T) {
	oldV, oldR := Version, revision
	t.Cleanup(func() { Version, revision = oldV, oldR })
	Version, revision = "1.2.3", "abc123"
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewGauge("tatara_x_build_info", "x"))
	want := `# HELP tatara_x_build_info Always 1; labels carry the x's version, revision and Go version.
# TYPE tatara_x_build_info gauge
tatara_x_build_info{goversion="` + runtime.Version() + `",revision="abc123",version="1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
