// Package apicert gives the REST API a serving certificate when the operator is given none: it
// issues a CA and a certificate for the operator's host itself, and keeps both in one Secret of
// the operator's namespace, so that every replica serves the same pair and every agent pod trusts
// the one CA. The CA outlives many certificates, so renewing the certificate never breaks the
// trust of an agent pod that is already running.
//
// The REST API's TLS. This package owns the certificate's life in the "issued" mode; the three
// modes, chosen by the tatara-operator chart (apiTLSSource in its templates/_helpers.tpl):
//   - issued (apiTLS.enabled, no secretName): refresh here issues the pair on the first start,
//     renews the certificate RenewBefore its end and replaces the CA only when it would end before
//     a fresh certificate (Lifetimes); Issuer.Ensure (issuer.go) keeps it in the Secret;
//   - mounted (apiTLS.secretName, e.g. cert-manager's): the operator only reads the files, and
//     reloads them when they change;
//   - off (apiTLS.enabled false): plain HTTP.
//
// The server loads and reloads the pair in operator/internal/rest/tls.go, loadAPITLS in
// operator/internal/manager/manager.go picks the mode, and each agent pod gets the CA as
// TATARA_OPERATOR_CA_BUNDLE, which the cli alone trusts (cli/internal/backend, OperatorHTTPClient).
package apicert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Lifetimes. The certificate is renewed RenewBefore its end; the CA is replaced only when it would
// end before a fresh certificate does (after about 9 years), which breaks the agent pods running
// then, as deleting the Secret does.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
	RenewBefore  = 30 * 24 * time.Hour
)

// The keys of the Secret: a kubernetes.io/tls Secret's (what a mounted cert-manager Secret has
// too) plus the CA's key, which only the operator reads.
const (
	CertKey   = "tls.crt"
	KeyKey    = "tls.key"
	CACertKey = "ca.crt"
	CAKeyKey  = "ca.key"
)

// pair is a parsed certificate and its key, with their PEM.
type pair struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

// refresh returns data with a CA and a certificate for hosts valid at now, reusing what data
// already holds when it still serves: changed is false when data is returned as it was. newCA is
// true when the CA had to be (re)issued: agent pods that trust the former one lose the operator.
func refresh(data map[string][]byte, hosts []string, now time.Time) (out map[string][]byte, changed, newCA bool, err error) {
	ca, caErr := parsePair(data[CACertKey], data[CAKeyKey])
	if caErr != nil || !ca.cert.IsCA || ca.cert.NotAfter.Before(now.Add(CertValidity)) {
		if ca, err = newCAPair(now); err != nil {
			return nil, false, false, err
		}
		newCA = true
	}
	if !newCA {
		if leaf, err := parsePair(data[CertKey], data[KeyKey]); err == nil && serves(leaf.cert, ca.cert, hosts, now) {
			return data, false, false, nil
		}
	}
	leaf, err := newLeafPair(ca, hosts, now)
	if err != nil {
		return nil, false, false, err
	}
	out = map[string][]byte{
		CACertKey: ca.certPEM, CAKeyKey: ca.keyPEM,
		CertKey: leaf.certPEM, KeyKey: leaf.keyPEM,
	}
	return out, true, newCA, nil
}

// serves tells whether leaf is signed by ca, names every host, and has more than RenewBefore left.
func serves(leaf, ca *x509.Certificate, hosts []string, now time.Time) bool {
	if now.Before(leaf.NotBefore) || leaf.NotAfter.Sub(now) <= RenewBefore || leaf.CheckSignatureFrom(ca) != nil {
		return false
	}
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

func newCAPair(now time.Time) (pair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "tatara-operator REST API CA"},
		NotBefore:             now.Add(-time.Hour), // tolerate clocks a little behind the operator's
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	return sign(tmpl, pair{})
}

func newLeafPair(ca pair, hosts []string, now time.Time) (pair, error) {
	if len(hosts) == 0 {
		return pair{}, errors.New("failed to issue the REST API's certificate: no host to name")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(CertValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return sign(tmpl, ca)
}

// sign creates a key and a certificate from tmpl, signed by parent (self-signed when parent is
// the zero pair).
func sign(tmpl *x509.Certificate, parent pair) (pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pair{}, fmt.Errorf("failed to generate a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return pair{}, fmt.Errorf("failed to generate a serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	issuer, signer := tmpl, key
	if parent.cert != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		return pair{}, fmt.Errorf("failed to sign the certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return pair{}, fmt.Errorf("failed to marshal the key of %q: %w", tmpl.Subject.CommonName, err)
	}
	return parsePair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}

// parsePair parses a PEM certificate and its PEM EC key, and checks that they belong together.
func parsePair(certPEMBytes, keyPEMBytes []byte) (pair, error) {
	kp, err := tls.X509KeyPair(certPEMBytes, keyPEMBytes)
	if err != nil {
		return pair{}, err
	}
	key, ok := kp.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return pair{}, fmt.Errorf("the key is a %T, want an ECDSA key", kp.PrivateKey)
	}
	return pair{cert: kp.Leaf, key: key, certPEM: certPEMBytes, keyPEM: keyPEMBytes}, nil
}
