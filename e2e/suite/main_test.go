//go:build e2e

// Package suite is the end-to-end suite: it creates a kind cluster, loads the locally built
// images, deploys every release with the production helmfile (environment kind) and proves the
// tool-surface contract on real pods. Run it with `make e2e`.
package suite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/support/kind"

	"tatara.dev/e2e/internal/kindcluster"
	"tatara.dev/e2e/internal/steps"
)

var (
	testenv     env.Environment
	clusterName string
	repoRoot    string
	logsDir     string
	// reusedCluster: E2E_KEEP_CLUSTER=1 found the cluster an earlier run kept. Setup then keeps
	// what is deployed and unchanged (the stand-ins at the same images, the releases when the
	// helmfile diff is empty) and redeploys the rest.
	reusedCluster bool
)

func TestMain(m *testing.M) {
	root, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "failed to find the repository root:", err)
		os.Exit(1)
	}
	repoRoot = root
	images := strings.Fields(os.Getenv("E2E_IMAGES"))
	if len(images) == 0 {
		fmt.Fprintln(os.Stderr, "E2E_IMAGES is empty: run the suite with `make e2e`, which builds the images and passes their references")
		os.Exit(1)
	}
	name, opts, err := kindcluster.New(repoRoot, "tatara-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	clusterName = name
	if kindcluster.Keep() {
		if reusedCluster, err = kindcluster.Exists(repoRoot, name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	logsDir = filepath.Join(repoRoot, "e2e-logs", clusterName)
	testenv = env.NewWithConfig(envconf.New())
	create := "create kind cluster " + clusterName
	if reusedCluster {
		create = "reuse kind cluster " + clusterName + " (" + kindcluster.KeepEnv + "=1)"
	}
	setup := []env.Func{phase(create, envfuncs.CreateClusterWithOpts(kind.NewProvider(), clusterName, opts...))}
	if reusedCluster {
		setup = append(setup, phase("read the kept cluster's git tokens", keptGitTokens),
			phase("read the kept cluster's model key", keptModelKey))
	}
	testenv.Setup(append(setup,
		phase("load images", loadImages(images)),
		phase("deploy the model stand-in", deployModelStandin(images)),
		phase("deploy the git server", deployGitServer(images)),
		phase("start the host outside the cluster", startOutsideHost(images)),
		phase("create the demo repo's Secrets", createRepoSecrets),
		phase("create the model key's Secret", createModelSecret),
		phase("helmfile sync (environment kind)", helmfileSync),
		// The pipeline's post-deploy step: every chart's release check (releasecheck_test.go).
		phase("helmfile test (environment kind)", helmfileTest),
		// A sync leaves nothing for the next pipeline run to change: the plugin-free diff is empty.
		phase("diff after sync (hack/helmfile-diff.sh kind): no change", diffAfterSync),
	)...)
	testenv.BeforeEachFeature(func(ctx context.Context, _ *envconf.Config, _ *testing.T, f features.Feature) (context.Context, error) {
		featureTimes.start(f.Name())
		return ctx, nil
	})
	testenv.AfterEachFeature(func(ctx context.Context, cfg *envconf.Config, t *testing.T, f features.Feature) (context.Context, error) {
		featureTimes.end(f.Name(), t.Failed())
		if t.Failed() {
			exportLogs(ctx, cfg, f.Name())
		}
		return ctx, nil
	})
	testenv.Finish(phase("tear down", tearDown))
	code := testenv.Run(m)
	logf("summary: phases")
	for _, line := range strings.Split(runLog.Summary(), "\n") {
		logf("%s", line)
	}
	featureTimes.print()
	printStartupSummary()
	result := "PASS"
	if code != 0 {
		result = "FAIL"
	}
	logf("e2e %s in %s", result, runLog.Since().Round(time.Second))
	os.Exit(code)
}

// runLog prints the suite's progress; logf is its Printf.
var runLog = steps.New("e2e")

func logf(format string, args ...any) { runLog.Printf(format, args...) }

// phase wraps a setup step so that the run prints what it does and how long it took; a failed
// step exports the cluster's logs.
func phase(name string, fn env.Func) env.Func {
	return runLog.Step(name, fn, func(ctx context.Context, cfg *envconf.Config) { exportLogs(ctx, cfg, "setup") })
}

// loadImages loads every image in one `kind load docker-image` (which takes several): one
// `docker save` and one import into the node's containerd, instead of one of each per image.
// kind skips an image the node already holds.
func loadImages(images []string) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		ctx, err := envfuncs.LoadImageToCluster(clusterName, strings.Join(images, " "))(ctx, cfg)
		if err != nil {
			return ctx, fmt.Errorf("failed to load images %v: %w", images, err)
		}
		logf("  loaded %d images: %s", len(images), strings.Join(images, " "))
		return ctx, nil
	}
}

// helmfileSync deploys with the same helmfile as production. `sync`, not `apply`: apply needs
// the helm-diff plugin, which an air-gapped machine cannot install; both install the same releases.
func helmfileSync(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	if reusedCluster {
		if _, err := diffAfterSync(ctx, cfg); err == nil {
			logf("  the kept cluster runs this helmfile already (the diff is empty): no sync")
			return ctx, nil
		}
		logf("  the kept cluster differs from this helmfile: sync")
	}
	helm, err := tool("helm")
	if err != nil {
		return ctx, err
	}
	helmfile, err := tool("helmfile")
	if err != nil {
		return ctx, err
	}
	cmd := exec.CommandContext(ctx, helmfile, "--file", filepath.Join(repoRoot, "helmfile", "helmfile.yaml"),
		"--environment", "kind", "--helm-binary", helm, "sync", "--wait")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg.KubeconfigFile())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return ctx, fmt.Errorf("helmfile sync failed: %w\n%s", err, out)
	}
	return ctx, nil
}

// diffAfterSync runs the pipeline's plugin-free diff against the synced cluster: exit 0 means the
// API server would change nothing (no random or time-dependent value, no field the server rewrites).
func diffAfterSync(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "hack", "helmfile-diff.sh"), "kind")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg.KubeconfigFile())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return ctx, fmt.Errorf("the diff after sync is not empty (%w):\n%s", err, out)
	}
	return ctx, nil
}

// tool returns the path of a pinned tool, installing it into the cache if needed.
func tool(name string) (string, error) {
	out, err := exec.Command(filepath.Join(repoRoot, "hack", "tools.sh"), name).Output()
	if err != nil {
		return "", fmt.Errorf("failed to install %s with hack/tools.sh: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func exportLogs(ctx context.Context, cfg *envconf.Config, what string) {
	dest := filepath.Join(logsDir, sanitize(what))
	if _, err := envfuncs.ExportClusterLogs(clusterName, dest)(ctx, cfg); err != nil {
		logf("failed to export cluster logs to %s: %v", dest, err)
		return
	}
	logf("cluster logs (pods, kubelet, containerd) exported to %s", dest)
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, s)
}

// tearDown ends the run: it deletes the kind cluster (kept with E2E_KEEP_CLUSTER=1), the host
// outside it and their docker networks. Each feature's own objects go in its Teardown step (deleting, helpers_test.go).
func tearDown(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	if os.Getenv("E2E_KEEP_CLUSTER") == "1" {
		logf("E2E_KEEP_CLUSTER=1: keeping cluster %s (KUBECONFIG=%s); delete it with: hack/kind.sh delete cluster --name %s && docker rm -f %s && docker network rm %s %s",
			clusterName, cfg.KubeconfigFile(), clusterName, outsideName(), clusterName, outsideName())
		return ctx, nil
	}
	var err error
	if _, created := envfuncs.GetClusterFromContext(ctx, clusterName); created {
		ctx, err = envfuncs.DestroyCluster(clusterName)(ctx, cfg)
	}
	removeOutsideHost()
	if nerr := kindcluster.RemoveNetwork(clusterName); nerr != nil {
		logf("%v", nerr)
	}
	return ctx, err
}
