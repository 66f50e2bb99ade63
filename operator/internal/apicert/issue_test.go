package apicert

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

const host = "tatara-operator.tatara-system.svc"

func mustRefresh(t *testing.T, data map[string][]byte, hosts []string, now time.Time) map[string][]byte {
	t.Helper()
	out, _, _, err := refresh(data, hosts, now)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("no PEM block in %q", b)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRefresh(t *testing.T) {
	start := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	issued := mustRefresh(t, nil, []string{host}, start)
	other := mustRefresh(t, nil, []string{host}, start)
	foreignLeaf := map[string][]byte{ // the first CA, with a certificate another CA signed
		CACertKey: issued[CACertKey], CAKeyKey: issued[CAKeyKey], CertKey: other[CertKey], KeyKey: other[KeyKey],
	}
	garbage := map[string][]byte{CACertKey: []byte("x"), CAKeyKey: []byte("y"), CertKey: []byte("z"), KeyKey: []byte("w")}

	tests := []struct {
		name        string
		data        map[string][]byte
		hosts       []string
		now         time.Time
		wantChanged bool
		wantNewCA   bool
	}{
		{name: "empty Secret: a CA and a certificate", data: nil, hosts: []string{host}, now: start, wantChanged: true, wantNewCA: true},
		{name: "fresh pair is kept", data: issued, hosts: []string{host}, now: start.Add(time.Hour), wantChanged: false},
		{name: "kept until RenewBefore its end", data: issued, hosts: []string{host}, now: start.Add(CertValidity - RenewBefore - 2*time.Hour), wantChanged: false},
		{name: "renewed inside RenewBefore, same CA", data: issued, hosts: []string{host}, now: start.Add(CertValidity - RenewBefore + time.Hour), wantChanged: true},
		{name: "renewed when a host is added, same CA", data: issued, hosts: []string{host, "tatara-operator.other.svc"}, now: start, wantChanged: true},
		{name: "renewed when signed by another CA", data: foreignLeaf, hosts: []string{host}, now: start, wantChanged: true},
		{name: "new CA when the CA would end before a fresh certificate", data: issued, hosts: []string{host}, now: start.Add(CAValidity - CertValidity + time.Hour), wantChanged: true, wantNewCA: true},
		{name: "new CA when the Secret holds garbage", data: garbage, hosts: []string{host}, now: start, wantChanged: true, wantNewCA: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, newCA, err := refresh(tt.data, tt.hosts, tt.now)
			if err != nil {
				t.Fatal(err)
			}
			if changed != tt.wantChanged || newCA != tt.wantNewCA {
				t.Fatalf("changed=%v newCA=%v, want changed=%v newCA=%v", changed, newCA, tt.wantChanged, tt.wantNewCA)
			}
			if sameCA := string(out[CACertKey]) == string(tt.data[CACertKey]); sameCA == tt.wantNewCA {
				t.Errorf("CA kept=%v, want kept=%v", sameCA, !tt.wantNewCA)
			}
			// Whatever refresh returns must serve every host at now, for more than RenewBefore,
			// chained to the CA it returns.
			ca, leaf := parseCert(t, out[CACertKey]), parseCert(t, out[CertKey])
			if !serves(leaf, ca, tt.hosts, tt.now) {
				t.Errorf("the returned certificate does not serve %v at %s (valid %s to %s)", tt.hosts, tt.now, leaf.NotBefore, leaf.NotAfter)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca)
			for _, h := range tt.hosts {
				if _, err := leaf.Verify(x509.VerifyOptions{DNSName: h, Roots: roots, CurrentTime: tt.now}); err != nil {
					t.Errorf("a client trusting only the CA rejects the certificate for %s: %v", h, err)
				}
			}
			if _, err := parsePair(out[CertKey], out[CAKeyKey]); err == nil {
				t.Error("the CA's key pairs with the serving certificate")
			}
		})
	}
}

func TestRefreshNeedsAHost(t *testing.T) {
	if _, _, _, err := refresh(nil, nil, time.Now()); err == nil {
		t.Fatal("refresh with no host succeeded")
	}
}
