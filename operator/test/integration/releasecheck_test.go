package integration

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/cli/pkg/releasecheck"
	rc "tatara.dev/operator/internal/releasecheck"
)

// TestReleaseCheckAgainstARealOperator runs both release checks against the real API server and a
// running operator: discovery of the CRDs, a Deployment's status, the REST server's /healthz, the
// operator's metrics registry as /metrics serves it, and a Project that the operator made Ready.
// What the charts' test pods run differs only in where the clients come from (in-cluster config,
// the Service's DNS name).
func TestReleaseCheckAgainstARealOperator(t *testing.T) {
	ctx := context.Background()
	op := startOperator(t)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	metricsSrv := httptest.NewServer(promhttp.HandlerFor(op.reg, promhttp.HandlerOpts{}))
	t.Cleanup(metricsSrv.Close)

	ns := newNamespace(t)
	labels := map[string]string{"app": "operator"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tatara-operator"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{Name: "operator", Image: "tatara-operator:it", SecurityContext: &corev1.SecurityContext{
						AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					}}},
				},
			},
		},
	}
	dep, err = kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := func(check interface {
		Run(context.Context, *releasecheck.Report)
	}) string {
		var out bytes.Buffer
		r := releasecheck.New(&out, "chart")
		check.Run(ctx, r)
		r.Done()
		return out.String()
	}
	crdClient, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	built, err := rc.BuiltCRDs()
	if err != nil {
		t.Fatal(err)
	}
	operatorCheck := rc.OperatorCheck{
		Kube: kube, CRDs: crdClient, WantCRDs: built, Namespace: ns, Deployment: "tatara-operator", APIURL: op.url, MetricsURL: metricsSrv.URL,
		HTTP: http.DefaultClient, AppVersion: buildinfo.Version, Version: buildinfo.Version, Timeout: 2 * time.Second, Interval: 100 * time.Millisecond,
	}

	// envtest runs no controller-manager: the Deployment has no status, so it is not rolled out.
	out := run(operatorCheck)
	for _, want := range []string{
		"FAIL  deployment " + ns + "/tatara-operator is rolled out and Available: the controller has not observed generation 1 yet",
		"PASS  the CRDs projects.tatara.dev, tasks.tatara.dev and internalissues.tatara.dev are established and served",
		"PASS  the cluster's CRDs are this operator's",
		"PASS  the REST API answers GET " + op.url + "/healthz with 200 ok",
		"PASS  " + metricsSrv.URL + "/metrics serves tatara_operator_build_info",
		"release-check chart: 6 checks, 5 passed, 1 FAILED",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("operator check lacks %q:\n%s", want, out)
		}
	}
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
			LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	if _, err := kube.AppsV1().Deployments(ns).UpdateStatus(ctx, dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := run(operatorCheck); !strings.Contains(out, "release-check chart: 6 checks, 6 passed\n") {
		t.Errorf("operator check of a rolled-out operator:\n%s", out)
	}

	// The project check: Ready once the operator has reconciled the Project; the NetworkPolicy it
	// names exists, the LimitRange does not.
	newProject(t, ns, "p")
	if _, err := kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p-agents"},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out = run(rc.ProjectCheck{
		Kube: kube, Dynamic: dyn, Namespace: ns, Project: "p", LimitRange: "p-limits", NetworkPolicy: "p-agents",
		AppVersion: buildinfo.Version, Version: buildinfo.Version, Timeout: 20 * time.Second, Interval: 100 * time.Millisecond,
	})
	for _, want := range []string{
		"PASS  project " + ns + "/p is Ready",
		"FAIL  the agent namespace " + ns + " has the chart's LimitRange p-limits: limitrange " + ns + "/p-limits does not exist",
		"PASS  the agent namespace " + ns + " has the chart's NetworkPolicy p-agents",
		"release-check chart: 4 checks, 3 passed, 1 FAILED",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("project check lacks %q:\n%s", want, out)
		}
	}
}
