package workspace

import (
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	ws "tatara.dev/cli/pkg/workspace"
	"tatara.dev/testkit/gitserver"
)

// signalWriter is a log destination that closes seen once a line containing want is written.
type signalWriter struct {
	want string
	seen chan struct{}
	once sync.Once
	mu   sync.Mutex
	all  strings.Builder
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestPrepareRetriesAnUnreachableHost: a clone whose host refuses connections is tried again
// within UnreachableRetryFor, so a git server that comes up meanwhile (as the cluster's DNS and
// Services do after a lost node) is cloned from; with nothing ever listening, the clone fails
// Unreachable once the window is spent; with no window it fails at the first refusal.
func TestPrepareRetriesAnUnreachableHost(t *testing.T) {
	// A port nothing listens on until the server below takes it.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	_ = probe.Close()

	o := testOptions(t, "http://"+addr+"/demo.git")
	o.UnreachableRetryFor = time.Minute
	o.CredentialsDir, o.CredentialsSecret = credentialsDir(t, "read-token-0123456789"), "demo-read"
	logs := &signalWriter{want: "repository host unreachable, trying again", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- Prepare(context.Background(), o, slog.New(slog.NewJSONHandler(logs, nil))) }()

	select {
	case <-logs.seen:
	case err := <-done:
		t.Fatalf("Prepare returned %v before it tried the refused host again", err)
	}
	srv, err := gitserver.New(gitserver.Config{Root: t.TempDir(), ReadToken: "read-token-0123456789", WriteToken: "write-token-0123456789", Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if _, err := srv.SeedDemo(context.Background(), "demo"); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port the clone tries, %s, was taken meanwhile: %v", addr, err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	if err := <-done; err != nil {
		t.Fatalf("the clone, tried again once the server was up: %v; log:\n%s", err, logs.all.String())
	}

	for _, c := range []struct {
		name   string
		window time.Duration
		retry  bool
	}{{"no window", 0, false}, {"a window spent", 1500 * time.Millisecond, true}} {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions(t, "http://127.0.0.1:1/r.git")
			o.UnreachableRetryFor = c.window
			logs := &signalWriter{want: "trying again", seen: make(chan struct{})}
			err := Prepare(context.Background(), o, slog.New(slog.NewJSONHandler(logs, nil)))
			if f := Failure(err); f.Reason != ws.Unreachable {
				t.Fatalf("reason %s (%v), want %s", f.Reason, err, ws.Unreachable)
			}
			if retried := strings.Contains(logs.all.String(), "trying again"); retried != c.retry {
				t.Fatalf("tried again: %v, want %v; log:\n%s", retried, c.retry, logs.all.String())
			}
		})
	}
}
