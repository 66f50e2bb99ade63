package releasecheck

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"tatara.dev/cli/pkg/releasecheck"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
)

func availableDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tatara-system", Name: "tatara-operator", Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			},
		},
	}
}

func TestRolledOut(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*appsv1.Deployment)
		wantErr string
	}{
		{name: "rolled out and Available"},
		{
			name: "unavailable names the False condition",
			mutate: func(d *appsv1.Deployment) {
				d.Status.AvailableReplicas = 0
				d.Status.Conditions[0] = appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse,
					Reason: "MinimumReplicasUnavailable", Message: "Deployment does not have minimum availability."}
			},
			wantErr: "condition Available=False (MinimumReplicasUnavailable: Deployment does not have minimum availability.); 1 of 1 replicas updated, 0 available",
		},
		{
			name:    "a new generation not yet observed",
			mutate:  func(d *appsv1.Deployment) { d.Generation = 3 },
			wantErr: "has not observed generation 3",
		},
		{
			name:    "an old replica still running",
			mutate:  func(d *appsv1.Deployment) { d.Status.Replicas = 2 },
			wantErr: "1 of 1 replicas updated, 1 available, 2 total",
		},
		{
			name:    "no Available condition",
			mutate:  func(d *appsv1.Deployment) { d.Status.Conditions = d.Status.Conditions[1:] },
			wantErr: "no condition Available=True",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := availableDeployment()
			if tt.mutate != nil {
				tt.mutate(d)
			}
			assertErr(t, rolledOut(d), tt.wantErr)
		})
	}
}

func assertErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

const buildInfo = `# HELP tatara_operator_build_info Always 1.
# TYPE tatara_operator_build_info gauge
tatara_operator_build_info{goversion="go1.26.8",revision="abc",version="%s"} 1
`

func TestBuildInfo(t *testing.T) {
	tests := []struct {
		name, body, wantErr string
	}{
		{name: "the chart's build", body: fmt.Sprintf(buildInfo, "0.1.0")},
		{name: "another build", body: fmt.Sprintf(buildInfo, "0.0.9"), wantErr: "has version 0.0.9, want 0.1.0"},
		{name: "no build info", body: "# TYPE up gauge\nup 1\n", wantErr: "has no tatara_operator_build_info"},
		{name: "not Prometheus text", body: "<html>hello</html>", wantErr: "not Prometheus text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertErr(t, BuildInfo(tt.body, "tatara_operator_build_info", "0.1.0"), tt.wantErr)
		})
	}
}

// operatorFixture serves /healthz and /metrics like the operator's Service does.
func operatorFixture(t *testing.T, healthzCode int, version string) (api, metrics string) {
	t.Helper()
	apiSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(healthzCode)
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(apiSrv.Close)
	metricsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = fmt.Fprintf(w, buildInfo, version)
	}))
	t.Cleanup(metricsSrv.Close)
	return apiSrv.URL, metricsSrv.URL
}

func kubeWith(t *testing.T, crds bool, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	kube := fake.NewClientset(objs...)
	if crds {
		kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
			GroupVersion: tatarav1.GroupVersion.String(),
			APIResources: []metav1.APIResource{{Name: "projects", Namespaced: true, Kind: "Project"}, {Name: "tasks", Namespaced: true, Kind: "Task"},
				{Name: "internalissues", Namespaced: true, Kind: "InternalIssue"}},
		}}
	}
	return kube
}

func TestOperatorCheck(t *testing.T) {
	tests := []struct {
		name        string
		deployment  *appsv1.Deployment
		crds        bool
		healthzCode int
		version     string // of the serving operator
		wantFail    []string
	}{
		{name: "a healthy release", deployment: availableDeployment(), crds: true, healthzCode: 200, version: "0.1.0"},
		{
			name: "nothing deployed", crds: false, healthzCode: 503, version: "0.0.9",
			wantFail: []string{
				"FAIL  deployment tatara-system/tatara-operator is rolled out and Available: deployment tatara-system/tatara-operator does not exist",
				"FAIL  the CRDs projects.tatara.dev, tasks.tatara.dev and internalissues.tatara.dev are established and served (tatara.dev/v1alpha1)",
				"FAIL  the cluster's CRDs are this operator's: the same versions, every field of every schema: CRD internalissues.tatara.dev does not exist; CRD projects.tatara.dev does not exist",
				"/healthz with 200 ok: status 503",
				"has version 0.0.9, want 0.1.0",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			if tt.deployment != nil {
				objs = append(objs, tt.deployment)
			}
			apiURL, metricsURL := operatorFixture(t, tt.healthzCode, tt.version)
			var out bytes.Buffer
			r := releasecheck.New(&out, "tatara-operator")
			built, err := BuiltCRDs()
			if err != nil {
				t.Fatal(err)
			}
			var clusterCRDs []runtime.Object
			if tt.crds {
				for i := range built {
					clusterCRDs = append(clusterCRDs, built[i].DeepCopy())
				}
			}
			OperatorCheck{
				Kube: kubeWith(t, tt.crds, objs...), CRDs: apiextensionsfake.NewClientset(clusterCRDs...), WantCRDs: built,
				Namespace: "tatara-system", Deployment: "tatara-operator",
				APIURL: apiURL, MetricsURL: metricsURL, HTTP: http.DefaultClient,
				AppVersion: "0.1.0", Version: "0.1.0", Timeout: 100 * time.Millisecond, Interval: 10 * time.Millisecond,
			}.Run(context.Background(), r)
			code := r.Done()
			if len(tt.wantFail) == 0 {
				if code != 0 || !strings.Contains(out.String(), "release-check tatara-operator: 6 checks, 6 passed\n") {
					t.Fatalf("exit code %d:\n%s", code, out.String())
				}
				return
			}
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			for _, f := range tt.wantFail {
				if !strings.Contains(out.String(), f) {
					t.Errorf("output lacks %q:\n%s", f, out.String())
				}
			}
		})
	}
}

func project(cond *metav1.Condition, generation int64) *unstructured.Unstructured {
	p := &tatarav1.Project{
		TypeMeta:   metav1.TypeMeta{APIVersion: tatarav1.GroupVersion.String(), Kind: "Project"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tatara-agents", Name: "kind", Generation: generation},
	}
	if cond != nil {
		p.Status.Conditions = []metav1.Condition{*cond}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func TestProjectReady(t *testing.T) {
	ready := &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: tatarav1.ReasonAgentPodsBuildable, ObservedGeneration: 1}
	tests := []struct {
		name    string
		u       *unstructured.Unstructured
		wantErr string
	}{
		{name: "Ready", u: project(ready, 1)},
		{
			name: "a missing Secret",
			u: project(&metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: tatarav1.ReasonRepoSecretMissing,
				Message: `secret "demo-git-read" (the credentials of repo "demo") not found`}, 1),
			wantErr: `its Ready condition is False, reason RepoSecretMissing: secret "demo-git-read" (the credentials of repo "demo") not found`,
		},
		{name: "no condition yet", u: project(nil, 1), wantErr: "no Ready condition yet"},
		{name: "stale condition", u: project(ready, 2), wantErr: "is for generation 1, the Project is at 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertErr(t, ProjectReady(tt.u), tt.wantErr) })
	}
}

func TestProjectCheck(t *testing.T) {
	scheme := runtime.NewScheme()
	gvr := tatarav1.GroupVersion.WithResource("projects")
	ready := &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: tatarav1.ReasonAgentPodsBuildable}
	kube := fake.NewClientset(
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "tatara-agents", Name: "kind-limits"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "tatara-agents", Name: "kind-agents"}},
	)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{gvr: "ProjectList"}, project(ready, 1))
	var out bytes.Buffer
	r := releasecheck.New(&out, "tatara-project")
	ProjectCheck{
		Kube: kube, Dynamic: dyn, Namespace: "tatara-agents", Project: "kind",
		LimitRange: "kind-limits", ResourceQuota: "kind-quota", NetworkPolicy: "kind-agents",
		AppVersion: "0.1.0", Version: "0.1.0", Timeout: 100 * time.Millisecond, Interval: 10 * time.Millisecond,
	}.Run(context.Background(), r)
	if code := r.Done(); code != 1 {
		t.Errorf("exit code %d, want 1 (the quota is missing)", code)
	}
	for _, want := range []string{
		"PASS  project tatara-agents/kind is Ready",
		"PASS  the agent namespace tatara-agents has the chart's LimitRange kind-limits",
		"FAIL  the agent namespace tatara-agents has the chart's ResourceQuota kind-quota: resourcequota tatara-agents/kind-quota does not exist",
		"PASS  the agent namespace tatara-agents has the chart's NetworkPolicy kind-agents",
		"release-check tatara-project: 5 checks, 4 passed, 1 FAILED",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestMainRejectsBadInvocations(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"unknown mode", []string{"cluster"}},
		{"operator without its flags", []string{"--namespace", "tatara-system"}},
		{"project without --project", []string{"project", "--namespace", "tatara-agents"}},
		{"unknown flag", []string{"project", "--no-such-flag"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := Main(context.Background(), tt.args, &out, &errOut); code != 2 {
				t.Errorf("exit code %d, want 2 (stderr %q)", code, errOut.String())
			}
			if errOut.Len() == 0 {
				t.Error("nothing on stderr says what is wrong")
			}
		})
	}
}

// TestHealthzOverTLSTrustsOnlyTheCA: with apiTLS, /healthz is verified against the mounted ca.crt;
// without that CA the same server is refused.
func TestHealthzOverTLSTrustsOnlyTheCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool, err := loadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	withCA := OperatorCheck{APIURL: srv.URL, HTTP: http.DefaultClient,
		APIHTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}
	if err := withCA.healthz(context.Background()); err != nil {
		t.Errorf("healthz with the CA: %v", err)
	}
	withoutCA := OperatorCheck{APIURL: srv.URL, HTTP: http.DefaultClient}
	if err := withoutCA.healthz(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("healthz without the CA: %v, want a certificate error", err)
	}

	garbage := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCA(garbage); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("loadCA of garbage: %v", err)
	}
	if _, err := loadCA(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "the apiTLS Secret's ca.crt") {
		t.Errorf("loadCA of a missing file: %v", err)
	}
}
