// Command agent-standin stands in for the agent CLI in tests: same flags, same transcript, real
// MCP calls, driven by a script given as its prompt. The script format is documented in
// tatara.dev/testkit/agentstandin.
package main

import (
	"os"

	"tatara.dev/testkit/agentstandin"
)

func main() {
	os.Exit(agentstandin.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
