// Package agentcli runs the real agent CLI (Claude Code, the pinned native build) outside a
// cluster, under the real wrapper binary, against the model stand-in on loopback: the properties
// of how the wrapper starts the CLI that need no pod. `make test` sets TATARA_CLAUDE_CODE to the
// CLI's path (hack/claude-code.sh); without it the tests skip and say so.
package agentcli
