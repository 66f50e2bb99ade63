package rest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"tatara.dev/cli/pkg/cabundle"
)

// The file names of a kubernetes.io/tls Secret (what cert-manager writes), mounted as a directory.
const (
	TLSCertFile = "tls.crt"
	TLSKeyFile  = "tls.key"
	TLSCAFile   = "ca.crt"
)

// CertSource holds the current serving certificate and keeps it current while it runs (it is a
// manager.Runnable): certwatcher for a mounted Secret, apicert.Issuer for the operator's own.
type CertSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	Start(context.Context) error
}

// TLS is the REST API's serving certificate.
type TLS struct {
	// Source holds the current key pair and renews or reloads it: run it for as long as the
	// server serves.
	Source CertSource
	// CABundle returns the PEM of the CA, "" for a certificate from a CA the system roots
	// already know. Agent pods get it as TATARA_OPERATOR_CA_BUNDLE. A mounted Secret's ca.crt is
	// read once (a new CA reaches new pods after a restart); the operator's own CA is current.
	CABundle func() string
}

// LoadTLS reads dir's tls.crt and tls.key, and ca.crt if present. A missing, unreadable or
// invalid file is an error naming it: the operator must not start serving plain HTTP, or a
// broken certificate, when TLS was asked for.
func LoadTLS(dir string) (*TLS, error) {
	certPath, keyPath, caPath := filepath.Join(dir, TLSCertFile), filepath.Join(dir, TLSKeyFile), filepath.Join(dir, TLSCAFile)
	// certwatcher's own errors do not say which file of the pair is wrong; these do.
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.ReadFile(p); err != nil {
			return nil, fmt.Errorf("failed to read the REST API's TLS file %s: %w", p, err)
		}
	}
	w, err := certwatcher.New(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("failed to load the REST API's TLS key pair %s and %s: %w", certPath, keyPath, err)
	}
	t := &TLS{Source: w, CABundle: func() string { return "" }}
	ca, err := os.ReadFile(caPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return t, nil
	case err != nil:
		return nil, fmt.Errorf("failed to read the REST API's CA bundle %s: %w", caPath, err)
	case len(bytes.TrimSpace(ca)) == 0:
		return t, nil
	}
	if _, err := cabundle.Parse(ca); err != nil {
		return nil, fmt.Errorf("invalid CA bundle %s: %w", caPath, err)
	}
	t.CABundle = func() string { return string(ca) }
	return t, nil
}

// Config is the server's TLS configuration: the source's current certificate, TLS 1.2 at least.
func (t *TLS) Config() *tls.Config {
	return &tls.Config{GetCertificate: t.Source.GetCertificate, MinVersion: tls.VersionTLS12}
}
