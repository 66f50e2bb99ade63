package backend_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"tatara.dev/cli/internal/backend"
	"tatara.dev/cli/internal/catalog"
	"tatara.dev/testkit/testutil"
)

// tlsServer answers 200 "ok" over TLS with a certificate for 127.0.0.1 signed by ca.
func tlsServer(t *testing.T, ca *testutil.CA) *httptest.Server {
	t.Helper()
	certPEM, keyPEM := ca.IssueServer(t, "127.0.0.1")
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// TestOperatorHTTPClientTrustsTheBundleOnly: with TATARA_OPERATOR_CA_BUNDLE's PEM, the operator
// client reaches a server whose certificate that CA signed and refuses one signed by another CA;
// memory and chat keep their own client.
func TestOperatorHTTPClientTrustsTheBundleOnly(t *testing.T) {
	ours, other := testutil.NewCA(t, "operator CA"), testutil.NewCA(t, "another CA")
	signedByOurs, signedByOther := tlsServer(t, ours), tlsServer(t, other)
	tests := []struct {
		name     string
		bundle   string
		server   *httptest.Server
		wantFail bool
	}{
		{"server signed by the bundle's CA", string(ours.PEM), signedByOurs, false},
		{"server signed by another CA", string(ours.PEM), signedByOther, true},
		{"bundle of both CAs", string(ours.PEM) + string(other.PEM), signedByOther, false},
		{"no bundle: the system roots, which know neither CA", "", signedByOurs, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc, err := backend.OperatorHTTPClient(tt.bundle)
			if err != nil {
				t.Fatal(err)
			}
			memory := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "memory") }))
			defer memory.Close()
			clients := backend.TaskClients(memory.URL, "", tt.server.URL, "p", "t", "tok", nil, hc, nil)
			req := catalog.Request{Method: http.MethodGet, Path: "/api/v1/tasks/t"}
			got, err := clients[catalog.TargetOperator].Do(context.Background(), req)
			if tt.wantFail {
				var unknown x509.UnknownAuthorityError
				if !errors.As(err, &unknown) {
					t.Fatalf("operator call = %q, %v; want an unknown-authority error", got, err)
				}
				if !strings.Contains(err.Error(), "failed to reach operator backend") {
					t.Errorf("error %q does not name the operator backend", err)
				}
			} else if err != nil || got != "ok" {
				t.Fatalf("operator call = %q, %v; want ok", got, err)
			}
			// The operator's trust settings are not the memory backend's.
			if got, err := clients[catalog.TargetMemory].Do(context.Background(), req); err != nil || got != "memory" {
				t.Fatalf("memory call = %q, %v", got, err)
			}
		})
	}
}

func TestOperatorHTTPClientRejectsABadBundle(t *testing.T) {
	for _, bundle := range []string{"not a certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"} {
		if hc, err := backend.OperatorHTTPClient(bundle); err == nil {
			t.Errorf("OperatorHTTPClient(%q) = %v, want an error", bundle, hc)
		}
	}
}
