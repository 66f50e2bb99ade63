// Command tatara is the Tatara cli; `tatara mcp` serves the agent tool surface.
package main

import (
	"os"

	"tatara.dev/cli/internal/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
