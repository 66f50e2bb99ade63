package workspace

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// connectTimeout bounds reaching the proxy and its answer to the CONNECT.
const connectTimeout = 20 * time.Second

// httpsProxy is the pod's egress proxy for https and ssh: https_proxy, else HTTPS_PROXY.
func httpsProxy(getenv func(string) string) string {
	if v := getenv("https_proxy"); v != "" {
		return v
	}
	return getenv("HTTPS_PROXY")
}

// sshProxyCommand is the ssh option that sends an ssh clone through the pod's egress proxy, as a
// CONNECT tunnel opened by this executable (`<self> connect-proxy %h %p`); "" without a proxy.
// The tunnel is checked by host name: ssh gives %h as the URL names it.
func sshProxyCommand(self string, getenv func(string) string) string {
	if httpsProxy(getenv) == "" {
		return ""
	}
	return " -o ProxyCommand=" + shellQuote(shellQuote(self)+" connect-proxy %h %p")
}

// ConnectMain is `wrapper connect-proxy <host> <port>`: ssh's ProxyCommand behind an egress
// proxy. It opens a CONNECT tunnel to host:port through the https proxy of the environment and
// copies stdin into it and the tunnel to stdout. A refusal is written to stderr with the proxy's
// answer (git shows it), and the exit code is 1.
func ConnectMain(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("connect-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if fs.NArg() != 2 {
		_, _ = fmt.Fprintln(stderr, "connect-proxy: usage: connect-proxy <host> <port>")
		return ExitUsage
	}
	conn, rest, err := dialThroughProxy(context.Background(), httpsProxy(getenv), net.JoinHostPort(fs.Arg(0), fs.Arg(1)))
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "connect-proxy:", err)
		return ExitFailed
	}
	defer func() { _ = conn.Close() }()
	// ssh's side ends when ssh closes our stdin; the process ends with the tunnel's far side.
	go func() {
		_, _ = io.Copy(conn, stdin)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	if _, err := io.Copy(stdout, rest); err != nil {
		_, _ = fmt.Fprintln(stderr, "connect-proxy:", err)
		return ExitFailed
	}
	return 0
}

// dialThroughProxy opens a CONNECT tunnel to target through the http proxy at proxyURL. It returns
// the connection and a reader of the tunnel that starts with whatever the proxy sent after its
// answer.
func dialThroughProxy(ctx context.Context, proxyURL, target string) (net.Conn, io.Reader, error) {
	u, err := url.Parse(proxyURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, nil, fmt.Errorf("the egress proxy %q (https_proxy or HTTPS_PROXY) is not an http://host:port URL", proxyURL)
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to reach the egress proxy %s: %w", u.Host, err)
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: http.Header{}}
	if err := req.Write(conn); err != nil {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("failed to ask the egress proxy for %s: %w", target, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("the egress proxy's answer to CONNECT %s: %w", target, err)
	}
	// A 2xx answer to CONNECT has no body (the tunnel follows); a refusal's is read below.
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = conn.Close()
		return nil, nil, fmt.Errorf("the egress proxy refused CONNECT %s: %s: %s", target, resp.Status, strings.TrimSpace(string(body)))
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, br, nil
}
