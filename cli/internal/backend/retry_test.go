package backend_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tatara.dev/cli/internal/backend"
	"tatara.dev/cli/internal/catalog"
	"tatara.dev/testkit/testutil"
)

var fastRetry = backend.Retry{Attempts: 4, Base: 10 * time.Millisecond, Max: 40 * time.Millisecond}

// A server that answers status for its first fails requests, then 200 "ok".
func flaky(t *testing.T, fails int32, status int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) <= fails {
			http.Error(w, "starting", status)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRetries(t *testing.T) {
	for _, tt := range []struct {
		name      string
		method    string
		fails     int32
		status    int
		wantCalls int32
		wantErr   string
	}{
		{"GET through two 503s", http.MethodGet, 2, http.StatusServiceUnavailable, 3, ""},
		{"GET through a 502 and a 504", http.MethodGet, 2, http.StatusBadGateway, 3, ""},
		{"GET gives up after the attempts", http.MethodGet, 10, http.StatusServiceUnavailable, 4, "answered 503 Service Unavailable"},
		{"POST is not repeated after a 503: the backend may have acted", http.MethodPost, 1, http.StatusServiceUnavailable, 1, "answered 503"},
		{"keyed POST through two 503s", http.MethodPost, 2, http.StatusServiceUnavailable, 3, ""},
		{"GET is not repeated after a 500", http.MethodGet, 1, http.StatusInternalServerError, 1, "answered 500"},
		{"GET is not repeated after a 429", http.MethodGet, 1, http.StatusTooManyRequests, 1, "answered 429"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := flaky(t, tt.fails, tt.status)
			logs := &testutil.SyncBuffer{}
			c := &backend.Client{Name: "operator", BaseURL: srv.URL, HTTP: backend.HTTPClient(), Retry: fastRetry, Log: slog.New(slog.NewJSONHandler(logs, nil)),
				IdempotencyKeys: strings.HasPrefix(tt.name, "keyed")}
			out, err := c.Do(context.Background(), catalog.Request{Method: tt.method, Path: "/api/v1/tasks/t", Body: map[string]any{"a": "b"}})
			if got := calls.Load(); got != tt.wantCalls {
				t.Errorf("the server got %d calls, want %d", got, tt.wantCalls)
			}
			if tt.wantErr == "" {
				if err != nil || out != "ok" {
					t.Fatalf("Do = %q, %v; want ok", out, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Do error %v, want %q", err, tt.wantErr)
			}
			if got, want := strings.Count(logs.String(), `"msg":"retrying backend call"`), int(min(tt.wantCalls, 4)-1); got != want {
				t.Errorf("%d retry log lines, want %d:\n%s", got, want, logs.String())
			}
		})
	}
}

// A client with idempotency keys sends one fresh key per creating call, the same on each of its
// tries, and none on a GET; a client without them sends none.
func TestIdempotencyKeys(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Method+" "+r.Header.Get(backend.IdempotencyKeyHeader))
		mu.Unlock()
		if n.Add(1)%2 == 1 { // every first try: the backend is restarting
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	do := func(c *backend.Client, method string) {
		t.Helper()
		if _, err := c.Do(context.Background(), catalog.Request{Method: method, Path: "/api/v1/tasks/t/notes", Body: map[string]any{"text": "n"}}); err != nil && c.IdempotencyKeys {
			t.Fatalf("%s: %v", method, err)
		}
	}
	keyed := &backend.Client{Name: "operator", BaseURL: srv.URL, HTTP: backend.HTTPClient(), Retry: fastRetry, IdempotencyKeys: true}
	do(keyed, http.MethodPost)
	do(keyed, http.MethodPost)
	do(keyed, http.MethodGet)
	plain := &backend.Client{Name: "memory", BaseURL: srv.URL, HTTP: backend.HTTPClient(), Retry: fastRetry}
	do(plain, http.MethodPost)
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 7 {
		t.Fatalf("the server saw %d tries, want 7 (2 per keyed POST, 2 for the GET, 1 for the POST without a key): %v", len(keys), keys)
	}
	first, second := keys[0], keys[2]
	switch {
	case first == "POST " || keys[1] != first:
		t.Errorf("the tries of the first POST carried %q and %q, want one key on both", keys[0], keys[1])
	case second == "POST " || keys[3] != second || second == first:
		t.Errorf("the second POST carried %q and %q (the first %q), want a new key on both tries", keys[2], keys[3], first)
	case keys[4] != "GET " || keys[5] != "GET ":
		t.Errorf("the GET carried %q, %q, want no key", keys[4], keys[5])
	case keys[6] != "POST ":
		t.Errorf("a client without idempotency keys sent %q", keys[6])
	}
}

// A refused connection carried nothing, so even a POST is tried again: here until the backend,
// restarting on the same port, listens again.
func TestRefusedConnectionIsRetriedForAnyMethod(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // refused from now until the restart below
	var posts atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		posts.Add(1)
		_, _ = w.Write([]byte("noted"))
	}), ReadHeaderTimeout: time.Second}
	t.Cleanup(func() { _ = srv.Close() })
	go func() {
		time.Sleep(60 * time.Millisecond)
		if ln, err := net.Listen("tcp", addr); err == nil { // else the port was taken: the call fails
			_ = srv.Serve(ln)
		}
	}()
	c := &backend.Client{Name: "operator", BaseURL: "http://" + addr, HTTP: backend.HTTPClient(),
		Retry: backend.Retry{Attempts: 20, Base: 20 * time.Millisecond, Max: 40 * time.Millisecond}}
	out, err := c.Do(context.Background(), catalog.Request{Method: http.MethodPost, Path: "/api/v1/tasks/t/notes", Body: map[string]any{"note": "n"}})
	if err != nil || out != "noted" || posts.Load() != 1 {
		t.Fatalf("Do = %q, %v after %d posts; want noted after exactly 1", out, err, posts.Load())
	}
}

// The call's deadline bounds the retries: when no time is left for another try, the last
// answer is the call's error, with what the backend said.
func TestRetriesStopAtTheDeadline(t *testing.T) {
	srv, calls := flaky(t, 1000, http.StatusServiceUnavailable)
	c := &backend.Client{Name: "operator", BaseURL: srv.URL, HTTP: backend.HTTPClient(),
		Retry: backend.Retry{Attempts: 1000, Base: 200 * time.Millisecond, Max: 200 * time.Millisecond}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.Do(ctx, catalog.Request{Method: http.MethodGet, Path: "/x"})
	var status *backend.StatusError
	if !errors.As(err, &status) || status.Status != http.StatusServiceUnavailable || status.Snippet != "starting" {
		t.Fatalf("Do error %v, want the last 503 and its body", err)
	}
	if n := calls.Load(); n < 2 || n >= 1000 {
		t.Errorf("%d calls, want a few retries cut short by the deadline", n)
	}
}

// blockingHandler is a log handler that holds each record until done is closed.
type blockingHandler struct{ done <-chan struct{} }

func (h blockingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h blockingHandler) Handle(context.Context, slog.Record) error {
	<-h.done
	return nil
}
func (h blockingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h blockingHandler) WithGroup(string) slog.Handler      { return h }

// TestDeadlineDuringABackoffReportsTheLastAnswer: when the deadline passes while the client
// waits to retry, the error is the backend's last answer, not a bare deadline. The retry log
// line is held until the deadline, so the wait begins with it already past.
func TestDeadlineDuringABackoffReportsTheLastAnswer(t *testing.T) {
	srv, calls := flaky(t, 1000, http.StatusServiceUnavailable)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	c := &backend.Client{Name: "operator", BaseURL: srv.URL, HTTP: backend.HTTPClient(), Log: slog.New(blockingHandler{ctx.Done()}),
		Retry: backend.Retry{Attempts: 5, Base: 100 * time.Millisecond, Max: 100 * time.Millisecond}}
	_, err := c.Do(ctx, catalog.Request{Method: http.MethodGet, Path: "/x"})
	var status *backend.StatusError
	if !errors.As(err, &status) || status.Status != http.StatusServiceUnavailable || status.Snippet != "starting" {
		t.Fatalf("Do error %v, want the 503 and its body", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls, want 1", n)
	}
}

// TestDeadlineDuringARetryReportsTheLastAnswer: when the call's deadline cuts a retry short while
// it waits for the backend, the error is the backend's last answer (its 503 and body), not a bare
// deadline; which of the two happened used to depend on the machine's load.
func TestDeadlineDuringARetryReportsTheLastAnswer(t *testing.T) {
	var n atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		select { // the retry hangs until the client gives up
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	c := &backend.Client{Name: "operator", BaseURL: srv.URL, HTTP: backend.HTTPClient(),
		Retry: backend.Retry{Attempts: 5, Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := c.Do(ctx, catalog.Request{Method: http.MethodGet, Path: "/x"})
	var status *backend.StatusError
	if !errors.As(err, &status) || status.Status != http.StatusServiceUnavailable || status.Snippet != "starting" {
		t.Fatalf("Do error %v, want the first try's 503 and its body", err)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("%d calls, want 2 (the 503, then the retry the deadline cut short)", got)
	}
}

// Every backend client ignores HTTP_PROXY and friends: a Project's extraEnvs reach the cli's
// environment, and a proxy would receive the Task token.
func TestBackendClientsIgnoreProxyEnvironment(t *testing.T) {
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		t.Setenv(k, "http://127.0.0.1:9")
	}
	t.Setenv("NO_PROXY", "")
	ca := testutil.NewCA(t, "operator CA")
	withBundle, err := backend.OperatorHTTPClient(string(ca.PEM))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := backend.OperatorHTTPClient("")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://operator.tatara-system.svc:8082/api/v1/tasks/t", nil)
	for name, hc := range map[string]*http.Client{"memory/chat": backend.HTTPClient(), "operator": plain, "operator with CA": withBundle} {
		rt := hc.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		tr, ok := rt.(*http.Transport)
		if !ok {
			t.Fatalf("%s: transport %T", name, rt)
		}
		if tr.Proxy != nil {
			if u, _ := tr.Proxy(req); u != nil {
				t.Errorf("%s client sends requests through the proxy %s", name, u)
			}
		}
	}
}

// A dial that timed out made no connection, so it is tried again while the call has time left:
// during a rollout the Service may route to a pod that is gone, whose SYNs go unanswered. The
// first dial here has a deadline already past, which fails the way an unanswered SYN does.
func TestDialTimeoutIsRetried(t *testing.T) {
	srv, calls := flaky(t, 0, http.StatusOK)
	var dials atomic.Int32
	tr := &http.Transport{Proxy: nil, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		timeout := time.Second
		if dials.Add(1) == 1 {
			timeout = time.Nanosecond
		}
		return (&net.Dialer{Timeout: timeout}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c := &backend.Client{Name: "operator", BaseURL: srv.URL, HTTP: &http.Client{Transport: tr}, Retry: fastRetry}
	out, err := c.Do(context.Background(), catalog.Request{Method: http.MethodPost, Path: "/api/v1/tasks/t/notes", Body: map[string]any{"note": "n"}})
	if err != nil || out != "ok" || calls.Load() != 1 || dials.Load() != 2 {
		t.Fatalf("Do = %q, %v after %d dials and %d calls; want ok after 2 dials and 1 call", out, err, dials.Load(), calls.Load())
	}
}

// A dial that keeps timing out ends the call with the dial's error once the attempts are spent,
// not with a claim that the call's own time ran out.
func TestDialTimeoutsExhaustTheAttempts(t *testing.T) {
	srv, _ := flaky(t, 0, http.StatusOK)
	var dials atomic.Int32
	tr := &http.Transport{Proxy: nil, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{Timeout: time.Nanosecond}).DialContext(ctx, network, addr)
	}}
	c := &backend.Client{Name: "operator", BaseURL: srv.URL, HTTP: &http.Client{Transport: tr}, Retry: fastRetry}
	_, err := c.Do(context.Background(), catalog.Request{Method: http.MethodGet, Path: "/api/v1/tasks/t"})
	if err == nil || !strings.Contains(err.Error(), "failed to reach operator backend for GET /api/v1/tasks/t (4 tries)") || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("Do error %v, want the dial timeout after 4 tries", err)
	}
	if n := dials.Load(); n != 4 {
		t.Errorf("%d dials, want 4", n)
	}
}
