package rest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tatara.dev/operator/internal/metrics"
)

// serveWithLimits runs a server without a cluster (the routes are never reached) and returns its
// address.
func serveWithLimits(t *testing.T, l Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(Options{Limits: l}).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestSlowBodiesAreCutOff: connections that send headers and then only part of their body are
// closed by the server once ReadTimeout passes; without it they stay open as long as the client
// likes, each holding a goroutine. The bound is checked as "closed before 40 times the timeout",
// a functional check, not a speed one.
func TestSlowBodiesAreCutOff(t *testing.T) {
	const conns = 50
	timeout := 200 * time.Millisecond
	addr := serveWithLimits(t, Limits{ReadTimeout: timeout, ReadHeaderTimeout: timeout})
	var open []net.Conn
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := fmt.Fprintf(c, "POST /api/v1/tasks/x/notes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tatara_%064d\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"note\":\"", 0); err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	deadline := time.Now().Add(40 * timeout)
	closed := 0
	for _, c := range open {
		_ = c.SetReadDeadline(deadline)
		// The server may answer 408/400 before closing; what matters is that it closes.
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		closed++
	}
	if closed != conns {
		t.Errorf("%d of %d connections with a stalled body were closed by the server within %s", closed, conns, 40*timeout)
	}
}

// TestOversizedHeadersAreRefused: a request whose headers pass MaxHeaderBytes gets 431 and never
// reaches a handler.
func TestOversizedHeadersAreRefused(t *testing.T) {
	addr := serveWithLimits(t, Limits{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	big := strings.Repeat("a", 4*DefaultMaxHeaderBytes)
	if _, err := fmt.Fprintf(c, "GET /api/v1/tasks/x HTTP/1.1\r\nHost: x\r\nX-Padding: %s\r\n\r\n", big); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response to oversized headers: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d, want 431", resp.StatusCode)
	}
}

// TestLimitsDefaults: every limit is set when Options leave it zero, and a handler's own deadline
// falls well inside the write timeout.
func TestLimitsDefaults(t *testing.T) {
	l := Limits{ReadTimeout: time.Second}.withDefaults()
	want := Limits{ReadHeaderTimeout: DefaultReadHeaderTimeout, ReadTimeout: time.Second, WriteTimeout: DefaultWriteTimeout,
		IdleTimeout: DefaultIdleTimeout, HandlerTimeout: DefaultHandlerTimeout, MaxHeaderBytes: DefaultMaxHeaderBytes,
		MaxConnections: DefaultMaxConnections, MaxConnectionsPerSource: DefaultMaxConnectionsPerSource}
	if l != want {
		t.Errorf("withDefaults = %+v, want %+v", l, want)
	}
	if DefaultMaxConnectionsPerSource*16 > DefaultMaxConnections {
		t.Errorf("per-source cap %d is not well below the global cap %d", DefaultMaxConnectionsPerSource, DefaultMaxConnections)
	}
	if DefaultHandlerTimeout >= DefaultWriteTimeout {
		t.Errorf("handler timeout %v is not inside the write timeout %v", DefaultHandlerTimeout, DefaultWriteTimeout)
	}
}

// TestOneSourceCannotHoldEveryConnection: a source that opens as many idle connections as the
// whole server may hold keeps only its own cap of them (the rest are closed unread and counted);
// another source is still served.
func TestOneSourceCannotHoldEveryConnection(t *testing.T) {
	const global, perSource = 8, 3
	reg := prometheus.NewRegistry()
	m := metrics.NewMetrics(reg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	limits := Limits{MaxConnections: global, MaxConnectionsPerSource: perSource, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute}
	go func() { done <- New(Options{Limits: limits, Metrics: m}).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	addr := ln.Addr().String()

	// The attacker's connections, all from 127.0.0.1, idle: none sends a request. They are
	// accepted in the order they were made, so the first perSource are held and every later one
	// is closed unread (EOF) once the server accepts it.
	for i := range global {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if i < perSource {
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("connection %d of one source, past its cap of %d: read %v, want EOF (closed by the server)", i+1, perSource, err)
		}
	}
	if n := testutil.ToFloat64(m.APIConnectionsRefused); n != global-perSource {
		t.Errorf("tatara_operator_api_connections_refused_total = %v, want %d", n, global-perSource)
	}

	// Another source is served (an address of 127/8 other than 127.0.0.1).
	other := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	resp, err := other.Get("http://" + addr + HealthzPath)
	if err != nil {
		t.Fatalf("a request from another source while one holds its cap: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthz from another source = %d, want 200", resp.StatusCode)
	}
}
