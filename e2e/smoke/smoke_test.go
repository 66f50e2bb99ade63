//go:build e2e

// Package smoke is `make kind-smoke`: it proves that a kind cluster works on this machine, end to
// end, and prints each step with its wall time. It creates a cluster (KIND_NODE_IMAGE, else kind's
// default node image) on a docker network of its own, loads a locally built FROM scratch image,
// runs it as a pod until Ready, resolves the kube API's Service name through CoreDNS from that pod,
// then deletes the cluster and its network and checks that nothing of either is left.
package smoke

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"
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
	runLog      = steps.New("kind-smoke")
	clusterName string
	smokeImage  string
	// leftovers is what the tear down found still there: the run fails with it.
	leftovers error
)

func TestMain(m *testing.M) {
	root, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "failed to find the repository root:", err)
		os.Exit(1)
	}
	name, opts, err := kindcluster.New(root, "tatara-smoke")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	clusterName = name
	smokeImage = "tatara.local/kind-smoke:" + clusterName
	testenv = env.NewWithConfig(envconf.New())
	testenv.Setup(
		runLog.Step("smoke image", buildSmokeImage, nil),
		runLog.Step("create cluster "+clusterName, envfuncs.CreateClusterWithOpts(kind.NewProvider(), clusterName, opts...), nil),
		runLog.Step("load image", envfuncs.LoadImageToCluster(clusterName, smokeImage), nil),
	)
	testenv.Finish(runLog.Step("delete cluster and network", tearDown, nil))
	code := testenv.Run(m)
	if leftovers != nil {
		runLog.Printf("FAIL: %v", leftovers)
		code = 1
	}
	result := "PASS"
	if code != 0 {
		result = "FAIL"
	}
	node := kindcluster.NodeImage()
	if node == "" {
		node = "kind's default"
	}
	runLog.Printf("%s in %s (node image: %s)\n%s", result, runLog.Since().Round(time.Second), node, runLog.Summary())
	os.Exit(code)
}

// buildSmokeImage builds cmd/kind-smoke statically into a FROM scratch image.
func buildSmokeImage(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	dir, err := os.MkdirTemp("", "kind-smoke-image")
	if err != nil {
		return ctx, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(dir, "kind-smoke"), "../cmd/kind-smoke")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return ctx, fmt.Errorf("go build ./cmd/kind-smoke: %w\n%s", err, out)
	}
	dockerfile := "FROM scratch\nCOPY kind-smoke /kind-smoke\nENTRYPOINT [\"/kind-smoke\"]\nCMD [\"serve\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return ctx, err
	}
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", smokeImage, dir).CombinedOutput(); err != nil {
		return ctx, fmt.Errorf("docker build of %s: %w\n%s", smokeImage, err, out)
	}
	return ctx, nil
}

// tearDown deletes the cluster, its network and the smoke image, and records in leftovers any
// container or network that is still there.
func tearDown(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	var err error
	if _, created := envfuncs.GetClusterFromContext(ctx, clusterName); created {
		ctx, err = envfuncs.DestroyCluster(clusterName)(ctx, cfg)
	}
	_ = kindcluster.RemoveNetwork(clusterName)
	_ = exec.Command("docker", "rmi", smokeImage).Run()
	out, perr := exec.Command("docker", "ps", "-a", "--filter", "name=^"+clusterName+"-", "--format", "{{.Names}}").Output()
	switch {
	case perr != nil:
		leftovers = errors.Join(leftovers, fmt.Errorf("docker ps: %w", perr))
	case strings.TrimSpace(string(out)) != "":
		leftovers = errors.Join(leftovers, fmt.Errorf("containers of %s remain after the delete: %s", clusterName, strings.Fields(string(out))))
	}
	if exec.Command("docker", "network", "inspect", clusterName).Run() == nil {
		leftovers = errors.Join(leftovers, fmt.Errorf("docker network %s remains", clusterName))
	}
	return ctx, err
}

// TestKindSmoke: a locally built image runs to Ready in the new cluster, and its pod resolves the
// kube API's Service name to the Service's address through CoreDNS.
func TestKindSmoke(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "smoke", Image: smokeImage, ImagePullPolicy: corev1.PullNever,
			Args:           []string{"serve", ":8080"},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
		}}},
	}
	f := features.New("kind smoke").
		Assess("a locally built image runs to Ready", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			start := time.Now()
			r := cfg.Client().Resources()
			// Admission needs the namespace's default ServiceAccount, which the controller-manager
			// creates shortly after the control plane is up.
			err := wait.For(func(ctx context.Context) (bool, error) {
				return r.Get(ctx, "default", "default", &corev1.ServiceAccount{}) == nil, nil
			}, wait.WithContext(ctx), wait.WithTimeout(time.Minute), wait.WithInterval(time.Second))
			if err != nil {
				t.Fatalf("the default ServiceAccount was not created: %v", err)
			}
			if err := r.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			if err := wait.For(conditions.New(r).PodReady(pod), wait.WithContext(ctx), wait.WithTimeout(2*time.Minute), wait.WithInterval(time.Second)); err != nil {
				_ = r.Get(ctx, pod.Name, pod.Namespace, pod)
				t.Fatalf("pod smoke did not become Ready: %v; status %+v", err, pod.Status)
			}
			runLog.Printf("  pod Ready in %s", time.Since(start).Round(time.Second))
			return ctx
		}).
		Assess("the pod resolves the kube API's Service through CoreDNS", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			start := time.Now()
			r := cfg.Client().Resources()
			coredns := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"}}
			if err := wait.For(conditions.New(r).DeploymentConditionMatch(coredns, appsv1.DeploymentAvailable, corev1.ConditionTrue),
				wait.WithContext(ctx), wait.WithTimeout(2*time.Minute), wait.WithInterval(time.Second)); err != nil {
				t.Fatalf("CoreDNS did not become Available: %v", err)
			}
			var svc corev1.Service
			if err := r.Get(ctx, "kubernetes", "default", &svc); err != nil {
				t.Fatal(err)
			}
			const name = "kubernetes.default.svc.cluster.local"
			var stdout, stderr bytes.Buffer
			if err := r.ExecInPod(ctx, pod.Namespace, pod.Name, "smoke", []string{"/kind-smoke", "lookup", name}, &stdout, &stderr); err != nil {
				t.Fatalf("the pod could not resolve %s: %v\n%s", name, err, stderr.String())
			}
			got := strings.Fields(stdout.String())
			if !slices.Contains(got, svc.Spec.ClusterIP) {
				t.Fatalf("%s resolved to %v, want the Service's %s", name, got, svc.Spec.ClusterIP)
			}
			runLog.Printf("  %s -> %v (Service IP %s) in %s", name, got, svc.Spec.ClusterIP, time.Since(start).Round(time.Second))
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
