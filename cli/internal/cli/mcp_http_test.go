package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"tatara.dev/cli/internal/cli"
	"tatara.dev/testkit/testutil"
)

// The transport tests run the real binary on a loopback listener, as in the agent pod, and speak
// MCP over plain HTTP requests: the agent next to it can send anything, so these are the requests
// it could send.

// mcpProcess is a running `tatara mcp --transport http`.
type mcpProcess struct {
	cmd    *exec.Cmd
	logs   *logLines
	done   <-chan struct{}
	listen string // host:port
	url    string // http://host:port/mcp
}

func startHTTPMCP(t *testing.T, env []string, args ...string) *mcpProcess {
	t.Helper()
	listen := freeAddr(t)
	cmd := exec.Command(tataraBin(t), append([]string{"mcp", "--transport", "http", "--listen", listen}, args...)...)
	cmd.Env = append(os.Environ(), append([]string{"TATARA_PROJECT=proj", "TATARA_TASK=task-1"}, env...)...)
	logs, done := startLogged(t, cmd)
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done; _ = cmd.Wait() })
	testutil.WaitFor(t, "startup log", func() bool {
		select {
		case <-done:
			logs.mu.Lock()
			defer logs.mu.Unlock()
			t.Fatalf("tatara mcp exited at start: %s", strings.Join(logs.raw, "\n"))
		default:
		}
		return logs.find("mcp server started") != nil
	})
	return &mcpProcess{cmd: cmd, logs: logs, done: done, listen: listen, url: "http://" + listen + "/mcp"}
}

// answer is one HTTP response of the MCP endpoint.
type answer struct {
	status  int
	session string
	body    string
}

// rpc sends one JSON-RPC message (a string, or bytes, or an io.Reader for a body of unknown
// length) with the headers a 2025-11-25 client sends, plus extra ("" values delete a header).
func rpc(t *testing.T, method, url string, body any, extra map[string]string) answer {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	case io.Reader:
		r = b
	case nil:
	default:
		t.Fatalf("bad body type %T", body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20251125)
	for k, v := range extra {
		if v == "" && k != "Origin" {
			req.Header.Del(k)
			continue
		}
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	resp, err := rpcClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if method == http.MethodGet && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// An open stream: its status is the answer, its body would never end.
		return answer{status: resp.StatusCode, session: resp.Header.Get("Mcp-Session-Id")}
	}
	text, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, session: resp.Header.Get("Mcp-Session-Id"), body: string(text)}
}

// rpcClient bounds every exchange: a server that wrongly holds a response open fails the test
// instead of hanging it.
var rpcClient = &http.Client{Timeout: 30 * time.Second}

const (
	initializeMsg = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"transport-test","version":"0"}}}`
	pingMsg       = `{"jsonrpc":"2.0","id":2,"method":"ping"}`
)

// initSession opens a session and returns its id.
func initSession(t *testing.T, url string) string {
	t.Helper()
	a := rpc(t, http.MethodPost, url, initializeMsg, nil)
	if a.status != http.StatusOK || a.session == "" {
		t.Fatalf("initialize: status %d, session %q, body %s", a.status, a.session, a.body)
	}
	return a.session
}

// jsonRPCError decodes a JSON-RPC error body; ok is false when the body is not one.
func jsonRPCError(body string) (msg string, ok bool) {
	var e struct {
		JSONRPC string `json:"jsonrpc"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &e) != nil || e.JSONRPC != "2.0" || e.Error == nil {
		return "", false
	}
	return e.Error.Message, true
}

// MCP 2025-11-25, transports: a server MUST validate Origin and answer an invalid one with 403.
// A browser page elsewhere (DNS rebinding, a page on another local port, a sandboxed iframe with
// Origin null) must not drive the tools; a client without an Origin is not a browser.
func TestHTTPOriginValidation(t *testing.T) {
	p := startHTTPMCP(t, nil)
	_, port, _ := strings.Cut(p.listen, ":")
	otherPort := strings.Split(freeAddr(t), ":")[1]
	tests := []struct {
		name   string
		origin *string // nil: no Origin header
		method string
		want   int
	}{
		{name: "no Origin (not a browser)", want: http.StatusOK},
		{name: "the listener itself", origin: ptr("http://127.0.0.1:" + port), want: http.StatusOK},
		{name: "localhost on the listener's port", origin: ptr("http://localhost:" + port), want: http.StatusOK},
		{name: "another site", origin: ptr("http://evil.example"), want: http.StatusForbidden},
		{name: "another site, GET", origin: ptr("http://evil.example"), method: http.MethodGet, want: http.StatusForbidden},
		{name: "another site, DELETE", origin: ptr("http://evil.example"), method: http.MethodDelete, want: http.StatusForbidden},
		{name: "null (sandboxed frame, file:)", origin: ptr("null"), want: http.StatusForbidden},
		{name: "empty", origin: ptr(""), want: http.StatusForbidden},
		{name: "loopback, another port", origin: ptr("http://127.0.0.1:" + otherPort), want: http.StatusForbidden},
		{name: "loopback, default port", origin: ptr("http://127.0.0.1"), want: http.StatusForbidden},
		{name: "https on the listener's port", origin: ptr("https://127.0.0.1:" + port), want: http.StatusForbidden},
		{name: "another loopback address", origin: ptr("http://127.0.0.2:" + port), want: http.StatusForbidden},
		{name: "look-alike host", origin: ptr("http://127.0.0.1." + port + ".evil.example:" + port), want: http.StatusForbidden},
		{name: "localhost subdomain", origin: ptr("http://localhost.evil.example:" + port), want: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, body := tt.method, any(initializeMsg)
			headers := map[string]string{}
			if method == "" {
				method = http.MethodPost
			} else {
				// GET and DELETE carry a valid session: only the Origin is wrong.
				body, headers["Mcp-Session-Id"] = nil, initSession(t, p.url)
				headers["Accept"] = "text/event-stream"
			}
			if tt.origin != nil {
				headers["Origin"] = *tt.origin
			}
			if tt.want == http.StatusOK && method == http.MethodPost {
				a := rpc(t, method, p.url, body, headers)
				if a.status != http.StatusOK || a.session == "" {
					t.Fatalf("status %d session %q, want 200 and a session; body %s", a.status, a.session, a.body)
				}
				return
			}
			a := rpc(t, method, p.url, body, headers)
			if a.status != tt.want {
				t.Fatalf("status %d, want %d; body %s", a.status, tt.want, a.body)
			}
			if a.session != "" {
				t.Errorf("a refused request got session %q", a.session)
			}
			msg, ok := jsonRPCError(a.body)
			if !ok || !strings.Contains(msg, "Origin") || !strings.Contains(msg, "not allowed") {
				t.Errorf("body %q, want a JSON-RPC error saying the Origin is not allowed", a.body)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// initializeSession initializes c on 2025-11-25, the latest revision with sessions and GET
// streams (the SDK's default, 2026-07-28, has neither).
func initializeSession(t *testing.T, c *client.Client) {
	t.Helper()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "transport-test", Version: "0"}
	if _, err := c.Initialize(context.Background(), init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if c.GetSessionId() == "" {
		t.Fatal("the SDK client got no session id")
	}
}

// Sessions are real: an id the server never issued, or one a DELETE ended, gets 404 on every
// method, as MCP 2025-11-25 requires; a request without one (other than initialize) gets 400.
func TestHTTPSessionsAreReal(t *testing.T) {
	p := startHTTPMCP(t, nil)
	live := initSession(t, p.url)
	ended := initSession(t, p.url)
	if a := rpc(t, http.MethodDelete, p.url, nil, map[string]string{"Mcp-Session-Id": ended}); a.status != http.StatusOK {
		t.Fatalf("DELETE of a live session: status %d, body %s", a.status, a.body)
	}
	const neverIssued = "mcp-session-2b0f4c3e-8f5d-4a57-9d8e-6c1f0a9b7e21"
	tests := []struct {
		name    string
		method  string
		session string
		want    int
	}{
		{"ping, live session", http.MethodPost, live, http.StatusOK},
		{"ping, ended session", http.MethodPost, ended, http.StatusNotFound},
		{"ping, never issued", http.MethodPost, neverIssued, http.StatusNotFound},
		{"ping, malformed", http.MethodPost, "not-a-session", http.StatusNotFound},
		{"ping, no session", http.MethodPost, "", http.StatusBadRequest},
		{"GET, ended session", http.MethodGet, ended, http.StatusNotFound},
		{"GET, never issued", http.MethodGet, neverIssued, http.StatusNotFound},
		{"GET, no session", http.MethodGet, "", http.StatusBadRequest},
		{"DELETE, ended session", http.MethodDelete, ended, http.StatusNotFound},
		{"DELETE, never issued", http.MethodDelete, neverIssued, http.StatusNotFound},
		{"DELETE, no session", http.MethodDelete, "", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			headers := map[string]string{"Mcp-Session-Id": tt.session}
			if tt.method == http.MethodPost {
				body = pingMsg
			} else {
				headers["Accept"] = "text/event-stream"
			}
			a := rpc(t, tt.method, p.url, body, headers)
			if a.status != tt.want {
				t.Fatalf("status %d, want %d; body %s", a.status, tt.want, a.body)
			}
		})
	}
	// The SDK client on a session-based revision ends its session on Close; the id is dead afterwards.
	c, err := client.NewStreamableHttpClient(p.url)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	initializeSession(t, c)
	id := c.GetSessionId()
	if _, err := c.ListTools(context.Background(), mcp.ListToolsRequest{}); err != nil {
		t.Fatalf("tools/list on the SDK client's live session: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if a := rpc(t, http.MethodPost, p.url, pingMsg, map[string]string{"Mcp-Session-Id": id}); a.status != http.StatusNotFound {
		t.Errorf("ping after the SDK client closed session %s: status %d, want 404", id, a.status)
	}
}

// SIGTERM with a client holding a GET (SSE) stream open: the streams are closed first, so the
// process exits in a small fraction of --shutdown-timeout instead of waiting it out. The timeout
// is long (waiting it out takes minutes, a clean shutdown milliseconds), so a loaded machine
// cannot blur the two.
func TestHTTPShutdownClosesStreams(t *testing.T) {
	const timeout = 2 * time.Minute
	p := startHTTPMCP(t, nil, "--shutdown-timeout", timeout.String())
	// The SDK client with its listening GET stream, as an agent CLI keeps it.
	c, err := client.NewStreamableHttpClient(p.url, transport.WithContinuousListening()) //nolint:staticcheck // deprecated for 2026-07-28 only; 2025-11-25 clients hold this stream
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	initializeSession(t, c)
	// And a raw GET stream, to see it end.
	sid := initSession(t, p.url)
	req, _ := http.NewRequest(http.MethodGet, p.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20251125)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET stream: status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	streamEnded := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); close(streamEnded) }()

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v (want 0)", err)
	}
	elapsed := time.Since(start)
	t.Logf("shutdown with open streams took %v, %.3f of --shutdown-timeout %v", elapsed, float64(elapsed)/float64(timeout), timeout)
	if ratio := float64(elapsed) / float64(timeout); ratio > 0.5 {
		t.Errorf("shutdown took %v, %.2f of the %v --shutdown-timeout; want well under half: open streams were waited out", elapsed, ratio, timeout)
	}
	select {
	case <-streamEnded:
	case <-time.After(timeout):
		t.Errorf("the GET stream is still open after the process exited")
	}
}

// The body of a request to /mcp is bounded (--max-body-bytes, default 8 MiB): one larger body is
// refused with a JSON-RPC error naming the limit, before it is buffered; a 5 MB tool argument,
// far beyond any real one, still passes.
func TestHTTPBodyLimit(t *testing.T) {
	var received atomic.Int64
	memory := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		received.Store(n)
		_, _ = io.WriteString(w, `{"id":"m1"}`)
	}))
	defer memory.Close()
	tests := []struct {
		name    string
		flags   []string
		limit   int
		chunked bool // no Content-Length: the limit must hold while reading
	}{
		{name: "default", limit: 8 << 20},
		{name: "default, chunked", limit: 8 << 20, chunked: true},
		{name: "flag", flags: []string{"--max-body-bytes", "1048576"}, limit: 1 << 20},
		{name: "flag, chunked", flags: []string{"--max-body-bytes", "1048576"}, limit: 1 << 20, chunked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startHTTPMCP(t, []string{"TATARA_MEMORY_URL=" + memory.URL}, tt.flags...)
			sid := initSession(t, p.url)
			headers := map[string]string{"Mcp-Session-Id": sid}

			over := toolCall(t, "create_memory", map[string]any{"content": ""}, tt.limit+1)
			var body any = over
			if tt.chunked {
				body = io.MultiReader(bytes.NewReader(over)) // hides the length
			}
			a := rpc(t, http.MethodPost, p.url, body, headers)
			if a.status != http.StatusRequestEntityTooLarge {
				t.Errorf("a %d-byte body: status %d, want 413; body %.300s", len(over), a.status, a.body)
			}
			msg, ok := jsonRPCError(a.body)
			if !ok || !strings.Contains(msg, fmt.Sprint(tt.limit)) || !strings.Contains(msg, "--max-body-bytes") {
				t.Errorf("a %d-byte body: %.300q, want a JSON-RPC error naming the %d-byte limit and --max-body-bytes", len(over), a.body, tt.limit)
			}
			if tt.limit < 5_000_000 {
				return
			}
			content := strings.Repeat("x", 5_000_000)
			a = rpc(t, http.MethodPost, p.url, toolCall(t, "create_memory", map[string]any{"content": content}, 0), headers)
			if a.status != http.StatusOK || strings.Contains(a.body, `"isError":true`) || !strings.Contains(a.body, "m1") {
				t.Fatalf("a 5 MB argument: status %d, body %.300s", a.status, a.body)
			}
			if received.Load() < 5_000_000 {
				t.Errorf("the memory backend received %d bytes, want the 5 MB argument", received.Load())
			}
		})
	}
}

// toolCall encodes a tools/call request; with size > 0 the first string argument is padded so
// the message is exactly size bytes.
func toolCall(t *testing.T, tool string, args map[string]any, size int) []byte {
	t.Helper()
	encode := func() []byte {
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
			"params": map[string]any{"name": tool, "arguments": args}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := encode()
	if size <= 0 {
		return b
	}
	for k, v := range args {
		if s, ok := v.(string); ok {
			args[k] = s + strings.Repeat("x", size-len(b))
			break
		}
	}
	b = encode()
	if len(b) != size {
		t.Fatalf("padded message is %d bytes, want %d", len(b), size)
	}
	return b
}

// A transport flag that cannot work stops `tatara mcp` at start, naming the flag.
func TestMCPRejectsBadTransportFlags(t *testing.T) {
	tests := []struct {
		flag, want string
	}{
		{"--max-body-bytes=0", "invalid --max-body-bytes 0"},
		{"--max-body-bytes=-1", "invalid --max-body-bytes -1"},
		{"--shutdown-timeout=0s", "invalid --shutdown-timeout 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cli.Execute([]string{"mcp", "--transport", "http", "--listen", "127.0.0.1:0", tt.flag}, &stdout, &stderr); code != 1 {
				t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, stderr.String())
			}
		})
	}
}

// TestHTTPUnknownProtocolVersionKeepsSessions: only a revision the SDK knows to be sessionless
// skips the session check. mcp-go compares versions as strings, so "9" or "2099-01-01" would
// otherwise pass for a newer revision and let a never-issued session id through.
func TestHTTPUnknownProtocolVersionKeepsSessions(t *testing.T) {
	p := startHTTPMCP(t, nil)
	const neverIssued = "mcp-session-00000000-0000-4000-8000-000000000000"
	for _, version := range []string{"9", "2099-01-01"} {
		a := rpc(t, http.MethodPost, p.url, pingMsg, map[string]string{"MCP-Protocol-Version": version, "Mcp-Session-Id": neverIssued})
		if a.status != http.StatusNotFound {
			t.Errorf("ping with MCP-Protocol-Version %q and a never-issued session: status %d %s, want 404", version, a.status, a.body)
		}
	}
}
