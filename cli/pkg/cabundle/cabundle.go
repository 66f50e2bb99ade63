// Package cabundle parses a PEM CA bundle strictly: the operator checks its ca.crt with it at
// start, and the cli builds the operator client's trust pool with it, so both accept exactly the
// same bundles.
package cabundle

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Parse returns a pool of every certificate in data. Text outside PEM blocks is ignored (bundles
// often carry comments), but unlike x509.CertPool.AppendCertsFromPEM, which skips what it cannot
// parse, a block that is not a CERTIFICATE or does not parse is an error, and so is a bundle
// without a certificate: a mistyped bundle must fail loudly, not trust less than intended.
func Parse(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %q, want CERTIFICATE", n, block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d is not a valid certificate: %w", n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return pool, nil
}
