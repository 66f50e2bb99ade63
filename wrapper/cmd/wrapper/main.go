// Command wrapper is the agent pod's main process: it runs the agent CLI for the Task's directive,
// tails its transcript into logs and metrics, and exits with the agent's exit code.
package main

import (
	"os"

	"tatara.dev/wrapper/internal/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Getenv, os.Environ(), os.Stderr))
}
