package rest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/index"
)

// A flood of unauthenticated requests with 15 KB paths from one source: after the source's burst,
// every request is answered 429 with Retry-After before authentication, token reviews included,
// and no log line grows with the path.
func TestSourceLimitComesBeforeAuthentication(t *testing.T) {
	var logs bytes.Buffer
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, tatarav1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	if err := index.Register(context.Background(), fieldIndexer{b}); err != nil {
		t.Fatal(err)
	}
	c := b.Build()
	s := New(Options{Client: c, APIReader: c, Log: slog.New(slog.NewJSONHandler(&logs, nil)),
		SourceRateLimit: RateLimit{PerSecond: DefaultSourceRateLimit, Burst: DefaultSourceRateBurst}})
	clock := newFakeClock()
	s.sources.now = clock.now
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	long := "/api/v1/tasks/" + strings.Repeat("x", 15_000)
	codes := map[int]int{}
	for i := range 500 {
		req, err := http.NewRequest(http.MethodGet, srv.URL+long, nil)
		if i%5 == 0 {
			req, err = http.NewRequest(http.MethodPost, srv.URL+TokenReviewPath, strings.NewReader("{}"))
		}
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request %d: %.200v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Fatal("a 429 without Retry-After")
		}
	}
	if codes[http.StatusTooManyRequests] != 500-DefaultSourceRateBurst {
		t.Errorf("answers %v: want exactly the %d requests past the burst refused with 429", codes, 500-DefaultSourceRateBurst)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if len(line) > 2048 {
			t.Fatalf("a log line of %d bytes: %.200s...", len(line), line)
		}
	}
	// Another second refills the bucket: the source is served again.
	clock.advance(time.Second)
	resp, err := http.Get(srv.URL + HealthzPath)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after a second: %v %v, want 200", resp, err)
	}
	_ = resp.Body.Close()
}

// At most Limits.MaxConnections connections are served at once; the next one waits until one
// closes.
func TestConnectionCap(t *testing.T) {
	s := New(Options{Limits: Limits{MaxConnections: 2}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	addr := ln.Addr().String()

	held := make([]net.Conn, 2)
	for i := range held {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held[i] = c
		// A request on each, so the server has accepted both.
		if _, err := io.WriteString(c, "GET "+HealthzPath+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 512)
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	third := &http.Client{Timeout: 300 * time.Millisecond}
	if resp, err := third.Get("http://" + addr + HealthzPath); err == nil {
		_ = resp.Body.Close()
		t.Fatal("a third connection was served while two were open")
	}
	_ = held[0].Close()
	third.Timeout = 10 * time.Second
	resp, err := third.Get("http://" + addr + HealthzPath)
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	_ = resp.Body.Close()
	_ = held[1].Close()
}
