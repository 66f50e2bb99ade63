package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"
)

// mcpDialEvery is how often WaitForMCP tries to connect. A refused connection on loopback costs
// microseconds, so the wait ends within this long of the cli listening.
const mcpDialEvery = 10 * time.Millisecond

// WaitForMCP returns once the MCP server at mcpURL accepts a TCP connection, or an error naming
// the URL when ctx ends first. The cli listens for MCP before it serves anything else, so an
// accepted connection means the agent's first MCP request will be answered: this is what keeps the
// agent from starting before its tools are there, without a kubelet probe between the two
// containers.
func WaitForMCP(ctx context.Context, mcpURL string) error {
	addr, err := dialAddress(mcpURL)
	if err != nil {
		return err
	}
	var d net.Dialer
	var last error
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		last = err
		select {
		case <-ctx.Done():
			if errors.Is(last, context.DeadlineExceeded) || errors.Is(last, context.Canceled) {
				last = ctx.Err()
			}
			return fmt.Errorf("the MCP server at %s accepted no connection: %w", mcpURL, last)
		case <-time.After(mcpDialEvery):
		}
	}
}

// dialAddress is the host:port of an http or https URL, with the scheme's port when it names none.
func dialAddress(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("invalid MCP URL %q: %w", raw, err)
	}
	port := u.Port()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("invalid MCP URL %q: scheme %q, want http or https", raw, u.Scheme)
	case u.Hostname() == "":
		return "", fmt.Errorf("invalid MCP URL %q: no host", raw)
	case port != "":
	case u.Scheme == "http":
		port = "80"
	default:
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}
