package rest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHealthzNeedsNoToken: GET /healthz answers 200 "ok" without a bearer token (the chart's
// release check has none), while every other route still refuses a request without one.
func TestHealthzNeedsNoToken(t *testing.T) {
	srv := httptest.NewServer(New(Options{}).Handler())
	t.Cleanup(srv.Close)
	tests := []struct {
		method, path string
		wantCode     int
		wantBody     string
	}{
		{http.MethodGet, HealthzPath, http.StatusOK, "ok"},
		{http.MethodPost, HealthzPath, http.StatusNotFound, ""},
		{http.MethodGet, "/api/v1/tasks/t1", http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantCode {
				t.Errorf("status %d, want %d (body %q)", resp.StatusCode, tt.wantCode, body)
			}
			if tt.wantBody != "" && string(body) != tt.wantBody {
				t.Errorf("body %q, want %q", body, tt.wantBody)
			}
		})
	}
}

// TestServingIsReadiness: the readiness check fails until the listener serves, passes while it
// does (and /healthz answers), and fails again once shutdown begins.
func TestServingIsReadiness(t *testing.T) {
	s := New(Options{})
	if err := s.Serving(nil); err == nil {
		t.Fatal("Serving() = nil before Serve")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Serving(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatal("Serving() never became nil")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := http.Get("http://" + ln.Addr().String() + HealthzPath)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ready, but GET /healthz = %v, %v", resp, err)
	}
	_ = resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.Serving(nil); err == nil || !strings.Contains(err.Error(), "not serving") {
		t.Fatalf("Serving() after shutdown = %v, want not serving", err)
	}
}
