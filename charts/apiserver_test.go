package charts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"tatara.dev/testkit/envtestassets"

	"tatara.dev/testkit/testutil"
)

// A real kube-apiserver + etcd (envtest, the binaries the operator's integration tests use), with
// the charts' CRDs and the prometheus-operator CRDs installed (testutil.MonitoringCRDsDir: those
// the charts' monitoring objects need and those of the e2e monitoring chart, which helmfile's kind
// environment installs). Started once, on first use.
var (
	envOnce  sync.Once
	testEnv  *envtest.Environment
	k8s      client.Client
	envErr   error
	warnings = &warningRecorder{}
)

// warningRecorder keeps the API server's warnings (PodSecurity "warn" mode reports violations
// of workload templates this way).
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

func TestMain(m *testing.M) {
	root, err := testutil.FindWorkspaceDir()
	if err == nil {
		err = buildDependencies(root)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if testEnv != nil {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "failed to stop envtest:", err)
		}
	}
	testutil.RemoveBinaries()
	os.Exit(code)
}

// apiServer returns a client of the shared API server, failing (never skipping) when the
// kube-apiserver/etcd binaries are missing.
func apiServer(t *testing.T) client.Client {
	t.Helper()
	envOnce.Do(func() {
		var assets string
		if assets, envErr = envtestassets.Dir(); envErr != nil {
			return
		}
		root := testutil.WorkspaceDir(t)
		testEnv = &envtest.Environment{
			BinaryAssetsDirectory: assets,
			CRDDirectoryPaths: []string{
				filepath.Join(root, "charts", "tatara-operator", "files", "crds"),
				testutil.MonitoringCRDsDir(t),
			},
			ErrorIfCRDPathMissing: true,
		}
		var cfg *rest.Config
		cfg, envErr = testEnv.Start()
		if envErr != nil {
			return
		}
		cfg.WarningHandler = warnings
		k8s, envErr = client.New(cfg, client.Options{})
		if envErr != nil {
			return
		}
		ctx := context.Background()
		// The namespaces helmfile installs into, enforcing the restricted Pod Security Standard.
		for _, ns := range []string{"tatara-system", "tatara-agents", "monitoring"} {
			n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
				"pod-security.kubernetes.io/enforce": "restricted",
				"pod-security.kubernetes.io/warn":    "restricted",
			}}}
			if err := k8s.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
				envErr = fmt.Errorf("failed to create namespace %q: %w", ns, err)
				return
			}
		}
	})
	if envErr != nil {
		t.Fatalf("failed to start the test API server: %v", envErr)
	}
	return k8s
}

// dryRunApply server-side applies an object with dryRun=All: full validation (schemas, CRD
// OpenAPI, admission including PodSecurity) without persisting anything.
func dryRunApply(ctx context.Context, c client.Client, o *unstructured.Unstructured) ([]string, error) {
	warnings.take()
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
		client.DryRunAll, client.FieldOwner("tatara-chart-tests"), client.ForceOwnership)
	return warnings.take(), err
}

// podFromTemplate is the Pod a workload would create, so PodSecurity "enforce" judges it.
func podFromTemplate(t *testing.T, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	tmpl := nested(t, o, "spec", "template").(map[string]any)
	pod := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name":      o.GetName() + "-template",
			"namespace": o.GetNamespace(),
			"labels":    tmpl["metadata"].(map[string]any)["labels"],
		},
		"spec": tmpl["spec"],
	}}
	return pod
}

// assertAccepted dry-runs every object of a render (and the Pod of each workload template).
func assertAccepted(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	c := apiServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, o := range objs {
		toApply := []*unstructured.Unstructured{o}
		if o.GetKind() == "Deployment" {
			toApply = append(toApply, podFromTemplate(t, o))
		}
		for _, a := range toApply {
			warns, err := dryRunApply(ctx, c, a)
			if err != nil {
				t.Errorf("API server rejected %s: %v", describe(a), err)
				continue
			}
			for _, w := range warns {
				t.Errorf("API server warned about %s: %s", describe(a), w)
			}
		}
	}
}

func TestRenderedManifestsAreAcceptedByTheAPIServer(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, tc.chart, tc.vals)
			// The hooks too: the release check's pod must pass the restricted Pod Security Standard.
			assertAccepted(t, append(r.objects, r.hooks...))
		})
	}
}

// TestAPIServerRejectsWhatTheChartsAvoid shows the dry run has teeth: the operator's pod without
// its restricted securityContext, and a Project with a typo, are refused.
func TestAPIServerRejectsWhatTheChartsAvoid(t *testing.T) {
	c := apiServer(t)
	ctx := context.Background()
	r := mustRender(t, "tatara-operator", nil)
	dep := r.find("Deployment", "tatara-operator")
	pod := podFromTemplate(t, dep)
	unstructured.RemoveNestedField(pod.Object, "spec", "securityContext")
	containers := pod.Object["spec"].(map[string]any)["containers"].([]any)
	delete(containers[0].(map[string]any), "securityContext")
	if _, err := dryRunApply(ctx, c, pod); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("a pod without securityContext was not refused by PodSecurity: %v", err)
	}

	p := mustRender(t, "tatara-project", fullProjectValues()).find("Project", "")
	if err := unstructured.SetNestedField(p.Object, "x", "spec", "agent", "binaryPath"); err != nil {
		t.Fatal(err)
	}
	if _, err := dryRunApply(ctx, c, p); err == nil || !apierrors.IsInvalid(err) {
		t.Errorf("a Project with binaryPath %q was not refused by the CRD schema: %v", "x", err)
	}
}

func TestCRDsAreServed(t *testing.T) {
	c := apiServer(t)
	for _, kind := range []string{"ProjectList", "TaskList"} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("tatara.dev/v1alpha1")
		l.SetKind(kind)
		if err := c.List(context.Background(), l); err != nil {
			t.Errorf("failed to list %s from the installed CRDs: %v", kind, err)
		}
	}
}
