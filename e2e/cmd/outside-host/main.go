// Command outside-host is the e2e suite's host outside the cluster: a container beside the kind
// node, on a network of its own, that agents may reach only through their Project's egress
// proxy. It answers every request on --http and --https (a certificate it signs itself at start,
// for --names) with one line naming the host and path asked for, and keeps what it was asked
// (GET /seen on --control, which only the suite reaches), so the suite can tell a request that
// arrived from one that did not.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// maxSeen bounds the requests kept; later ones are counted in dropped.
const maxSeen = 1000

// Seen is one request the host answered.
type Seen struct {
	Scheme string `json:"scheme"`
	Host   string `json:"host"`
	Path   string `json:"path"`
	Remote string `json:"remote"`
}

type recorder struct {
	mu      sync.Mutex
	seen    []Seen
	dropped int
}

func (r *recorder) serve(scheme string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		if len(r.seen) < maxSeen {
			r.seen = append(r.seen, Seen{Scheme: scheme, Host: req.Host, Path: req.URL.Path, Remote: req.RemoteAddr})
		} else {
			r.dropped++
		}
		r.mu.Unlock()
		_, _ = fmt.Fprintf(w, "outside-host: %s://%s%s\n", scheme, req.Host, req.URL.Path)
	})
}

func (r *recorder) report(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"seen": r.seen, "dropped": r.dropped})
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	plain := flag.String("http", ":80", "address of the plain HTTP listener")
	secure := flag.String("https", ":443", "address of the HTTPS listener")
	control := flag.String("control", ":8081", "address of GET /seen")
	names := flag.String("names", "", "comma-separated DNS names of the HTTPS certificate (required)")
	flag.Parse()
	if *names == "" {
		log.Error("--names is required")
		os.Exit(2)
	}
	cert, err := selfSigned(strings.Split(*names, ","))
	if err != nil {
		log.Error("failed to make the certificate", slog.Any("error", err))
		os.Exit(1)
	}
	rec := &recorder{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /seen", rec.report)
	servers := []*http.Server{
		{Addr: *plain, Handler: rec.serve("http"), ReadHeaderTimeout: 10 * time.Second},
		{Addr: *secure, Handler: rec.serve("https"), ReadHeaderTimeout: 10 * time.Second, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}},
		{Addr: *control, Handler: mux, ReadHeaderTimeout: 10 * time.Second},
	}
	errs := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			if s.TLSConfig != nil {
				errs <- s.ListenAndServeTLS("", "")
			} else {
				errs <- s.ListenAndServe()
			}
		}()
	}
	log.Info("outside host listening", slog.String("http", *plain), slog.String("https", *secure), slog.String("control", *control))
	if err := <-errs; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("listener failed", slog.Any("error", err))
		os.Exit(1)
	}
}

// selfSigned is a certificate for names, signed by its own key.
func selfSigned(names []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
