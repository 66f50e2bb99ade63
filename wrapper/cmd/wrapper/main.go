// Command wrapper is the agent pod's main process: it runs the agent CLI for the Task's directive,
// tails its transcript into logs and metrics, and exits with the agent's exit code.
//
// Two subcommands serve the pod's workspace-init container, which runs the same binary:
// `wrapper workspace-init` clones the Task's repository, and `wrapper git-credential` is the git
// credential helper it gives git. `wrapper release-check` is the tatara-wrapper chart's Helm test.
package main

import (
	"os"

	"tatara.dev/wrapper/internal/app"
	"tatara.dev/wrapper/internal/releasecheck"
	"tatara.dev/wrapper/internal/workspace"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "workspace-init":
			os.Exit(workspace.Main(os.Args[2:], os.Stderr))
		case "git-credential":
			os.Exit(workspace.CredentialMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "release-check":
			os.Exit(releasecheck.Main(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	os.Exit(app.Main(os.Args[1:], os.Getenv, os.Environ(), os.Stderr))
}
