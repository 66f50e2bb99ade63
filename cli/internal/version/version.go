// Package version holds the build's version, stamped by the linker
// (-X tatara.dev/cli/internal/version.Version=...).
package version

import "runtime/debug"

// Version is the release version; "dev" for an unstamped build.
var Version = "dev"

// Revision returns the VCS revision the binary was built from, or "unknown".
func Revision() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
