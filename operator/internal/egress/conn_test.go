package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestIdleCountsBothDirections: a connection is idle only when no byte has moved on it or on its
// upstream: a download the client only reads keeps its tunnel open, and once nothing moves either
// way the client and upstream connections are both closed. (Time is moved by backdating the
// last activity, so no test waits on a clock.)
func TestIdleCountsBothDirections(t *testing.T) {
	clientSide, clientPeer := net.Pipe()
	upSide, upPeer := net.Pipe()
	released := make(chan struct{})
	set := newConnSet()
	cc := newClientConn(clientSide, time.Hour, set)
	up := cc.attach(upSide, func() { close(released) })
	backdate := func() { cc.last.Store(int64(sinceEpoch() - 2*time.Hour)) }
	isClosed := func() bool {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		return cc.closed
	}

	// The upstream sends, the client sends nothing: that is activity.
	backdate()
	go func() { _, _ = upPeer.Write([]byte("x")) }()
	if _, err := up.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	cc.closeIfIdle()
	if isClosed() {
		t.Fatal("a tunnel whose upstream just sent was closed as idle")
	}

	// Nothing either way for longer than the bound: both are closed, the upstream released.
	backdate()
	cc.closeIfIdle()
	if !isClosed() {
		t.Fatal("an idle tunnel is open")
	}
	<-released
	if _, err := clientPeer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("the client's side after the idle close: %v", err)
	}
	if _, err := upPeer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("the upstream's side after the idle close: %v", err)
	}
	if len(set.conns) != 0 {
		t.Errorf("the closed connection is still in the set")
	}
}

// holdingUpstream accepts connections and holds them, reading and discarding, until the test
// ends; it is a server that never says anything.
func holdingUpstream(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestIdleTunnelIsClosed: through the real proxy, a tunnel on which nothing moves is closed (the
// client reads EOF) once the idle bound has passed.
func TestIdleTunnelIsClosed(t *testing.T) {
	port := holdingUpstream(t)
	h := startProxy(t, Config{
		Policy: policyFor(t, fmt.Sprintf("quiet.test:%d", port)), Resolver: mapResolver{"quiet.test": {localhost}},
		Forbidden: loopbackPermitted(), Limits: Limits{IdleTimeout: 200 * time.Millisecond},
	})
	r := send(t, h.addr, "", connectRequest(fmt.Sprintf("quiet.test:%d", port)))
	if r.code != http.StatusOK {
		t.Fatalf("CONNECT: %d", r.code)
	}
	_ = r.conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := r.br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("reading an idle tunnel: %v, want EOF once the proxy closes it", err)
	}
}

// TestShutdownLetsTunnelsEndThenClosesThem: a stopping proxy accepts no new connection, lets an
// open tunnel carry on while the bound lasts, and stops as soon as the last tunnel ends; past the
// bound it closes the tunnels left.
func TestShutdownLetsTunnelsEndThenClosesThem(t *testing.T) {
	for _, c := range []struct {
		name         string
		bound        time.Duration
		clientCloses bool
	}{
		{"the tunnel ends within the bound", time.Hour, true},
		{"the tunnel outlives the bound", 100 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := startUpstream(t, false)
			p := New(Config{Project: "demo", Namespace: "ns", Metrics: NewMetrics(prometheusRegistry(), "demo"), Log: discardLog(),
				Policy: policyFor(t, fmt.Sprintf("allowed.test:%d", up.port)), Resolver: mapResolver{"allowed.test": {localhost}},
				Forbidden: loopbackPermitted(), Limits: Limits{ShutdownTimeout: c.bound}})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.Serve(ctx, ln) }()
			target := fmt.Sprintf("allowed.test:%d", up.port)
			tunnel := send(t, ln.Addr().String(), "", connectRequest(target))
			if tunnel.code != http.StatusOK {
				t.Fatalf("CONNECT: %d", tunnel.code)
			}
			cancel()
			// Stopped accepting: new connections are refused once the listener is closed.
			for {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					break
				}
				_ = c.Close()
			}
			if c.clientCloses {
				// The tunnel still works during the drain, then its client ends it.
				if _, err := fmt.Fprintf(tunnel.conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", target); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(tunnel.br, nil)
				if err != nil {
					t.Fatalf("a request through the tunnel during the drain: %v", err)
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("a request through the tunnel during the drain: %d", resp.StatusCode)
				}
				_ = tunnel.conn.Close()
			} else if _, err := io.Copy(io.Discard, tunnel.br); err != nil {
				t.Fatalf("the tunnel past the bound: %v, want EOF", err)
			}
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
}
