// Package integration runs the operator against a real kube-apiserver and etcd (envtest):
// reconcile, restart idempotence, the REST API over real HTTP with real token Secrets, and
// the Task -> pod latency benchmark.
package integration

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"tatara.dev/cli/pkg/agentpod"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/controller"
	"tatara.dev/operator/internal/manager"
	"tatara.dev/operator/internal/testenv"
	"tatara.dev/testkit/testutil"
)

const (
	runtimeNS    = "tatara-system"
	cliImage     = "tatara-cli:it"
	wrapperImage = "tatara-wrapper:it"
)

var (
	cfg *rest.Config
	k8s client.Client
	// testEnv is the API server's environment, for benches that add users of their own.
	testEnv *envtest.Environment
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	env, c, err := testenv.Start()
	if err != nil {
		// Fail, never skip: integration tests that cannot run must not look green.
		fmt.Fprintf(os.Stderr, "FAIL: integration tests need a real kube-apiserver and etcd: %v\n", err)
		os.Exit(1)
	}
	cfg, testEnv = c, env
	code := 1
	func() {
		defer func() {
			if err := env.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "failed to stop envtest: %v\n", err)
			}
		}()
		if err := setup(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			return
		}
		code = m.Run()
	}()
	testutil.RemoveBinaries()
	os.Exit(code)
}

func setup() error {
	scheme, err := manager.Scheme()
	if err != nil {
		return err
	}
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("failed to create client: %w", err)
	}
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: runtimeNS}}); err != nil {
		return fmt.Errorf("failed to create namespace %q: %w", runtimeNS, err)
	}
	return createRuntimeConfigMaps(ctx, runtimeNS)
}

// runtimeFeatures are what the current cli and wrapper charts write under agentpod.FeaturesKey.
var runtimeFeatures = map[string]string{
	controller.CLIRuntimeConfigMap:     agentpod.FeatureClaimRef + "," + agentpod.FeatureModelGateway,
	controller.WrapperRuntimeConfigMap: agentpod.FeatureWorkspaceInit + "," + agentpod.FeatureClaimRef,
}

func createRuntimeConfigMaps(ctx context.Context, ns string) error {
	for name, img := range map[string]string{controller.CLIRuntimeConfigMap: cliImage, controller.WrapperRuntimeConfigMap: wrapperImage} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"image": img, agentpod.FeaturesKey: runtimeFeatures[name]}}
		if err := k8s.Create(ctx, cm); err != nil {
			return fmt.Errorf("failed to create configmap %s/%s: %w", ns, name, err)
		}
	}
	return nil
}

// operator is one running operator process-equivalent: its own manager, registry and REST port.
type operator struct {
	*manager.Operator
	reg  *prometheus.Registry
	url  string
	stop func()
}

type opOption func(*manager.Options)

func withRuntimeNamespace(ns string) opOption {
	return func(o *manager.Options) { o.Controller.RuntimeNamespace = ns }
}

// startOperator starts an operator on the test API server and stops it when the test ends (or
// when stop is called).
func startOperator(t testing.TB, opts ...opOption) *operator {
	t.Helper()
	return startOperatorOn(t, cfg, opts...)
}

// startOperatorOn is startOperator with a REST config of the caller's (e.g. one that counts the
// operator's requests).
func startOperatorOn(t testing.TB, restCfg *rest.Config, opts ...opOption) *operator {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	o := manager.Options{
		MetricsAddr: "0", ProbeAddr: "0", APIListener: ln,
		Controller: controller.Config{
			RuntimeNamespace: runtimeNS,
			OperatorURL:      "http://tatara-operator.tatara-system.svc:8082",
			MemoryURL:        "http://memory.test:8080", ChatURL: "http://chat.test:8080",
		},
		Registerer: reg, SkipNameValidation: true, MaxConcurrentReconciles: 4,
		Log: slog.New(slog.NewJSONHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, f := range opts {
		f(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op, err := manager.New(ctx, restCfg, o)
	if err != nil {
		cancel()
		t.Fatalf("failed to create operator: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- op.Start(ctx) }()
	if !op.GetCache().WaitForCacheSync(ctx) {
		cancel()
		t.Fatal("operator cache did not sync")
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("operator stopped with error: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("operator did not stop within 30s")
		}
	}
	t.Cleanup(stop)
	return &operator{Operator: op, reg: reg, url: "http://" + ln.Addr().String(), stop: stop}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// newNamespace creates a namespace enforcing the restricted Pod Security Standard, so the
// API server itself rejects an agent pod that is not restricted.
func newNamespace(t testing.TB) string {
	t.Helper()
	name := "it-" + rand.String(6)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("failed to create namespace: %v", err)
	}
	// envtest has no garbage collector or namespace controller: delete this test's Tasks so
	// the next test's operator does not find work left over from this one.
	t.Cleanup(func() {
		if err := k8s.DeleteAllOf(context.Background(), &tatarav1.Task{}, client.InNamespace(name)); err != nil {
			t.Errorf("failed to delete tasks of namespace %s: %v", name, err)
		}
	})
	return name
}

func newProject(t testing.TB, ns, name string, mutate ...func(*tatarav1.Project)) *tatarav1.Project {
	t.Helper()
	p := &tatarav1.Project{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: tatarav1.ProjectSpec{Repos: []tatarav1.ProjectRepo{
			{Name: "operator", URL: "https://git.example.test/tatara/operator.git"},
			{Name: "cli", URL: "https://git.example.test/tatara/cli.git"},
		}},
	}
	for _, f := range mutate {
		f(p)
	}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatalf("failed to create project: %v", err)
	}
	return p
}

func newTask(t testing.TB, ns, name, project string, kind tatarav1.TaskKind) *tatarav1.Task {
	t.Helper()
	task := &tatarav1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: tatarav1.TaskSpec{
			Kind: kind, ProjectRef: tatarav1.ProjectReference{Name: project},
			Repo: "operator", Directive: "do the " + string(kind) + " work",
		},
	}
	if err := k8s.Create(context.Background(), task); err != nil {
		t.Fatalf("failed to create task: %v", err)
	}
	return task
}

// eventually polls cond until it returns nil or the timeout passes, then fails with its last error.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, last)
	}
}
