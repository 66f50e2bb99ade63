package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/cli/internal/backend"
	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/internal/obs"
	"tatara.dev/testkit/testutil"
)

// recorded is one request a fake backend saw.
type recorded struct {
	Backend string
	Method  string
	URI     string
	Body    string
	Auth    string
	Project string
}

// backends is a set of real HTTP servers standing in for memory, chat and operator; they
// record every request and answer with the configured status and body.
type backends struct {
	mu       sync.Mutex
	seen     []recorded
	status   int
	response string
	delay    time.Duration
	servers  map[catalog.Target]*httptest.Server
}

func newBackends(t testing.TB) *backends {
	b := &backends{status: http.StatusOK, response: `{"ok":true}`, servers: map[catalog.Target]*httptest.Server{}}
	for _, target := range []catalog.Target{catalog.TargetMemory, catalog.TargetChat, catalog.TargetOperator} {
		name := string(target)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			b.mu.Lock()
			b.seen = append(b.seen, recorded{Backend: name, Method: r.Method, URI: r.URL.RequestURI(), Body: string(body),
				Auth: r.Header.Get("Authorization"), Project: r.Header.Get("X-Tatara-Project")})
			status, response, delay := b.status, b.response, b.delay
			b.mu.Unlock()
			if delay > 0 {
				select {
				case <-time.After(delay):
				case <-r.Context().Done():
					return
				}
			}
			w.WriteHeader(status)
			_, _ = io.WriteString(w, response)
		}))
		t.Cleanup(srv.Close)
		b.servers[target] = srv
	}
	return b
}

func (b *backends) clients(token string) map[catalog.Target]*backend.Client {
	return backend.TaskClients(b.servers[catalog.TargetMemory].URL, b.servers[catalog.TargetChat].URL,
		b.servers[catalog.TargetOperator].URL, "proj", "task-1", token, nil, nil, nil)
}

func (b *backends) take() []recorded {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := b.seen
	b.seen = nil
	return seen
}

// harness is a server under test reached by a real MCP client over streamable HTTP.
type harness struct {
	srv     *Server
	client  *client.Client
	reg     *prometheus.Registry
	logs    *syncBuffer
	backend *backends
}

// syncBuffer is the server's log, written by its handlers while the test reads it.
type syncBuffer struct{ testutil.SyncBuffer }

// records returns the JSON log records, failing the test on a line that is not JSON.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := json.NewDecoder(bytes.NewReader([]byte(s.String())))
	for dec.More() {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("log is not JSON lines: %v", err)
		}
		out = append(out, rec)
	}
	return out
}

func newHarness(t testing.TB, profile string, mutate ...func(*Config)) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry(), logs: &syncBuffer{}, backend: newBackends(t)}
	cfg := Config{
		Profile:     profile,
		Backends:    h.backend.clients("secret-token"),
		Context:     map[string]string{catalog.EnvProject: "proj", catalog.EnvTask: "task-1"},
		CallTimeout: 5 * time.Second,
		Version:     "test",
		Logger:      slog.New(slog.NewJSONHandler(h.logs, nil)),
		Metrics:     obs.NewMetrics(h.reg),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h.srv = New(cfg)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h.srv.NewHTTPHandler(HTTPConfig{})) // the transport tatara mcp serves
	httpSrv := httptest.NewServer(mux)
	t.Cleanup(httpSrv.Close)

	c, err := client.NewStreamableHttpClient(httpSrv.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "0"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if res.ServerInfo.Name != ServerName {
		t.Fatalf("server name = %q, want %q", res.ServerInfo.Name, ServerName)
	}
	h.client = c
	return h
}

func (h *harness) listNames(t testing.TB) []string {
	t.Helper()
	res, err := h.client.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	names := make([]string, 0, len(res.Tools))
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

func (h *harness) call(t testing.TB, name string, args any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := h.client.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("tools/call %s: protocol error %v", name, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b bytes.Buffer
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
