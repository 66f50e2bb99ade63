// Package cli holds the cobra commands of the tatara binary.
package cli

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"tatara.dev/cli/internal/version"
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
	root.AddCommand(newMCPCommand(stderr), newToolsCommand(), newVersionCommand())
	return root
}

// newLogger logs JSON to w: stdout belongs to the MCP protocol on the stdio transport.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "tatara %s (revision %s)\n", version.Version, version.Revision())
			return err
		},
	}
}
