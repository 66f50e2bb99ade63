package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"tatara.dev/cli/internal/catalog"
	"tatara.dev/testkit/testutil"
)

// tataraBin is the real binary, built once for the process tests.
func tataraBin(t testing.TB) string {
	t.Helper()
	return testutil.BuildBinary(t, ".", "tatara.dev/cli/cmd/tatara")
}

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

func initialize(t *testing.T, c *client.Client) {
	t.Helper()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "binary-test", Version: "0"}
	res, err := c.Initialize(context.Background(), req)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if res.ServerInfo.Name != "tatara" {
		t.Fatalf("server name %q, want tatara", res.ServerInfo.Name)
	}
}

func listCount(t *testing.T, c *client.Client) int {
	t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	return len(res.Tools)
}

// profileCount is what the catalog says a profile registers: every tool for "" and unknown names.
func profileCount(profile string) int {
	if tools, ok := catalog.ProfileTools(profile); ok {
		return len(tools)
	}
	return len(catalog.All())
}

// The profile comes from TATARA_TOOL_PROFILE; --tool-profile overrides it. Counts come from the
// catalog (pinned by hand once, in the catalog's own tests).
func TestStdioTransportPerProfile(t *testing.T) {
	type row struct {
		env, flag string
		want      int
	}
	var tests []row
	for _, p := range append(catalog.ProfileNames(), "", "bogus") {
		tests = append(tests, row{p, "", profileCount(p)})
	}
	tests = append(tests, row{"implement", "review", profileCount("review")}, row{"bogus", "triage", profileCount("triage")})
	bin := tataraBin(t)
	for _, tt := range tests {
		t.Run(tt.env+"/"+tt.flag, func(t *testing.T) {
			args := []string{"mcp", "--transport", "stdio"}
			if tt.flag != "" {
				args = append(args, "--tool-profile", tt.flag)
			}
			c, err := client.NewStdioMCPClient(bin, []string{"TATARA_TOOL_PROFILE=" + tt.env}, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			initialize(t, c)
			if got := listCount(t, c); got != tt.want {
				t.Errorf("tools/list = %d tools, want %d", got, tt.want)
			}
		})
	}
}

func freeAddr(t *testing.T) string { return freeAddrs(t, 1)[0] }

// freeAddrs returns n distinct free loopback addresses: each is held until all are chosen, so two
// of one process (its MCP and metrics ports) never come out the same.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ln.Close() }()
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// startLogged starts cmd and collects its stderr, JSON lines parsed, until it exits; the channel
// closes when stderr is drained.
func startLogged(t *testing.T, cmd *exec.Cmd) (*logLines, <-chan struct{}) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		// Room for any line the process could write, so an overlong one is seen, not dropped.
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var rec map[string]any
			logs.mu.Lock()
			logs.raw = append(logs.raw, sc.Text())
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				logs.lines = append(logs.lines, rec)
			}
			logs.mu.Unlock()
		}
	}()
	return logs, done
}

type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   []string
}

func (l *logLines) find(msg string) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, rec := range l.lines {
		if rec["msg"] == msg {
			return rec
		}
	}
	return nil
}

// The HTTP transport as the agent pod runs it: streamable HTTP on --listen, /metrics on
// --metrics-addr defaulted from TATARA_METRICS_ADDR, JSON logs on stderr, SIGTERM stops it.
func TestHTTPTransportMetricsLogsAndShutdown(t *testing.T) {
	const taskToken = "tt-4f9a1c7e2b8d"
	addrs := freeAddrs(t, 2)
	listen, metricsAddr := addrs[0], addrs[1]
	cmd := exec.Command(tataraBin(t), "mcp", "--transport", "http", "--listen", listen)
	cmd.Env = append(os.Environ(), "TATARA_TOOL_PROFILE=brainstorm", "TATARA_METRICS_ADDR="+metricsAddr,
		"TATARA_PROJECT=proj", "TATARA_TASK=task-9", "TATARA_TOKEN="+taskToken)
	logs, logsDone := startLogged(t, cmd)
	defer func() { _ = cmd.Process.Kill() }()
	testutil.WaitFor(t, "startup log", func() bool { return logs.find("mcp server started") != nil })
	brainstorm, _ := catalog.ProfileTools("brainstorm")
	want := len(brainstorm)
	start := logs.find("mcp server started")
	if start["profile"] != "brainstorm" || start["resolved_profile"] != "brainstorm" || start["registered_tools"] != float64(want) || start["level"] != "INFO" {
		t.Errorf("startup log = %v", start)
	}

	c, err := client.NewStreamableHttpClient("http://" + listen + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	initialize(t, c)
	if got := listCount(t, c); got != want {
		t.Errorf("tools/list = %d, want %d", got, want)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "report_internal_issue"
	req.Params.Arguments = map[string]any{"category": "workspace_broken", "severity": "warn", "description": "git clone failed with token " + taskToken + " and header Authorization: Bearer abcdef123456"}
	res, err := c.CallTool(context.Background(), req)
	if err != nil || res.IsError {
		t.Fatalf("report: %v %+v", err, res)
	}

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`tatara_mcp_registered_tools{profile="brainstorm"} %d`, want),
		`tatara_mcp_internal_issue_total{category="workspace_broken",severity="warn"} 1`,
		`tatara_mcp_build_info{`,
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	report := logs.find("internal issue reported")
	if report == nil || report["level"] != "WARN" || report["task"] != "task-9" || report["category"] != "workspace_broken" {
		t.Errorf("report log = %v", report)
	}
	// The description is agent-supplied: the Task token and the bearer credential are masked, the
	// rest of the text is kept.
	if d, _ := report["description"].(string); !strings.Contains(d, "git clone failed with token [REDACTED]") || !strings.Contains(d, "Bearer [REDACTED]") {
		t.Errorf("report description = %q, want the token and the bearer credential masked", d)
	}
	// The agent's text is bounded in the log: a 1 MiB description, and a call whose argument
	// error quotes 1 MiB, each make a line of a few KiB at most.
	long := strings.Repeat("x", 1<<20)
	req.Params.Arguments = map[string]any{"category": "tool_error", "severity": "error", "description": long}
	if res, err := c.CallTool(context.Background(), req); err != nil || res.IsError {
		t.Fatalf("long report: %v %+v", err, res)
	}
	bad := mcp.CallToolRequest{}
	bad.Params.Name = "report_internal_issue"
	bad.Params.Arguments = map[string]any{"category": long, "description": "d"}
	if res, err := c.CallTool(context.Background(), bad); err != nil || !res.IsError {
		t.Fatalf("report with a 1 MiB category: %v %+v, want a tool error", err, res)
	}
	testutil.WaitFor(t, "the long report's log line", func() bool {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		for _, rec := range logs.lines {
			if rec["msg"] == "internal issue reported" && rec["category"] == "tool_error" {
				return true
			}
		}
		return false
	})
	logs.mu.Lock()
	longest := 0
	for _, l := range logs.raw {
		longest = max(longest, len(l))
		if strings.Contains(l, taskToken) || strings.Contains(l, "abcdef123456") {
			t.Errorf("a secret reached the log: %s", l)
		}
	}
	logs.mu.Unlock()
	if longest > 4<<10 {
		t.Errorf("the longest log line is %d bytes, want at most 4 KiB", longest)
	}
	healthz, err := http.Get("http://" + metricsAddr + "/healthz")
	if err != nil {
		t.Fatalf("/healthz: %v", err)
	}
	_ = healthz.Body.Close()
	if healthz.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", healthz.StatusCode)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-logsDone
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v (want 0); log: %s", err, strings.Join(logs.raw, "\n"))
	}
	if logs.find("mcp server stopping") == nil {
		t.Errorf("no shutdown log line")
	}
}

func TestToolsCommand(t *testing.T) {
	bin := tataraBin(t)
	out, err := exec.Command(bin, "tools", "--profile", "review", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		ResolvedProfile string `json:"resolvedProfile"`
		Count           int    `json:"count"`
		SchemaBytes     int    `json:"schemaBytes"`
		Tools           []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("tools --json: %v\n%s", err, out)
	}
	if want := profileCount("review"); info.ResolvedProfile != "review" || info.Count != want || len(info.Tools) != want || info.SchemaBytes == 0 {
		t.Errorf("tools --profile review --json = %+v", info)
	}
	if out, err := exec.Command(bin, "mcp", "--transport", "carrier-pigeon").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), `invalid --transport "carrier-pigeon"`) {
		t.Errorf("bad transport: err=%v out=%s", err, out)
	}
}
