package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tatara.dev/wrapper/internal/metrics"
	"tatara.dev/wrapper/internal/transcript"
)

const session = "3f2a9c1e-8d4b-4c6a-9e2f-1a2b3c4d5e6f"

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // test against a local server
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func start(t *testing.T, g prometheus.Gatherer, heart Heart, stale time.Duration, ready func() bool) string {
	t.Helper()
	srv, err := Start("127.0.0.1:0", Handler(promhttp.HandlerFor(g, promhttp.HandlerOpts{}), heart, stale, ready), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return "http://" + srv.Addr()
}

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.NewMetrics(reg)
	m.StreamEventsTotal.WithLabelValues("text").Inc()
	ready := false
	base := start(t, reg, nil, time.Second, func() bool { return ready })

	cases := []struct {
		name, path string
		code       int
		body       string
	}{
		{"metrics", "/metrics", 200, `tatara_wrapper_stream_events_total{type="text"} 1`},
		{"healthz without tailer", "/healthz", 200, "ok"},
		{"readyz before start", "/readyz", 503, "agent not started"},
		{"unknown path", "/nope", 404, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, base+tc.path)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Fatalf("GET %s = %d %q, want %d containing %q", tc.path, code, body, tc.code, tc.body)
			}
		})
	}
	ready = true
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("readyz after start = %d", code)
	}
}

// blockingWriter never returns from Write until released: a log pipeline that stopped reading.
type blockingWriter struct{ release chan struct{} }

func (b blockingWriter) Write(p []byte) (int, error) { <-b.release; return len(p), nil }

func TestHealthzFollowsTailerHeartbeat(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "projects", "-w", session+".jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	w := blockingWriter{release: make(chan struct{})}
	tl := transcript.New(root, session, transcript.WithLogger(slog.New(slog.NewJSONHandler(w, nil))),
		transcript.WithPollInterval(5*time.Millisecond))
	base := start(t, prometheus.NewRegistry(), tl, 200*time.Millisecond, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tl.Run(ctx) }()
	defer func() { close(w.release); cancel(); <-done }()

	waitStatus := func(want int) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, body := get(t, base+"/healthz")
			if code == want {
				return body
			}
			if time.Now().After(deadline) {
				t.Fatalf("healthz stayed %d (%s), want %d", code, body, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Healthy while the tailer polls an empty directory...
	time.Sleep(300 * time.Millisecond)
	waitStatus(200)
	// ...stuck once it blocks on logging the file it found.
	if err := os.WriteFile(path, []byte(`{"type":"summary"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if body := waitStatus(503); !strings.Contains(body, "transcript tailer stuck") {
		t.Fatalf("body = %q", body)
	}
}
