package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/manager"
)

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetricsHealthAndLeaderElection runs the operator as cmd/main.go does: controller-runtime's
// global registry served on /metrics, health probes, and leader election through a Lease.
// It is the only test that uses the global registry (metrics register once per process).
func TestMetricsHealthAndLeaderElection(t *testing.T) {
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	op := startOperator(t, func(o *manager.Options) {
		o.MetricsAddr, o.ProbeAddr = metricsAddr, probeAddr
		o.Registerer = nil
		o.LeaderElection, o.LeaderElectionNamespace = true, runtimeNS
	})
	// Registered once per process: unregister so -count=N can run this test again.
	t.Cleanup(func() {
		for _, c := range op.Metrics.Collectors() {
			ctrlmetrics.Registry.Unregister(c)
		}
	})
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "leader", "p", tatarav1.KindSelfImprove)
	waitPod(t, ns, task.Name) // the controller only runs once this replica leads

	var lease coordinationv1.Lease
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: runtimeNS, Name: manager.Name + ".tatara.dev"}, &lease); err != nil {
		t.Fatalf("leader election lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatal("lease has no holder")
	}
	if r := call(t, op.url, "GET", "/api/v1/tasks/leader", token(t, ns, task.Name), ""); r.code != 200 {
		t.Fatalf("task_get = %d", r.code)
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		eventually(t, 10*time.Second, path, func() error {
			if code, body := get(t, "http://"+probeAddr+path); code != 200 {
				return &httpErr{code, body}
			}
			return nil
		})
	}
	var body string
	eventually(t, 10*time.Second, "/metrics", func() error {
		code, b := get(t, "http://"+metricsAddr+"/metrics")
		if code != 200 {
			return &httpErr{code, b}
		}
		body = b
		return nil
	})
	for _, want := range []string{
		`tatara_operator_api_requests_total{code="200",tool="task_get"} 1`,
		`tatara_operator_agent_pods_created_total 1`,
		`controller_runtime_reconcile_total{controller="task"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

type httpErr struct {
	code int
	body string
}

func (e *httpErr) Error() string { return http.StatusText(e.code) + ": " + e.body }
