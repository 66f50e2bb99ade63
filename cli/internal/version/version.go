// Package version holds the build's version, stamped by the linker
// (-X tatara.dev/cli/internal/version.Version=...).
package version

import "tatara.dev/cli/pkg/buildinfo"

// Version is the release version; "dev" for an unstamped build.
var Version = "dev"

// revision is the git commit, stamped by make build/images (-X ...version.revision=...): builds
// inside a Go workspace, or with -buildvcs=false, record no VCS information of their own.
var revision = ""

// Revision returns the VCS revision the binary was built from (buildinfo.Revision).
func Revision() string { return buildinfo.Revision(revision) }
