package cabundle_test

import (
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"tatara.dev/cli/pkg/cabundle"
	"tatara.dev/testkit/testutil"
)

func TestParse(t *testing.T) {
	a, b := testutil.NewCA(t, "a"), testutil.NewCA(t, "b")
	leafA, key := a.IssueServer(t, "localhost")
	leafB, _ := b.IssueServer(t, "localhost")
	tests := []struct {
		name    string
		data    string
		trustA  bool
		trustB  bool
		wantErr string // "" for success
	}{
		{"one CA", string(a.PEM), true, false, ""},
		{"two CAs", string(a.PEM) + string(b.PEM), true, true, ""},
		{"comments around the blocks", "# b\n" + string(b.PEM) + "# end\n", false, true, ""},
		{"empty", "", false, false, "no PEM certificate"},
		{"not PEM", "not a certificate", false, false, "no PEM certificate"},
		{"a key among the certificates", string(a.PEM) + string(key), false, false, `PEM block 2 is a "PRIVATE KEY"`},
		{"a broken certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", false, false, "PEM block 1 is not a valid certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, err := cabundle.Parse([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name  string
				leaf  []byte
				trust bool
			}{{"a", leafA, tt.trustA}, {"b", leafB, tt.trustB}} {
				if got := verifies(t, pool, c.leaf); got != c.trust {
					t.Errorf("certificate of CA %s verifies = %v, want %v", c.name, got, c.trust)
				}
			}
		})
	}
}

func verifies(t *testing.T, pool *x509.CertPool, leafPEM []byte) bool {
	t.Helper()
	block, _ := pem.Decode(leafPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"})
	return err == nil
}
