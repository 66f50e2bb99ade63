// Package version holds the operator's release version, stamped by the linker
// (-X tatara.dev/operator/internal/version.Version=...; make build and make images do it).
package version

// Version is the release version; "dev" for an unstamped build.
var Version = "dev"
