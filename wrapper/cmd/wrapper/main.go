// Command wrapper is the agent pod's main process: it runs the agent CLI for the Task's directive,
// tails its transcript into logs and metrics, and exits with the agent's exit code.
//
// Subcommands serve the pod's init containers, which run the wrapper image: `wrapper
// workspace-init` clones the Task's repository (and with --install-to copies the wrapper for the
// agent image's container), `wrapper git-credential` is the git credential helper it gives git,
// `wrapper connect-proxy` the ssh ProxyCommand it gives git behind an egress proxy, and
// `wrapper install` only copies the wrapper, for a Task without a repository. `wrapper
// release-check` is the tatara-wrapper chart's Helm test.
package main

import (
	"os"

	"tatara.dev/wrapper/internal/app"
	"tatara.dev/wrapper/internal/install"
	"tatara.dev/wrapper/internal/releasecheck"
	"tatara.dev/wrapper/internal/workspace"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "workspace-init":
			os.Exit(workspace.Main(os.Args[2:], os.Stderr))
		case "install":
			os.Exit(install.Main(os.Args[2:], os.Stderr))
		case "git-credential":
			os.Exit(workspace.CredentialMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "connect-proxy":
			os.Exit(workspace.ConnectMain(os.Args[2:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
		case "release-check":
			os.Exit(releasecheck.Main(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	os.Exit(app.Main(os.Args[1:], os.Getenv, os.Environ(), os.Stderr))
}
