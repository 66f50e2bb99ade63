// Package buildinfo is what every Tatara binary reports about its build (the *_build_info
// gauges, `tatara version`), in one place.
package buildinfo

import "runtime/debug"

// Revision returns the VCS revision a binary was built from: stamped (the value of a variable
// that make build sets with -ldflags -X), else the one Go recorded (none for builds inside a Go
// workspace or with -buildvcs=false), else "unknown".
func Revision(stamped string) string {
	if stamped != "" {
		return stamped
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
