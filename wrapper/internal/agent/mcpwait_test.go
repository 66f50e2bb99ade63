package agent

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestWaitForMCPReturnsOnceTheServerListens: the wait holds while nothing listens at the URL and
// ends when a listener appears there.
func TestWaitForMCPReturnsOnceTheServerListens(t *testing.T) {
	// Reserve a free port, then free it: nothing listens there until the test says so.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- WaitForMCP(ctx, "http://"+addr+"/mcp") }()
	select {
	case err := <-done:
		t.Fatalf("the wait ended before anything listened at %s: %v", addr, err)
	case <-time.After(200 * time.Millisecond):
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening at the freed port %s: %v", addr, err)
	}
	defer func() { _ = ln.Close() }()
	if err := <-done; err != nil {
		t.Fatalf("the wait failed after the server listened: %v", err)
	}
}

func TestWaitForMCPFailsNamingTheURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	_ = ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = WaitForMCP(ctx, url)
	if err == nil || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "accepted no connection") {
		t.Fatalf("WaitForMCP = %v, want an error naming %s", err, url)
	}
}

func TestDialAddress(t *testing.T) {
	for _, tc := range []struct{ url, want, err string }{
		{url: "http://127.0.0.1:7777/mcp", want: "127.0.0.1:7777"},
		{url: "http://localhost/mcp", want: "localhost:80"},
		{url: "https://[::1]/mcp", want: "[::1]:443"},
		{url: "unix:///run/mcp.sock", err: `scheme "unix"`},
		{url: "http:///mcp", err: "no host"},
		{url: "http://%zz", err: "invalid MCP URL"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := dialAddress(tc.url)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("dialAddress(%q) = %q, %v; want an error containing %q", tc.url, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("dialAddress(%q) = %q, %v; want %q", tc.url, got, err, tc.want)
			}
		})
	}
}
