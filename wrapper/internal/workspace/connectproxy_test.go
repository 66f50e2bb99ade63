package workspace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// connectProxy is a CONNECT proxy on loopback that tunnels to backend for allowed and answers
// 403 with a reason for any other target, like the egress proxy.
func connectProxy(t *testing.T, allowed, backend string) string {
	t.Helper()
	return "http://" + serveLoopback(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil || req.Method != http.MethodConnect {
			return
		}
		if req.Host != allowed {
			body := "tatara egress proxy: blocked: " + req.Host
			_, _ = fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			return
		}
		up, err := net.Dial("tcp", backend)
		if err != nil {
			return
		}
		defer func() { _ = up.Close() }()
		_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() {
			_, _ = io.Copy(up, c)
			_ = up.(*net.TCPConn).CloseWrite()
		}()
		_, _ = io.Copy(c, up)
	})
}

// echoServer answers each connection with "hello " and echoes what it reads until EOF.
func echoServer(t *testing.T) string {
	t.Helper()
	return serveLoopback(t, func(c net.Conn) {
		_, _ = io.WriteString(c, "hello ")
		_, _ = io.Copy(c, c)
	})
}

// serveLoopback listens on loopback until the test ends and runs handle for each connection,
// closing it afterwards; it returns the address.
func serveLoopback(t *testing.T, handle func(net.Conn)) string {
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
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestConnectProxyTunnelsAndReportsRefusals: ssh's ProxyCommand reaches an allowed host:port
// through the proxy both ways, and a refused one fails with exit 1 and the proxy's own reason.
func TestConnectProxyTunnelsAndReportsRefusals(t *testing.T) {
	proxy := connectProxy(t, "git.example.test:22", echoServer(t))
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == "HTTPS_PROXY" {
				return v
			}
			return ""
		}
	}

	var out, errOut bytes.Buffer
	if code := ConnectMain([]string{"git.example.test", "22"}, env(proxy), strings.NewReader("ssh bytes"), &out, &errOut); code != 0 {
		t.Fatalf("allowed: exit %d, stderr %q", code, errOut.String())
	}
	if out.String() != "hello ssh bytes" {
		t.Errorf("allowed: read %q through the tunnel, want %q", out.String(), "hello ssh bytes")
	}

	out.Reset()
	errOut.Reset()
	if code := ConnectMain([]string{"elsewhere.example.test", "22"}, env(proxy), strings.NewReader(""), &out, &errOut); code != ExitFailed {
		t.Errorf("refused: exit %d, want %d", code, ExitFailed)
	}
	if !strings.Contains(errOut.String(), "403") || !strings.Contains(errOut.String(), "blocked: elsewhere.example.test:22") {
		t.Errorf("refused: stderr %q does not carry the proxy's answer", errOut.String())
	}

	for _, bad := range []string{"", "socks5://127.0.0.1:1080", "127.0.0.1:3128"} {
		errOut.Reset()
		if code := ConnectMain([]string{"git.example.test", "22"}, env(bad), strings.NewReader(""), &out, &errOut); code != ExitFailed || !strings.Contains(errOut.String(), "http://host:port") {
			t.Errorf("proxy %q: exit %d, stderr %q, want a failure naming the expected form", bad, code, errOut.String())
		}
	}
}

// TestSSHCloneUsesTheProxyOnlyWithOne: the ssh command gets the ProxyCommand exactly when the pod
// has an https proxy.
func TestSSHCloneUsesTheProxyOnlyWithOne(t *testing.T) {
	if got := sshProxyCommand("/tatara/wrapper", func(string) string { return "" }); got != "" {
		t.Errorf("without a proxy: %q, want none", got)
	}
	got := sshProxyCommand("/tatara/wrapper", func(n string) string {
		if n == "https_proxy" {
			return "http://proxy.team.svc:3128"
		}
		return ""
	})
	if !strings.Contains(got, "ProxyCommand=") || !strings.Contains(got, "/tatara/wrapper") || !strings.Contains(got, "connect-proxy %h %p") {
		t.Errorf("with a proxy: %q", got)
	}
}
