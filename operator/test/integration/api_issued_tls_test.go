package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/agent"
	"tatara.dev/operator/internal/apicert"
	"tatara.dev/operator/internal/manager"
)

// TestRESTAPIOverIssuedTLS runs the operator as the chart does by default: with no certificate
// given, it issues a CA and a certificate into its Secret, serves a Task's token over HTTPS with
// them, and gives the Task's agent pod that CA in its cli container.
func TestRESTAPIOverIssuedTLS(t *testing.T) {
	ns := newNamespace(t)
	secret := types.NamespacedName{Namespace: ns, Name: "tatara-operator-api-tls"}
	op := startOperator(t, func(o *manager.Options) {
		o.APITLSSecret = secret
		o.Controller.OperatorURL = "https://127.0.0.1:8082"
	})
	var s corev1.Secret
	if err := k8s.Get(context.Background(), secret, &s); err != nil {
		t.Fatalf("the operator did not create its certificate Secret: %v", err)
	}
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type = %s, want %s", s.Type, corev1.SecretTypeTLS)
	}
	newProject(t, ns, "p")
	task := newTask(t, ns, "issued-tls", "p", tatarav1.KindSelfImprove)
	pod := waitPod(t, ns, task.Name)
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == agent.OperatorCABundleEnv && (c.Name != agent.CLIContainer || e.Value != string(s.Data[apicert.CACertKey])) {
				t.Errorf("container %s has %s = %.40q..., want it only in the cli, equal to the Secret's ca.crt", c.Name, e.Name, e.Value)
			}
		}
	}

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data[apicert.CACertKey]) {
		t.Fatal("the Secret's ca.crt holds no certificate")
	}
	req, err := http.NewRequest(http.MethodGet, "https"+op.url[len("http"):]+"/api/v1/tasks/"+task.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token(t, ns, task.Name))
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("task_get over the issued TLS, trusting only the Secret's CA: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("task_get over the issued TLS = %s %s", resp.Status, body)
	}
}

// TestIssuersAgree: replicas starting together settle on one CA and certificate, and a renewal
// by one replica keeps the CA (agent pods keep trusting it) and reaches the other at its next
// check.
func TestIssuersAgree(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	secret := types.NamespacedName{Namespace: ns, Name: "api-tls"}
	hosts := []string{"tatara-operator.tatara-system.svc"}
	replicas := make([]*apicert.Issuer, 4)
	var wg sync.WaitGroup
	errs := make([]error, len(replicas))
	for i := range replicas {
		replicas[i] = &apicert.Issuer{Client: k8s, Secret: secret, Hosts: hosts}
		wg.Go(func() { errs[i] = replicas[i].Ensure(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	served := func(i *apicert.Issuer) string {
		c, err := i.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return string(c.Certificate[0])
	}
	for i, r := range replicas[1:] {
		if r.CABundle() != replicas[0].CABundle() || served(r) != served(replicas[0]) {
			t.Fatalf("replica %d serves another CA or certificate than replica 0", i+1)
		}
	}

	before := served(replicas[0])
	// A renewal on the real clock: a replica whose URL names one more host (renewal by time is
	// TestRefresh's, on a clock of its own).
	late := &apicert.Issuer{Client: k8s, Secret: secret, Hosts: append([]string{"tatara-operator.tatara-system.svc.cluster.local"}, hosts...)}
	if err := late.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if served(late) == before {
		t.Fatal("a certificate lacking a host was not renewed")
	}
	if late.CABundle() != replicas[0].CABundle() {
		t.Fatal("the renewal issued a new CA")
	}
	if err := replicas[1].Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if served(replicas[1]) != served(late) {
		t.Error("another replica's next check still serves the certificate from before the renewal")
	}
}
