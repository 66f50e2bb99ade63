package rest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tataratest "tatara.dev/testkit/testutil"
)

// secretDir lays files out as the kubelet mounts a Secret volume: the files live in a
// timestamped directory, ..data links to it, and each name links through ..data. A rotation
// (rotateSecretDir) swaps ..data atomically and removes the old directory, which is what
// certwatcher must notice.
func secretDir(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	writeSecretVersion(t, dir, "..v1", files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func writeSecretVersion(t *testing.T, dir, version string, files map[string][]byte) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, version, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(version, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

func rotateSecretDir(t *testing.T, dir, from, to string, files map[string][]byte) {
	t.Helper()
	writeSecretVersion(t, dir, to, files)
	if err := os.RemoveAll(filepath.Join(dir, from)); err != nil {
		t.Fatal(err)
	}
}

func serial(t *testing.T, certPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.String()
}

// TestServeTLS runs the REST API with --api-tls-cert-dir's loading: a client trusting the
// Secret's CA is served (HTTP/1.1 over TLS 1.2 or later), a client without it or below TLS 1.2
// fails the handshake, plain HTTP gets a 400, and a renewed certificate reaches new connections
// without a restart.
func TestServeTLS(t *testing.T) {
	ca := tataratest.NewCA(t, "tatara test CA")
	cert1, key1 := ca.IssueServer(t, "127.0.0.1")
	dir := secretDir(t, map[string][]byte{TLSCertFile: cert1, TLSKeyFile: key1, TLSCAFile: ca.PEM})

	apiTLS, err := LoadTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	if apiTLS.CABundle() != string(ca.PEM) {
		t.Fatalf("CABundle = %q, want ca.crt's PEM", apiTLS.CABundle())
	}
	ctx, cancel := context.WithCancel(context.Background())
	watcherDone, serverDone := make(chan error, 1), make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		if err := <-serverDone; err != nil {
			t.Errorf("server: %v", err)
		}
		if err := <-watcherDone; err != nil {
			t.Errorf("certwatcher: %v", err)
		}
	})
	go func() { watcherDone <- apiTLS.Source.Start(ctx) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { serverDone <- New(Options{TLS: apiTLS.Config()}).Serve(ctx, ln) }()
	url := "https://" + ln.Addr().String() + "/api/v1/nothing-here"

	client := func(cfg *tls.Config) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true, DisableKeepAlives: true}}
	}
	tests := []struct {
		name    string
		cfg     *tls.Config
		wantErr func(error) bool
	}{
		{"client trusting the CA", &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}, nil},
		{"client with the system roots", &tls.Config{MinVersion: tls.VersionTLS12}, func(err error) bool {
			var unknown x509.UnknownAuthorityError
			return errors.As(err, &unknown)
		}},
		{"client with another CA", &tls.Config{RootCAs: tataratest.NewCA(t, "other").Pool(), MinVersion: tls.VersionTLS12}, func(err error) bool {
			var unknown x509.UnknownAuthorityError
			return errors.As(err, &unknown)
		}},
		{"client below TLS 1.2", &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, func(err error) bool {
			return strings.Contains(err.Error(), "protocol version")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client(tt.cfg).Get(url)
			if tt.wantErr != nil {
				if err == nil {
					_ = resp.Body.Close()
					t.Fatalf("GET succeeded (%s), want a failed handshake", resp.Status)
				}
				if !tt.wantErr(err) {
					t.Fatalf("GET failed with %v, not the expected handshake error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "no route") {
				t.Fatalf("GET = %s %s, want the API's 404", resp.Status, body)
			}
			if resp.Proto != "HTTP/1.1" || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
				t.Fatalf("served %s over TLS %+v, want HTTP/1.1 over TLS 1.2+", resp.Proto, resp.TLS)
			}
		})
	}

	t.Run("plain HTTP client", func(t *testing.T) {
		resp, err := client(nil).Get("http" + strings.TrimPrefix(url, "https"))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP to the TLS port = %s, want 400", resp.Status)
		}
	})

	t.Run("renewed certificate", func(t *testing.T) {
		cert2, key2 := ca.IssueServer(t, "127.0.0.1")
		want := serial(t, cert2)
		if want == serial(t, cert1) {
			t.Fatal("the renewed certificate has the old serial")
		}
		rotateSecretDir(t, dir, "..v1", "..v2", map[string][]byte{TLSCertFile: cert2, TLSKeyFile: key2, TLSCAFile: ca.PEM})
		// fsnotify usually reports the swap at once; certwatcher also polls every 10 s.
		deadline := time.Now().Add(30 * time.Second)
		var got string
		for time.Now().Before(deadline) {
			conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12})
			if err != nil {
				t.Fatal(err)
			}
			got = conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
			_ = conn.Close()
			if got == want {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("new connections still get serial %s, want the renewed certificate's %s", got, want)
	})
}

func TestLoadTLS(t *testing.T) {
	ca := tataratest.NewCA(t, "tatara test CA")
	cert, key := ca.IssueServer(t, "127.0.0.1")
	_, otherKey := ca.IssueServer(t, "127.0.0.1")
	tests := []struct {
		name    string
		files   map[string][]byte
		wantCA  string
		wantErr []string // substrings of the error, the file's name among them; nil for success
	}{
		{"key pair and CA", map[string][]byte{TLSCertFile: cert, TLSKeyFile: key, TLSCAFile: ca.PEM}, string(ca.PEM), nil},
		{"no ca.crt", map[string][]byte{TLSCertFile: cert, TLSKeyFile: key}, "", nil},
		{"empty ca.crt (a publicly trusted issuer)", map[string][]byte{TLSCertFile: cert, TLSKeyFile: key, TLSCAFile: []byte("\n")}, "", nil},
		{"no tls.crt", map[string][]byte{TLSKeyFile: key}, "", []string{"failed to read the REST API's TLS file", TLSCertFile, "no such file"}},
		{"no tls.key", map[string][]byte{TLSCertFile: cert}, "", []string{"failed to read the REST API's TLS file", TLSKeyFile, "no such file"}},
		{"tls.crt is not a certificate", map[string][]byte{TLSCertFile: []byte("garbage"), TLSKeyFile: key}, "", []string{"TLS key pair", TLSCertFile, TLSKeyFile}},
		{"key of another certificate", map[string][]byte{TLSCertFile: cert, TLSKeyFile: otherKey}, "", []string{"TLS key pair", "private key does not match"}},
		{"ca.crt is not a certificate", map[string][]byte{TLSCertFile: cert, TLSKeyFile: key, TLSCAFile: []byte("garbage")}, "", []string{"invalid CA bundle", TLSCAFile}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := LoadTLS(dir)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatal("LoadTLS succeeded, want an error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.CABundle() != tt.wantCA {
				t.Fatalf("CABundle() = %q, want %q", got.CABundle(), tt.wantCA)
			}
			if c, _ := got.Source.GetCertificate(nil); c == nil || fmt.Sprint(c.Leaf.SerialNumber) != serial(t, cert) {
				t.Fatalf("watcher holds %v, want the certificate of tls.crt", c)
			}
		})
	}
}
