//go:build e2e

package suite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"tatara.dev/cli/pkg/releasecheck"
)

// releaseCheckCharts are the charts whose release check `helmfile test` must run: all four.
var releaseCheckCharts = []string{"tatara-cli", "tatara-operator", "tatara-project", "tatara-wrapper"}

// helmfileIn runs the pinned helmfile on the helmfile at file, environment kind, with the pinned
// helm.
func helmfileIn(ctx context.Context, cfg *envconf.Config, file string, args ...string) (string, error) {
	helm, err := tool("helm")
	if err != nil {
		return "", err
	}
	helmfile, err := tool("helmfile")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, helmfile, append([]string{"--file", file, "--environment", "kind", "--helm-binary", helm}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg.KubeconfigFile())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// helmfileTest is the pipeline's post-deploy step, right after sync: `helmfile test --logs` must
// pass, and its log must hold the summary of every chart's release check, each all passed.
func helmfileTest(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	return ctx, helmfileTestOf(ctx, cfg, filepath.Join(repoRoot, "helmfile", "helmfile.yaml"))
}

// helmfileTestOf is helmfileTest on the helmfile at file.
func helmfileTestOf(ctx context.Context, cfg *envconf.Config, file string) error {
	out, err := helmfileIn(ctx, cfg, file, "test", "--logs")
	if err != nil {
		return fmt.Errorf("helmfile test failed: %w\n%s", err, out)
	}
	if err := checkSummaries(out); err != nil {
		return fmt.Errorf("helmfile test passed, but %w\n%s", err, out)
	}
	for _, s := range releasecheck.Summaries(out) {
		logf("  release-check %s: %d checks, %d passed", s.Chart, s.Checks, s.Passed)
	}
	return nil
}

// checkSummaries: exactly one summary per chart, each with every check passed.
func checkSummaries(out string) error {
	var charts []string
	for _, s := range releasecheck.Summaries(out) {
		if !s.OK() {
			return fmt.Errorf("release check of %s: %d checks, %d passed", s.Chart, s.Checks, s.Passed)
		}
		charts = append(charts, s.Chart)
	}
	slices.Sort(charts)
	if !slices.Equal(charts, releaseCheckCharts) {
		return fmt.Errorf("its log has the release-check summaries of %v, want one each of %v", charts, releaseCheckCharts)
	}
	return nil
}

// bumpedChart copies charts/tatara-cli into dir with version and appVersion set to v.
func bumpedChart(t *testing.T, dir, v string) string {
	t.Helper()
	dst := filepath.Join(dir, "tatara-cli")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(repoRoot, "charts", "tatara-cli"))); err != nil {
		t.Fatalf("failed to copy the tatara-cli chart: %v", err)
	}
	path := filepath.Join(dst, "Chart.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	versions := regexp.MustCompile(`(?m)^(version|appVersion): .*$`)
	if n := len(versions.FindAllIndex(raw, -1)); n != 2 {
		t.Fatalf("Chart.yaml has %d version/appVersion lines, want 2", n)
	}
	bumped := versions.ReplaceAll(raw, []byte(`$1: "`+v+`"`))
	if err := os.WriteFile(path, bumped, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func helm(ctx context.Context, t *testing.T, cfg *envconf.Config, args ...string) (string, error) {
	t.Helper()
	bin, err := tool("helm")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg.KubeconfigFile())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestBrokenReleaseFailsItsCheck: a release MR that bumps the cli chart to a version whose image
// was never built, yet leaves image.tag at the old build, must not pass `helm test`: the release
// check fails and its log names the cause. (The e2e cluster holds the loaded build only, so the
// old tag is the one image that can run; a tag that does not exist never starts the pod at all.)
func TestBrokenReleaseFailsItsCheck(t *testing.T) {
	sharedFeature(t)
	const release, namespace = "tatara-cli-broken", "tatara-e2e-broken-release"
	f := features.New("a broken release").
		Assess("helm test fails and names the cause", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			built := helmfilePins(t)["tatara-cli"]
			bumped := "0.2.0"
			if built == bumped {
				bumped = "9.9.9"
			}
			chart := bumpedChart(t, t.TempDir(), bumped)
			out, err := helm(ctx, t, cfg, "install", release, chart, "--namespace", namespace, "--create-namespace",
				"--set", "image.tag="+built, "--wait", "--timeout", "2m")
			if err != nil {
				t.Fatalf("helm install of the bumped chart failed: %v\n%s", err, out)
			}
			t.Cleanup(func() {
				if out, err := helm(context.Background(), t, cfg, "uninstall", release, "--namespace", namespace, "--wait"); err != nil {
					t.Errorf("helm uninstall %s: %v\n%s", release, err, out)
				}
				// The test pod is a hook, which uninstall leaves behind; the namespace takes it along.
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
				if err := cfg.Client().Resources().Delete(context.Background(), ns); err != nil {
					logf("failed to delete namespace %s (left to the cluster's teardown): %v", namespace, err)
				}
			})
			out, err = helm(ctx, t, cfg, "test", release, "--namespace", namespace, "--logs", "--timeout", "2m")
			if err == nil {
				t.Fatalf("helm test passed for a chart at %s whose image is build %s:\n%s", bumped, built, out)
			}
			wantLine := fmt.Sprintf("FAIL  the image is the chart's build (appVersion %s): the image runs tatara %s, but the chart's appVersion is %s: the pinned image tag is not this chart's build",
				bumped, built, bumped)
			if !strings.Contains(out, wantLine) {
				t.Errorf("helm test failed, but its log lacks the cause %q:\n%s", wantLine, out)
			}
			sums := releasecheck.Summaries(out)
			if len(sums) != 1 || sums[0].Chart != "tatara-cli" || sums[0].OK() || sums[0].Checks-sums[0].Passed != 1 {
				t.Errorf("summaries %+v, want one of tatara-cli with exactly one failed check:\n%s", sums, out)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
