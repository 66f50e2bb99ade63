package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
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
