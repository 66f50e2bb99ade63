// Package buildinfo is what every Tatara binary reports about its build (the *_build_info
// gauges, `tatara version`, release checks), in one place. make build and make images stamp it
// in every binary with the same two linker flags:
//
//	-X tatara.dev/cli/pkg/buildinfo.Version=<the chart's appVersion>
//	-X tatara.dev/cli/pkg/buildinfo.revision=<the git commit>
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is the release version; "dev" for an unstamped build.
var Version = "dev"

// revision is the git commit, stamped: builds inside a Go workspace, or with -buildvcs=false,
// record no VCS information of their own.
var revision = ""

// Revision returns the VCS revision the binary was built from: stamped, else the one Go
// recorded, else "unknown".
func Revision() string {
	if revision != "" {
		return revision
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// NewGauge returns the binary's build-info gauge name (tatara_<component>_build_info): always 1,
// its labels version, revision and goversion, the same names for every component so the gauges
// join on them.
func NewGauge(name, component string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        name,
		Help:        "Always 1; labels carry the " + component + "'s version, revision and Go version.",
		ConstLabels: prometheus.Labels{"version": Version, "revision": Revision(), "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}
