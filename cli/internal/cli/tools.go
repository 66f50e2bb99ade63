package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/internal/mcpserver"
)

// ToolInfo is one row of `tatara tools`.
type ToolInfo struct {
	Name        string        `json:"name"`
	Group       catalog.Group `json:"group"`
	ReadOnly    bool          `json:"readOnly"`
	Destructive bool          `json:"destructive"`
	Idempotent  bool          `json:"idempotent"`
	OpenWorld   bool          `json:"openWorld"`
	SchemaBytes int           `json:"schemaBytes"`
}

// ProfileInfo is what `tatara tools --json` prints.
type ProfileInfo struct {
	Profile         string     `json:"profile"`
	ResolvedProfile string     `json:"resolvedProfile"`
	Count           int        `json:"count"`
	SchemaBytes     int        `json:"schemaBytes"`
	Tools           []ToolInfo `json:"tools"`
}

func newToolsCommand() *cobra.Command {
	var profile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List the tools a profile registers, with annotations and schema size",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := DescribeProfile(profile, newLogger(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			return printTools(cmd.OutOrStdout(), info)
		},
	}
	cmd.Flags().StringVar(&profile, "profile", os.Getenv(EnvToolProfile), "tool profile (default "+EnvToolProfile+"; empty = every tool)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// DescribeProfile lists what a profile registers, exactly as `tatara mcp` would.
func DescribeProfile(profile string, log *slog.Logger) (ProfileInfo, error) {
	tools, label := mcpserver.Select(profile, log)
	info := ProfileInfo{Profile: profile, ResolvedProfile: label, Count: len(tools)}
	for _, t := range tools {
		b, err := json.Marshal(mcpserver.ToMCPTool(t))
		if err != nil {
			return ProfileInfo{}, fmt.Errorf("failed to encode tool %q: %w", t.Name, err)
		}
		info.SchemaBytes += len(b)
		info.Tools = append(info.Tools, ToolInfo{Name: t.Name, Group: t.Group, ReadOnly: t.Hints.ReadOnly,
			Destructive: t.Hints.Destructive, Idempotent: t.Hints.Idempotent, OpenWorld: t.Hints.OpenWorld, SchemaBytes: len(b)})
	}
	return info, nil
}

func printTools(w io.Writer, info ProfileInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NAME\tGROUP\tREAD-ONLY\tDESTRUCTIVE\tIDEMPOTENT\tOPEN-WORLD\tSCHEMA-BYTES")
	for _, t := range info.Tools {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%t\t%t\t%t\t%t\t%d\n", t.Name, t.Group, t.ReadOnly, t.Destructive, t.Idempotent, t.OpenWorld, t.SchemaBytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nprofile %q (resolved %s): %d tools, %d schema bytes\n", info.Profile, info.ResolvedProfile, info.Count, info.SchemaBytes)
	return err
}
