package integration

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/manager"
	"tatara.dev/operator/internal/rest"
	"tatara.dev/testkit/testutil"
)

// TestRESTAPIOverTLS runs the operator as the chart does with apiTLS.secretName: the REST API
// answers a Task's token over HTTPS with the mounted certificate, and the Task's agent pod gets
// the mounted ca.crt in its cli container as TATARA_OPERATOR_CA_BUNDLE.
func TestRESTAPIOverTLS(t *testing.T) {
	ca := testutil.NewCA(t, "tatara test CA")
	cert, key := ca.IssueServer(t, "127.0.0.1")
	dir := t.TempDir()
	for name, data := range map[string][]byte{rest.TLSCertFile: cert, rest.TLSKeyFile: key, rest.TLSCAFile: ca.PEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	op := startOperator(t, func(o *manager.Options) {
		o.APITLSCertDir = dir
		o.Controller.OperatorURL = "https://tatara-operator.tatara-system.svc:8082"
	})
	ns := newNamespace(t)
	newProject(t, ns, "p")
	task := newTask(t, ns, "tls", "p", tatarav1.KindSelfImprove)

	pod := waitPod(t, ns, task.Name)
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		var bundle *string
		for _, e := range c.Env {
			if e.Name == agent.OperatorCABundleEnv {
				bundle = &e.Value
			}
		}
		switch {
		case c.Name == agent.CLIContainer && (bundle == nil || *bundle != string(ca.PEM)):
			t.Errorf("cli container's %s = %v, want the mounted ca.crt", agent.OperatorCABundleEnv, bundle)
		case c.Name != agent.CLIContainer && bundle != nil:
			t.Errorf("container %s has %s", c.Name, agent.OperatorCABundleEnv)
		}
	}

	base := "https" + op.url[len("http"):]
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/tasks/"+task.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token(t, ns, task.Name))
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
	}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("task_get over TLS: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Fatalf("task_get over TLS = %s %s (TLS %v)", resp.Status, body, resp.TLS != nil)
	}
	// The same port refuses plain HTTP: no request reaches the API without TLS.
	if code, body := get(t, op.url+"/api/v1/tasks/"+task.Name); code != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS port = %d %s, want 400", code, body)
	}
}
