package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/testkit/golden"
)

// chartToolCounts is the golden file the tatara-cli chart renders into its test pod.
const chartToolCounts = "../../../charts/tatara-cli/tool-counts.json"

// TestChartToolCountsUpToDate: the chart's expected tool counts are this catalog's (make
// update-golden rewrites the file after a reviewed catalog change).
func TestChartToolCountsUpToDate(t *testing.T) {
	got, err := MarshalToolCounts(CatalogToolCounts())
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, chartToolCounts, got)
}

func TestCatalogToolCountsAreTheProfiles(t *testing.T) {
	tc := CatalogToolCounts()
	if len(tc.Profiles) != len(catalog.ProfileNames()) || len(tc.Profiles) == 0 {
		t.Fatalf("tool counts list %d profiles, the catalog has %v", len(tc.Profiles), catalog.ProfileNames())
	}
	for _, p := range catalog.ProfileNames() {
		info, err := DescribeProfile(p, newLogger(&bytes.Buffer{}))
		if err != nil {
			t.Fatal(err)
		}
		if tc.Profiles[p] != info.Count || info.Count == 0 {
			t.Errorf("profile %s: tool counts say %d, tatara tools registers %d", p, tc.Profiles[p], info.Count)
		}
	}
	if tc.FailOpen != len(catalog.All()) {
		t.Errorf("failOpen %d, the catalog has %d tools", tc.FailOpen, len(catalog.All()))
	}
}

func TestReleaseCheck(t *testing.T) {
	old := buildinfo.Version
	buildinfo.Version = "0.1.0"
	t.Cleanup(func() { buildinfo.Version = old })

	const image = "tatara.local/tatara-cli:0.1.0"
	cmDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(cmDir, "image"), []byte(image), 0o644); err != nil {
		t.Fatal(err)
	}
	counts := func(mutate func(*ToolCounts)) string {
		tc := CatalogToolCounts()
		if mutate != nil {
			mutate(&tc)
		}
		b, err := json.Marshal(tc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	base := releaseCheckOptions{chart: "tatara-cli", runtimeConfigMap: "tatara-cli-runtime", runtimeConfigDir: cmDir,
		image: image, appVersion: "0.1.0", toolCounts: counts(nil)}
	nChecks := len(catalog.ProfileNames()) + 4

	tests := []struct {
		name     string
		mutate   func(*releaseCheckOptions)
		wantCode int
		wantFail string // a FAIL line must contain it; "" means every check passes
	}{
		{name: "the release as deployed", wantCode: 0},
		{
			name:     "chart bumped, image not rebuilt",
			mutate:   func(o *releaseCheckOptions) { o.appVersion = "0.2.0" },
			wantCode: 1,
			wantFail: "FAIL  the image is the chart's build (appVersion 0.2.0): the image runs tatara 0.1.0, but the chart's appVersion is 0.2.0: the pinned image tag is not this chart's build",
		},
		{
			name:     "the ConfigMap names another image",
			mutate:   func(o *releaseCheckOptions) { o.image = "tatara.local/tatara-cli:0.2.0" },
			wantCode: 1,
			wantFail: `FAIL  the runtime ConfigMap tatara-cli-runtime names the release's image tatara.local/tatara-cli:0.2.0: it names "tatara.local/tatara-cli:0.1.0"`,
		},
		{
			name:     "the ConfigMap is missing",
			mutate:   func(o *releaseCheckOptions) { o.runtimeConfigDir = t.TempDir() },
			wantCode: 1,
			wantFail: "ConfigMap tatara-cli-runtime or its key image does not exist",
		},
		{
			name: "a profile's count differs",
			mutate: func(o *releaseCheckOptions) {
				o.toolCounts = counts(func(tc *ToolCounts) { tc.Profiles[catalog.ProfileReview]++ })
			},
			wantCode: 1,
			wantFail: "FAIL  profile review registers",
		},
		{
			name: "the chart has a profile the image lacks",
			mutate: func(o *releaseCheckOptions) {
				o.toolCounts = counts(func(tc *ToolCounts) { tc.Profiles["deploy"] = 10 })
			},
			wantCode: 1,
			wantFail: `FAIL  profile deploy registers 10 tools: the image does not know profile "deploy"`,
		},
		{
			name: "the image has a profile the chart lacks",
			mutate: func(o *releaseCheckOptions) {
				o.toolCounts = counts(func(tc *ToolCounts) { delete(tc.Profiles, catalog.ProfileIncident) })
			},
			wantCode: 1,
			wantFail: "FAIL  the image knows no profile the chart lacks: the image has profile(s) incident",
		},
		{
			name:     "unreadable tool counts",
			mutate:   func(o *releaseCheckOptions) { o.toolCounts = "{" },
			wantCode: 1,
			wantFail: "FAIL  the chart's expected tool counts (--tool-counts) are readable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base
			if tt.mutate != nil {
				tt.mutate(&o)
			}
			var out bytes.Buffer
			code := runReleaseCheck(&out, o)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\n%s", code, tt.wantCode, out.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			summary := lines[len(lines)-1]
			if !strings.HasPrefix(summary, "release-check tatara-cli: ") {
				t.Errorf("last line %q is not the summary", summary)
			}
			if tt.wantFail == "" {
				want := "release-check tatara-cli: " + strconv.Itoa(nChecks) + " checks, " + strconv.Itoa(nChecks) + " passed"
				if summary != want || strings.Contains(out.String(), "FAIL") {
					t.Errorf("summary %q, want %q\n%s", summary, want, out.String())
				}
				return
			}
			if !strings.Contains(out.String(), tt.wantFail) {
				t.Errorf("no FAIL line containing %q:\n%s", tt.wantFail, out.String())
			}
			if !strings.Contains(summary, "FAILED") {
				t.Errorf("summary %q does not say FAILED", summary)
			}
		})
	}
}

// TestReleaseCheckCommandIsHidden: the subcommand exists for the chart's test pod, not for users
// browsing `tatara --help`, and fails with a non-zero exit code.
func TestReleaseCheckCommandIsHidden(t *testing.T) {
	var out, errOut bytes.Buffer
	root := NewRootCommand(&out, &errOut)
	cmd, _, err := root.Find([]string{"release-check"})
	if err != nil || cmd.Name() != "release-check" {
		t.Fatalf("release-check not found: %v", err)
	}
	if !cmd.Hidden {
		t.Error("release-check is listed in tatara --help")
	}
	code := Execute([]string{"release-check", "--runtime-config-dir", t.TempDir(), "--image", "x:1", "--app-version", "1", "--tool-counts", "{}"}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "FAIL") {
		t.Errorf("exit code %d with output %q, want 1 and FAIL lines", code, out.String())
	}
}
