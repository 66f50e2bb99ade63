// Package cli holds the cobra commands of the tatara binary.
package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/cli/pkg/redact"
)

// Execute runs the tatara command line and returns the process exit code.
func Execute(args []string, stdout, stderr io.Writer) int {
	root := NewRootCommand(stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		_, _ = fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	return 0
}

// NewRootCommand builds the command tree; stdout and stderr are injected for tests.
func NewRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "tatara",
		Short:         "Tatara: tools for AI coding agents on Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newMCPCommand(stderr), newGitGatewayCommand(stderr), newModelGatewayCommand(stderr), newToolsCommand(), newVersionCommand(),
		newReleaseCheckCommand())
	return root
}

// newLogger logs JSON to w: stdout belongs to the MCP protocol on the stdio transport. Every
// string attribute passes through the redactor, because report descriptions and backend error
// bodies are agent- or server-supplied text that may carry a credential, the Task token included:
// TATARA_TOKEN's, or in a pool pod the claimed one, passed as secrets.
func newLogger(w io.Writer, secrets ...string) *slog.Logger {
	red := redact.New(append([]string{os.Getenv(EnvToken)}, secrets...)...)
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: red.ReplaceAttr}))
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "tatara %s (revision %s)\n", buildinfo.Version, buildinfo.Revision())
			return err
		},
	}
}
