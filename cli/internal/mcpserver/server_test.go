package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tatara.dev/cli/internal/backend"
	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/internal/issuerecord"
	"tatara.dev/cli/pkg/internalissue"
)

// wantCount is the catalog's count for a profile (every tool for "" and unknown names); the
// counts themselves are pinned once, in the catalog's tests.
func wantCount(profile string) int {
	if tools, ok := catalog.ProfileTools(profile); ok {
		return len(tools)
	}
	return len(catalog.All())
}

func TestToolsListPerProfile(t *testing.T) {
	for _, profile := range append(catalog.ProfileNames(), "", "no-such-profile") {
		want := wantCount(profile)
		t.Run("profile="+profile, func(t *testing.T) {
			h := newHarness(t, profile)
			names := h.listNames(t)
			if len(names) != want {
				t.Fatalf("tools/list returned %d tools, want %d", len(names), want)
			}
			if !slices.IsSorted(names) {
				t.Errorf("tools/list order is not deterministic (sorted): %v", names)
			}
			allowed, known := catalog.ProfileTools(profile)
			for _, n := range names {
				if known && !allowed[n] {
					t.Errorf("%s listed but not in profile %q", n, profile)
				}
			}
			label := profile
			if !known {
				label = FailOpenProfile
			}
			if got := testutil.ToFloat64(h.srv.cfg.Metrics.RegisteredTools.WithLabelValues(label)); got != float64(want) {
				t.Errorf("tatara_mcp_registered_tools{profile=%q} = %v, want %d", label, got, want)
			}
			warned := strings.Contains(h.logs.String(), `"level":"WARN"`) && strings.Contains(h.logs.String(), "fail-open")
			if warned == known {
				t.Errorf("fail-open WARN logged=%t for known=%t profile %q; log: %s", warned, known, profile, h.logs.String())
			}
		})
	}
}

// Every listed tool carries all four hints explicitly: mcp-go's defaults would claim
// destructive and open-world for everything.
func TestToolsListAnnotationsExplicit(t *testing.T) {
	h := newHarness(t, "")
	res, err := h.client.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		raw, _ := json.Marshal(tool.Annotations)
		for _, hint := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
			if !strings.Contains(string(raw), `"`+hint+`"`) {
				t.Errorf("%s: annotation %s missing in %s", tool.Name, hint, raw)
			}
		}
		if tool.Name == "get_memory" && (*tool.Annotations.DestructiveHint || !*tool.Annotations.ReadOnlyHint) {
			t.Errorf("get_memory must be read-only and non-destructive: %s", raw)
		}
	}
}

func TestToolsListNeedsNoToken(t *testing.T) {
	h := newHarness(t, "implement", func(c *Config) {
		c.Backends = map[catalog.Target]*backend.Client{} // nothing configured, no token
	})
	if got, want := len(h.listNames(t)), wantCount("implement"); got != want {
		t.Fatalf("tools/list without any backend or token = %d tools, want %d", got, want)
	}
	res := h.call(t, "task_get", map[string]any{})
	if !res.IsError || !strings.Contains(resultText(res), "TATARA_OPERATOR_URL is not set") {
		t.Errorf("task_get without operator URL: isError=%t %q", res.IsError, resultText(res))
	}
}

// TestReportInternalIssueRecordsWithoutWaiting: a valid report goes to the operator's record, and
// the agent's call is answered while the operator still holds that request: an operator that is
// slow or down delays no report. An invalid report is not sent.
func TestReportInternalIssueRecordsWithoutWaiting(t *testing.T) {
	got := make(chan internalissue.Report, 2)
	release := make(chan struct{})
	operator := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep internalissue.Report
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			t.Error(err)
		}
		got <- rep
		<-release // the operator answers only once the test has its tool result
		w.WriteHeader(http.StatusCreated)
	}))
	defer operator.Close()
	fwd := issuerecord.New(issuerecord.Config{Operator: &backend.Client{Name: "operator", BaseURL: operator.URL}, Task: "task-1"})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-fwd.Done() }()
	defer close(release) // before the forwarder's stop, which lets its request end
	go fwd.Run(ctx)
	h := newHarness(t, "implement", func(c *Config) { c.RecordIssue = fwd.Send })

	if res := h.call(t, "report_internal_issue", map[string]any{"category": "bogus", "description": "x"}); !res.IsError {
		t.Fatalf("unknown category accepted: %s", resultText(res))
	}
	res := h.call(t, "report_internal_issue", map[string]any{"category": "workspace_broken", "description": "clone failed", "offending_tool": "git"})
	if res.IsError {
		t.Fatalf("report rejected: %s", resultText(res))
	}
	want := internalissue.Report{Category: "workspace_broken", Severity: "error", Description: "clone failed", OffendingTool: "git"}
	if rep := <-got; rep != want {
		t.Fatalf("the operator got %+v, want %+v (the default severity filled in)", rep, want)
	}
}

func TestReportInternalIssueEndToEnd(t *testing.T) {
	h := newHarness(t, "brainstorm")
	metricsSrv := httptest.NewServer(promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{}))
	defer metricsSrv.Close()

	res := h.call(t, "report_internal_issue", map[string]any{
		"category": "tool_error", "severity": "error", "description": "code_search answered 500",
		"offending_tool": "code_search", "resource_id": "repo-a"})
	if res.IsError {
		t.Fatalf("report rejected: %s", resultText(res))
	}
	res = h.call(t, "report_internal_issue", map[string]any{"category": "auth", "severity": "warn", "description": "token expired once"})
	if res.IsError {
		t.Fatalf("report rejected: %s", resultText(res))
	}
	res = h.call(t, "report_internal_issue", map[string]any{"category": "bogus", "description": "x"})
	if !res.IsError || !strings.Contains(resultText(res), `"category"`) {
		t.Fatalf("unknown category: isError=%t %q, want an error naming category", res.IsError, resultText(res))
	}

	resp, err := http.Get(metricsSrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, line := range []string{
		`tatara_mcp_internal_issue_total{category="tool_error",severity="error"} 1`,
		`tatara_mcp_internal_issue_total{category="auth",severity="warn"} 1`,
		`tatara_mcp_internal_issue_total{category="other",severity="error"} 0`,
		`tatara_mcp_tool_calls_total{outcome="success",tool="report_internal_issue"} 2`,
		`tatara_mcp_tool_calls_total{outcome="invalid_arguments",tool="report_internal_issue"} 1`,
		fmt.Sprintf(`tatara_mcp_registered_tools{profile="brainstorm"} %d`, wantCount("brainstorm")),
	} {
		if !strings.Contains(string(text), line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}

	var levels []string
	for _, rec := range h.logs.records(t) {
		if rec["msg"] != "internal issue reported" {
			continue
		}
		levels = append(levels, rec["level"].(string)+":"+rec["category"].(string))
		if rec["project"] != "proj" || rec["task"] != "task-1" {
			t.Errorf("report log lacks project/task context: %v", rec)
		}
	}
	if want := []string{"ERROR:tool_error", "WARN:auth"}; !slices.Equal(levels, want) {
		t.Errorf("report log lines = %v, want %v", levels, want)
	}
}

func TestBackendFailuresAreToolErrors(t *testing.T) {
	long := strings.Repeat("x", 5000)
	tests := []struct {
		name     string
		status   int
		response string
		delay    time.Duration
		down     bool
		want     []string
		notWant  string
	}{
		{name: "non-2xx with body", status: 503, response: `{"error":"index rebuilding"}`,
			want: []string{"503 Service Unavailable", "GET /code-graph/stats", "index rebuilding"}},
		{name: "long body is bounded", status: 500, response: long, want: []string{"500 Internal Server Error", "xxx..."}, notWant: long},
		{name: "slow backend times out", delay: 2 * time.Second, want: []string{"did not answer", "in time"}},
		{name: "backend down", down: true, want: []string{"failed to reach memory backend"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, "implement", func(c *Config) {
				// Fast retries: DefaultRetry's backoff would make these cases take seconds.
				for _, b := range c.Backends {
					b.Retry = backend.Retry{Attempts: 3, Base: 5 * time.Millisecond, Max: 10 * time.Millisecond}
				}
				// Only the slow case may meet the deadline; the others keep the default
				// so that their own error, not a timeout, is what they report.
				if tt.delay > 0 {
					c.CallTimeout = 200 * time.Millisecond
				}
			})
			h.backend.mu.Lock()
			h.backend.status, h.backend.response, h.backend.delay = tt.status, tt.response, tt.delay
			h.backend.mu.Unlock()
			if tt.down {
				h.backend.servers[catalog.TargetMemory].Close()
			}
			res := h.call(t, "code_stats", map[string]any{"repo": "r"})
			text := resultText(res)
			if !res.IsError {
				t.Fatalf("want a tool error, got %q", text)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("error %q lacks %q", text, w)
				}
			}
			if tt.notWant != "" && strings.Contains(text, tt.notWant) {
				t.Errorf("error quotes the whole %d-byte body", len(tt.notWant))
			}
			if got := testutil.ToFloat64(h.srv.cfg.Metrics.ToolCalls.WithLabelValues("code_stats", "backend_error")); got != 1 {
				t.Errorf("backend_error count = %v, want 1", got)
			}
		})
	}
}

func TestBadArgumentsAreToolErrors(t *testing.T) {
	h := newHarness(t, "")
	tests := []struct {
		tool string
		args any
		want string
	}{
		{"code_search", map[string]any{"repo": "r"}, `argument "query": is required`},
		{"code_search", map[string]any{"repo": "r", "query": "q", "extra": 1}, `argument "extra": is not an argument of code_search`},
		{"pr_outcome", map[string]any{"outcome": "won"}, `argument "outcome": must be one of`},
		{"code_search", "not an object", "arguments must be a JSON object"},
	}
	for _, tt := range tests {
		res := h.call(t, tt.tool, tt.args)
		if !res.IsError || !strings.Contains(resultText(res), tt.want) {
			t.Errorf("%s(%v): isError=%t %q, want %q", tt.tool, tt.args, res.IsError, resultText(res), tt.want)
		}
	}
	if seen := h.backend.take(); len(seen) != 0 {
		t.Errorf("invalid calls reached the backend: %+v", seen)
	}
}

// chat_wait_messages may be held open by the chat service for timeout_seconds: the server
// extends that call's deadline, and only that call's.
func TestWaitToolExtendsTimeout(t *testing.T) {
	h := newHarness(t, "brainstorm", func(c *Config) { c.CallTimeout = 200 * time.Millisecond })
	h.backend.mu.Lock()
	h.backend.delay = 600 * time.Millisecond
	h.backend.mu.Unlock()
	if res := h.call(t, "chat_wait_messages", map[string]any{"room": "r1", "timeout_seconds": 2}); res.IsError {
		t.Errorf("a wait within timeout_seconds failed: %s", resultText(res))
	}
	if res := h.call(t, "chat_read_messages", map[string]any{"room": "r1"}); !res.IsError || !strings.Contains(resultText(res), "in time") {
		t.Errorf("a plain call slower than --call-timeout must time out: isError=%t %q", res.IsError, resultText(res))
	}
}

// A task or project argument of the wrong type is the agent's mistake, not an omission: it must
// be refused with an error naming the field, never replaced by the pod's own task or project
// (a comment meant for another task would land on this one's merge request).
func TestWrongTypedDefaultedArgumentsAreRefused(t *testing.T) {
	h := newHarness(t, "")
	wrong := []struct {
		name  string
		value any
	}{{"number", 12345}, {"bool", true}, {"array", []any{"t2"}}, {"object", map[string]any{"name": "t2"}}}
	checked := 0
	for _, tool := range catalog.All() {
		for _, a := range tool.Args {
			if a.FromEnv == "" {
				continue
			}
			checked++
			for _, w := range wrong {
				t.Run(tool.Name+"/"+a.Name+"="+w.name, func(t *testing.T) {
					// A call that is valid but for this one argument, e.g. comment {"task":12345,"body":"b"}.
					args := validArgs(t, tool.Name)
					args[a.Name] = w.value
					res := h.call(t, tool.Name, args)
					want := `argument "` + a.Name + `": must be a string`
					if !res.IsError || !strings.Contains(resultText(res), want) {
						t.Errorf("isError=%t %q, want an error containing %q", res.IsError, resultText(res), want)
					}
					if seen := h.backend.take(); len(seen) != 0 {
						t.Errorf("a wrong-typed %s reached the backend: %+v", a.Name, seen)
					}
				})
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d defaulted arguments in the catalog; the test expects the ~20 task/project arguments", checked)
	}
}

// TestFirstRequestAndCallAreLoggedOnce: the first MCP request and the first tool call each leave
// one log line, however many follow.
func TestFirstRequestAndCallAreLoggedOnce(t *testing.T) {
	h := newHarness(t, "implement")
	count := func(msg string) (n int, last map[string]any) {
		for _, rec := range h.logs.records(t) {
			if rec["msg"] == msg {
				n, last = n+1, rec
			}
		}
		return n, last
	}
	if n, _ := count("first mcp request"); n != 1 {
		t.Fatalf("after initialize: %d 'first mcp request' lines, want 1", n)
	}
	if n, _ := count("first tool call"); n != 0 {
		t.Fatalf("before any call: %d 'first tool call' lines, want 0", n)
	}
	h.listNames(t)
	h.call(t, "task_get", map[string]any{})
	h.call(t, "task_get", map[string]any{})
	if n, _ := count("first mcp request"); n != 1 {
		t.Fatalf("after more requests: %d 'first mcp request' lines, want 1", n)
	}
	if n, rec := count("first tool call"); n != 1 || rec["tool"] != "task_get" {
		t.Fatalf("after two calls: %d 'first tool call' lines (last %v), want 1 naming task_get", n, rec)
	}
}
