package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	tutil "tatara.dev/testkit/testutil"
)

// build returns the binaries, built once for the process: the wrapper itself and the stand-in
// agent from testkit (it stands in for the agent CLI where the tests need no real one).
func build(t *testing.T) (string, string) {
	t.Helper()
	wrapper := tutil.BuildBinary(t, ".", ".")
	standin := tutil.BuildBinary(t, filepath.Join(tutil.WorkspaceDir(t), "testkit"), "./cmd/agent-standin")
	return wrapper, standin
}

func TestMain(m *testing.M) {
	code := m.Run()
	tutil.RemoveBinaries()
	os.Exit(code)
}

// mcpListener returns an MCP URL where a TCP listener, and nothing more, stands in for the cli:
// the wrapper's wait for its MCP server ends there. The listener is closed when the test ends.
func mcpListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// wrapperRun is one wrapper process and its JSON log lines.
type wrapperRun struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs []map[string]any
	raw  strings.Builder
	done chan struct{}
	code int
}

func startWrapper(t *testing.T, env ...string) *wrapperRun {
	t.Helper()
	wrapper, standin := build(t)
	state, dir := t.TempDir(), t.TempDir()
	cmd := exec.Command(wrapper, "--metrics-addr", "127.0.0.1:0", "--poll-interval", "20ms",
		"--termination-log", filepath.Join(dir, terminationLogName))
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"TATARA_PROJECT=proj", "TATARA_TASK=task-1", "TATARA_TASK_KIND=implement",
		"TATARA_AGENT_COMMAND=" + standin,
		"TATARA_WRAPPER_STATE_DIR=" + state,
		// A bare listener: these runs exercise the wrapper, not the MCP server, but the wrapper
		// starts the agent only once something accepts connections at the MCP URL.
		"TATARA_MCP_URL=" + mcpListener(t),
		// Inherited by a wrapper started from inside an agent session; must not reach the agent,
		// which would then write no transcript.
		"CLAUDE_CODE_CHILD_SESSION=1",
	}, env...)
	return startRun(t, cmd)
}

// startRun starts cmd (a wrapper, or a command that runs one) and collects its JSON log lines
// from stderr; the cleanup kills it if it still runs.
func startRun(t *testing.T, cmd *exec.Cmd) *wrapperRun {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &wrapperRun{cmd: cmd, done: make(chan struct{})}
	go func() {
		br := bufio.NewReader(stderr)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				var m map[string]any
				r.mu.Lock()
				r.raw.WriteString(line)
				if json.Unmarshal([]byte(line), &m) == nil {
					r.logs = append(r.logs, m)
				} else {
					r.logs = append(r.logs, map[string]any{"msg": "NOT JSON", "line": line})
				}
				r.mu.Unlock()
			}
			if err != nil {
				break
			}
		}
		_ = cmd.Wait()
		r.code = cmd.ProcessState.ExitCode()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = cmd.Process.Kill()
			<-r.done
		}
		for _, line := range strings.Split(strings.TrimSpace(r.rawLogs()), "\n") {
			if keys := duplicateKeys(line); len(keys) > 0 {
				t.Errorf("log line repeats keys %v: %s", keys, line)
			}
		}
		if t.Failed() {
			t.Logf("wrapper logs:\n%s", r.rawLogs())
		}
	})
	return r
}

// duplicateKeys returns the top-level keys a JSON object line has more than once (slog writes a
// key twice when a logger's With and a call both set it; JSON readers then disagree on it).
func duplicateKeys(line string) []string {
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	var dups []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return dups
		}
		key, _ := tok.(string)
		if seen[key] {
			dups = append(dups, key)
		}
		seen[key] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return dups
		}
	}
	return dups
}

func (r *wrapperRun) rawLogs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.raw.String()
}

func (r *wrapperRun) find(msg string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, l := range r.logs {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// waitLog waits for a log line with msg and returns the first.
func (r *wrapperRun) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if l := r.find(msg); len(l) > 0 {
			return l[0]
		}
		select {
		case <-r.done:
			if l := r.find(msg); len(l) > 0 {
				return l[0]
			}
			t.Fatalf("wrapper exited (code %d) without logging %q", r.code, msg)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for log %q", msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *wrapperRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(60 * time.Second):
		t.Fatal("wrapper did not exit")
		return -1
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // local test server
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// secretToken has the Task token's shape. The wrapper never gets the token (only the cli sidecar
// does), so it masks it by that shape wherever the agent's transcript shows it.
const secretToken = "tatara_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestWrapperRunsAgentEndToEnd(t *testing.T) {
	script := strings.Join([]string{
		"say hello",
		`emit-tool-use mcp__tatara__report_internal_issue {"category":"workspace_broken","severity":"warn","description":"no go.mod in /work","offending_tool":"Bash","resource_id":"repo/a"}`,
		`emit-tool-use Bash {"command":"curl -H 'Authorization: Bearer ` + secretToken + `' http://operator"}`,
		`emit-tool-use mcp__tatara__report_internal_issue {"category":"cosmic","description":"unknown category"}`,
		`raw "\x00\x00\x00{\"type\":\"assistant\",\"mess"`,
		`raw {"type":"queue-operation","operation":"enqueue"}`,
		`raw {"type":"brand-new-kind"}`,
		"say done " + secretToken,
		"exit 9",
	}, "\n")
	r := startWrapper(t, "TATARA_DIRECTIVE="+script, "TATARA_WRAPPER_LINGER=2m")
	addr := r.waitLog(t, "metrics server listening")["addr"].(string)
	base := "http://" + addr

	exited := r.waitLog(t, "agent exited")
	if exited["exit_code"] != float64(9) || exited["level"] != "ERROR" || exited["tool_uses"] != float64(3) ||
		exited["internal_issues"] != float64(2) || exited["malformed"] != float64(1) || exited["turns"] != float64(4) ||
		exited["result_subtype"] != "error_during_execution" || exited["project"] != "proj" || exited["task"] != "task-1" {
		t.Fatalf("agent exited line = %v", exited)
	}

	// Every transcript event, in order, as one agent_stream line each.
	var types []string
	for _, l := range r.find("agent_stream") {
		types = append(types, l["type"].(string))
	}
	wantTypes := "text text tool_use tool_result tool_use tool_result tool_use tool_result malformed queue-operation other text"
	if got := strings.Join(types, " "); got != wantTypes {
		t.Fatalf("agent_stream types = %s\nwant %s", got, wantTypes)
	}

	issues := r.find("internal issue reported")
	if len(issues) != 2 {
		t.Fatalf("internal issue lines = %v", issues)
	}
	for k, v := range map[string]any{"level": "WARN", "action": "internal_issue_report", "category": "workspace_broken",
		"severity": "warn", "description": "no go.mod in /work", "offending_tool": "Bash", "resource_id": "repo/a", "task": "task-1"} {
		if issues[0][k] != v {
			t.Errorf("issue[0].%s = %v, want %v", k, issues[0][k], v)
		}
	}
	if issues[1]["level"] != "ERROR" || issues[1]["category"] != "other" || issues[1]["severity"] != "error" {
		t.Errorf("clamped issue = %v", issues[1])
	}

	if strings.Contains(r.rawLogs(), secretToken) || strings.Contains(r.rawLogs(), secretToken[len("tatara_"):]) {
		t.Fatal("the Task token reached the logs")
	}
	if !strings.Contains(r.rawLogs(), "done tatara_[REDACTED]") {
		t.Fatal("the token said outside a bearer header was not logged masked by its shape")
	}
	if !strings.Contains(r.rawLogs(), "Bearer [REDACTED]") {
		t.Fatal("the bearer header was not logged redacted")
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, base+path); code != 200 {
			t.Fatalf("GET %s = %d %s", path, code, body)
		}
	}
	want := `
# HELP tatara_wrapper_internal_issue_total report_internal_issue tool calls seen in the agent transcript, by category and severity.
# TYPE tatara_wrapper_internal_issue_total counter
tatara_wrapper_internal_issue_total{category="auth",severity="error"} 0
tatara_wrapper_internal_issue_total{category="auth",severity="warn"} 0
tatara_wrapper_internal_issue_total{category="directive_contradiction",severity="error"} 0
tatara_wrapper_internal_issue_total{category="directive_contradiction",severity="warn"} 0
tatara_wrapper_internal_issue_total{category="graph_inconsistent",severity="error"} 0
tatara_wrapper_internal_issue_total{category="graph_inconsistent",severity="warn"} 0
tatara_wrapper_internal_issue_total{category="memory_inconsistent",severity="error"} 0
tatara_wrapper_internal_issue_total{category="memory_inconsistent",severity="warn"} 0
tatara_wrapper_internal_issue_total{category="other",severity="error"} 1
tatara_wrapper_internal_issue_total{category="other",severity="warn"} 0
tatara_wrapper_internal_issue_total{category="tool_error",severity="error"} 0
tatara_wrapper_internal_issue_total{category="tool_error",severity="warn"} 0
tatara_wrapper_internal_issue_total{category="workspace_broken",severity="error"} 0
tatara_wrapper_internal_issue_total{category="workspace_broken",severity="warn"} 1
`
	if err := testutil.ScrapeAndCompare(base+"/metrics", strings.NewReader(want), "tatara_wrapper_internal_issue_total"); err != nil {
		t.Fatal(err)
	}
	// Every event type's series exists, at 0 unless the transcript had one.
	_, body := httpGet(t, base+"/metrics")
	var counted []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "tatara_wrapper_stream_events_total{") && !strings.HasSuffix(l, "} 0") {
			counted = append(counted, l)
		}
	}
	wantCounted := []string{
		`tatara_wrapper_stream_events_total{type="malformed"} 1`,
		`tatara_wrapper_stream_events_total{type="other"} 1`,
		`tatara_wrapper_stream_events_total{type="queue-operation"} 1`,
		`tatara_wrapper_stream_events_total{type="text"} 3`,
		`tatara_wrapper_stream_events_total{type="tool_result"} 3`,
		`tatara_wrapper_stream_events_total{type="tool_use"} 3`,
	}
	if !slices.Equal(counted, wantCounted) {
		t.Fatalf("non-zero stream event series = %q, want %q", counted, wantCounted)
	}
	for _, zero := range []string{`{type="assistant"} 0`, `{type="thinking"} 0`, `{type="cost-state"} 0`} {
		if !strings.Contains(body, "tatara_wrapper_stream_events_total"+zero) {
			t.Errorf("tatara_wrapper_stream_events_total%s is not pre-created", zero)
		}
	}
	if !strings.Contains(body, `tatara_wrapper_build_info{`) {
		t.Fatal("no build info metric")
	}

	// Lingering ends on SIGTERM; the agent's exit code is the wrapper's.
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t); code != 9 {
		t.Fatalf("wrapper exit code = %d, want the agent's 9", code)
	}
}

// After the agent exits, the wrapper waits for one more scrape from outside the pod, bounded by
// --scrape-wait. Scrapes over loopback (the agent shares the pod's network) do not end the wait.
func TestWrapperScrapeWaitIsBounded(t *testing.T) {
	const bound = 1500 * time.Millisecond
	r := startWrapper(t, "TATARA_DIRECTIVE=say hi\nexit 0", "TATARA_WRAPPER_SCRAPE_WAIT="+bound.String())
	base := "http://" + r.waitLog(t, "metrics server listening")["addr"].(string)
	r.waitLog(t, "waiting for a final metrics scrape")
	if code, _ := httpGet(t, base+"/metrics"); code != 200 {
		t.Fatalf("GET /metrics during the wait = %d", code)
	}
	if code := r.wait(t); code != 0 {
		t.Fatalf("wrapper exit code = %d, want 0", code)
	}
	final := r.waitLog(t, "final metrics scrape")
	waited, err := time.ParseDuration(fmt.Sprint(final["waited"]))
	if err != nil {
		// slog's JSON handler writes a Duration as nanoseconds.
		ns, ok := final["waited"].(float64)
		if !ok {
			t.Fatalf("final metrics scrape line = %v", final)
		}
		waited = time.Duration(ns)
	}
	if final["scraped"] != false || waited < bound {
		t.Fatalf("final metrics scrape line = %v: want scraped=false after the whole %v (a loopback scrape must not count)", final, bound)
	}
}

// freedURL is an MCP URL at a loopback port that was free a moment ago: nothing listens there.
func freedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	_ = ln.Close()
	return url
}

// TestWrapperStartsTheAgentOnlyOnceItsMCPServerListens: the agent is not started while nothing
// accepts connections at the MCP URL, and is started as soon as something does; a SIGTERM during
// that wait ends the wrapper without starting the agent.
func TestWrapperStartsTheAgentOnlyOnceItsMCPServerListens(t *testing.T) {
	t.Run("starts once the server listens", func(t *testing.T) {
		url := freedURL(t)
		r := startWrapper(t, "TATARA_DIRECTIVE=say hi", "TATARA_MCP_URL="+url)
		r.waitLog(t, "metrics server listening")
		time.Sleep(500 * time.Millisecond)
		if got := r.find("agent started"); len(got) > 0 {
			t.Fatalf("the agent started while nothing listened at %s: %v", url, got)
		}
		// Read before Listen: the wrapper may connect as soon as listen(2) is done.
		listening := time.Now()
		ln, err := net.Listen("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ln.Close() }()
		r.waitLog(t, "agent started")
		if code := r.wait(t); code != 0 {
			t.Fatalf("exit code = %d, want 0", code)
		}
		accepting := r.waitLog(t, "mcp server accepting")
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(accepting["time"]))
		if err != nil {
			t.Fatal(err)
		}
		if at.Before(listening.Add(-time.Millisecond)) {
			t.Fatalf("the wrapper logged the MCP server accepting at %s, before it listened at %s", at, listening)
		}
	})
	t.Run("SIGTERM during the wait", func(t *testing.T) {
		r := startWrapper(t, "TATARA_DIRECTIVE=say hi", "TATARA_MCP_URL="+freedURL(t))
		r.waitLog(t, "metrics server listening")
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := r.wait(t); code != 143 {
			t.Fatalf("exit code = %d, want 143", code)
		}
		r.waitLog(t, "agent not started: stopped while waiting for its MCP server")
		if got := r.find("agent started"); len(got) > 0 {
			t.Fatalf("the agent started: %v", got)
		}
	})
}

func TestWrapperExitCodes(t *testing.T) {
	cases := []struct {
		name    string
		env     []string
		sigterm bool
		code    int
		log     string
	}{
		{"success", []string{"TATARA_DIRECTIVE=say all good"}, false, 0, "agent exited"},
		{"SIGTERM is forwarded to the agent", []string{"TATARA_DIRECTIVE=say started\nsleep 5m"}, true, 143, "forwarding signal to agent"},
		{"agent command missing", []string{"TATARA_DIRECTIVE=say x", "TATARA_AGENT_COMMAND=/nonexistent/claude"}, false, 127, "failed to start agent"},
		{"no directive", nil, false, 2, "invalid configuration"},
		{"MCP server never listens", []string{"TATARA_DIRECTIVE=say x", "TATARA_MCP_URL=" + freedURL(t), "TATARA_WRAPPER_MCP_WAIT=300ms"}, false, 4, "agent not started: its MCP server never answered"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := startWrapper(t, tc.env...)
			if tc.sigterm {
				// Signal once the agent is demonstrably running its script.
				deadline := time.Now().Add(60 * time.Second)
				for len(r.find("agent_stream")) < 2 {
					if time.Now().After(deadline) {
						t.Fatal("agent never wrote its first reply")
					}
					time.Sleep(10 * time.Millisecond)
				}
				if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			if code := r.wait(t); code != tc.code {
				t.Fatalf("exit code = %d, want %d", code, tc.code)
			}
			r.waitLog(t, tc.log)
		})
	}
}

// TestWrapperOwnsItsExitCodesAndTerminationMessage: the agent runs arbitrary code in the wrapper's
// container, so it can write the termination log and exit with any code. Exit code 5 with a
// workspace Failure there would pass for the wrapper's failed checkout (the operator would fail
// the Task as WorkspaceFailed, "agent not started"): an agent's exit with one of the wrapper's own
// codes becomes 1, and the termination message is emptied after the agent ran.
func TestWrapperOwnsItsExitCodesAndTerminationMessage(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "agent.sh")
	// The agent's working directory is the wrapper's, where startWrapper puts the termination log.
	forge := "#!/bin/sh\nprintf '%s' '{\"reason\":\"AuthFailed\",\"message\":\"forged\"}' > " + terminationLogName + "\nexit \"$FORGED_EXIT\"\n"
	if err := os.WriteFile(agent, []byte(forge), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		agentCode int
		want      int
	}{
		{"checkout failed (5)", 5, 1},
		{"usage (2)", 2, 1},
		{"setup (3)", 3, 1},
		{"no MCP server (4)", 4, 1},
		{"agent not startable (127)", 127, 1},
		{"success", 0, 0},
		{"failure", 1, 1},
		{"another code passes through", 7, 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := startWrapper(t, "TATARA_DIRECTIVE=forge", "TATARA_AGENT_COMMAND="+agent, fmt.Sprintf("FORGED_EXIT=%d", tc.agentCode))
			if code := r.wait(t); code != tc.want {
				t.Fatalf("exit code = %d, want %d", code, tc.want)
			}
			r.waitLog(t, "agent exited")
			if tc.want != tc.agentCode {
				if l := r.waitLog(t, "agent exited with one of the wrapper's exit codes; the wrapper exits ExitAgentFailed instead"); l["agent_exit_code"] != float64(tc.agentCode) {
					t.Errorf("the agent's own code is not logged: %v", l)
				}
			}
			msg, err := os.ReadFile(filepath.Join(r.cmd.Dir, terminationLogName))
			if err != nil || len(msg) != 0 {
				t.Fatalf("termination message %q (%v), want the file emptied", msg, err)
			}
		})
	}
}
