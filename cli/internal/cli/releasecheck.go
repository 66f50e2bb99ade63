package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/cli/pkg/releasecheck"
)

// ToolCounts is what every profile of this catalog registers: the golden file
// charts/tatara-cli/tool-counts.json, which the tatara-cli chart gives its release check
// (`tatara release-check --tool-counts`), written by `make update-golden`.
type ToolCounts struct {
	// GeneratedBy says where the file comes from.
	GeneratedBy string `json:"generatedBy"`
	// Profiles maps each known profile to its tool count.
	Profiles map[string]int `json:"profiles"`
	// FailOpen is what an empty or unknown profile registers: the whole catalog.
	FailOpen int `json:"failOpen"`
}

// toolCountsGeneratedBy is the GeneratedBy of the golden file.
const toolCountsGeneratedBy = "the cli catalog, by `make update-golden` (cli/internal/cli TestChartToolCountsUpToDate); do not edit"

// CatalogToolCounts returns the tool counts of this build's catalog.
func CatalogToolCounts() ToolCounts {
	tc := ToolCounts{GeneratedBy: toolCountsGeneratedBy, Profiles: map[string]int{}, FailOpen: len(catalog.All())}
	for _, p := range catalog.ProfileNames() {
		tools, _ := catalog.ProfileTools(p)
		tc.Profiles[p] = len(tools)
	}
	return tc
}

// MarshalToolCounts renders tool counts as the golden file holds them (indented, sorted keys,
// trailing newline).
func MarshalToolCounts(tc ToolCounts) ([]byte, error) {
	b, err := json.MarshalIndent(tc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("failed to encode tool counts: %w", err)
	}
	return append(b, '\n'), nil
}

// releaseCheckOptions are the flags of `tatara release-check`; the tatara-cli chart's test pod
// passes them from the release (its image, appVersion and the golden tool counts) and mounts the
// runtime ConfigMap at runtimeConfigDir.
type releaseCheckOptions struct {
	chart            string
	runtimeConfigMap string
	runtimeConfigDir string
	image            string
	appVersion       string
	toolCounts       string
}

func newReleaseCheckCommand() *cobra.Command {
	o := releaseCheckOptions{}
	cmd := &cobra.Command{
		Use:   "release-check",
		Short: "Check a deployed tatara-cli release (the chart's helm test)",
		Long: `Check a deployed tatara-cli release; the tatara-cli chart's Helm test pod runs it.

Prints one line per check, "PASS  <what>" or "FAIL  <what>: <cause>", then
"release-check <chart>: N checks, N passed", and exits 1 if any check failed. Checks: the runtime
ConfigMap (mounted at --runtime-config-dir) names --image; this image's version is the chart's
--app-version; every profile of --tool-counts (the chart's golden file) registers its count here;
this image knows no profile the chart lacks. It needs no cluster access.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if code := runReleaseCheck(cmd.OutOrStdout(), o); code != 0 {
				return errors.New("release check failed: see the FAIL lines above")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.chart, "chart", "tatara-cli", "chart name, for the summary line")
	f.StringVar(&o.runtimeConfigMap, "runtime-configmap", "tatara-cli-runtime", "name of the runtime ConfigMap, for messages")
	f.StringVar(&o.runtimeConfigDir, "runtime-config-dir", "", "directory where the runtime ConfigMap is mounted (file image)")
	f.StringVar(&o.image, "image", "", "the release's image (repository:tag), which the runtime ConfigMap must name")
	f.StringVar(&o.appVersion, "app-version", "", "the chart's appVersion, which this image's version must be")
	f.StringVar(&o.toolCounts, "tool-counts", "", "the chart's expected tool counts (JSON of charts/tatara-cli/tool-counts.json)")
	return cmd
}

// runReleaseCheck runs every check, writes the report to w and returns the exit code.
func runReleaseCheck(w io.Writer, o releaseCheckOptions) int {
	r := releasecheck.New(w, o.chart)
	r.Check(fmt.Sprintf("the runtime ConfigMap %s names the release's image %s", o.runtimeConfigMap, o.image),
		releasecheck.RuntimeImage(o.runtimeConfigMap, o.runtimeConfigDir, o.image))
	r.Check(fmt.Sprintf("the image is the chart's build (appVersion %s)", o.appVersion),
		releasecheck.Version("tatara", buildinfo.Version, o.appVersion))

	var want ToolCounts
	dec := json.NewDecoder(strings.NewReader(o.toolCounts))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&want); err != nil || len(want.Profiles) == 0 {
		if err == nil {
			err = errors.New("it lists no profile")
		}
		r.Check("the chart's expected tool counts (--tool-counts) are readable", err)
		return r.Done()
	}
	quiet := slog.New(slog.DiscardHandler)
	known := catalog.ProfileNames()
	for _, p := range sortedKeys(want.Profiles) {
		r.Check(fmt.Sprintf("profile %s registers %d tools", p, want.Profiles[p]), checkProfile(p, want.Profiles[p], known, quiet))
	}
	r.Check(fmt.Sprintf("an empty or unknown profile fails open to all %d tools", want.FailOpen), checkProfile("", want.FailOpen, known, quiet))
	var extra []string
	for _, p := range known {
		if _, ok := want.Profiles[p]; !ok {
			extra = append(extra, p)
		}
	}
	var err error
	if len(extra) > 0 {
		err = fmt.Errorf("the image has profile(s) %s that the chart's tool-counts.json lacks: the chart is older than the image", strings.Join(extra, ", "))
	}
	r.Check("the image knows no profile the chart lacks", err)
	return r.Done()
}

// checkProfile compares what profile registers in this image with want; "" is the fail-open case.
func checkProfile(profile string, want int, known []string, log *slog.Logger) error {
	if profile != "" && !slices.Contains(known, profile) {
		return fmt.Errorf("the image does not know profile %q (its profiles: %s), so it would fail open to every tool: the image is older than the chart",
			profile, strings.Join(known, ", "))
	}
	info, err := DescribeProfile(profile, log)
	if err != nil {
		return err
	}
	if info.Count != want {
		return fmt.Errorf("the image registers %d tools, the chart expects %d: the image's catalog is not the chart's", info.Count, want)
	}
	return nil
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
