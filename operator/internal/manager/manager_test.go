package manager

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	restclient "k8s.io/client-go/rest"

	"tatara.dev/operator/internal/rest"
	tataratest "tatara.dev/testkit/testutil"
)

// TestLoadAPITLS: no directory is plain HTTP; with one, agent pods must be given an https URL, and
// the CA bundle comes from the directory's ca.crt.
func TestLoadAPITLS(t *testing.T) {
	ca := tataratest.NewCA(t, "tatara test CA")
	cert, key := ca.IssueServer(t, "tatara-operator.tatara-system.svc")
	dir := t.TempDir()
	for name, data := range map[string][]byte{rest.TLSCertFile: cert, rest.TLSKeyFile: key, rest.TLSCAFile: ca.PEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		dir     string
		secret  string
		url     string
		wantTLS bool
		wantErr string
	}{
		{"plain HTTP", "", "", "http://tatara-operator.tatara-system.svc:8082", false, ""},
		{"TLS", dir, "", "https://tatara-operator.tatara-system.svc:8082", true, ""},
		{"TLS with an http URL for agents", dir, "", "http://tatara-operator.tatara-system.svc:8082", false, `"http://tatara-operator.tatara-system.svc:8082", is not an https URL`},
		{"TLS from a directory without a certificate", t.TempDir(), "", "https://op:8082", false, rest.TLSCertFile},
		{"issued TLS with an http URL for agents", "", "tatara-operator-api-tls", "http://op:8082", false, `"http://op:8082", is not an https URL`},
		{"both a directory and a Secret to issue into", dir, "tatara-operator-api-tls", "https://op:8082", false, "choose one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{APITLSCertDir: tt.dir, APITLSSecret: types.NamespacedName{Namespace: "tatara-system", Name: tt.secret}}
			opts.Controller.OperatorURL = tt.url
			// No API server: the issued case is covered by envtest (TestRESTAPIOverIssuedTLS).
			got, err := loadAPITLS(context.Background(), &restclient.Config{}, nil, opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("loadAPITLS() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got != nil) != tt.wantTLS {
				t.Fatalf("loadAPITLS() = %v, want TLS %v", got, tt.wantTLS)
			}
			if got != nil && got.CABundle() != string(ca.PEM) {
				t.Fatalf("CABundle() = %q, want ca.crt", got.CABundle())
			}
		})
	}
}
