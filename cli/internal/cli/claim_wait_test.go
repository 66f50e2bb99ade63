package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"tatara.dev/cli/pkg/claim"
	"tatara.dev/testkit/testutil"
)

// The claimed Task's token, in the Task token's shape.
const claimedToken = "tatara_9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0"

// claimStep is one answer of the operator stand-in to a claim request.
type claimStep struct {
	status int
	body   string
	hangUp bool // close the connection without an answer
	hold   bool // hold the request until the client goes away
}

// claimOperator is the operator's REST API as a pool pod sees it: the claim endpoint answering
// steps in order (the last one repeats), and a task endpoint that records who calls it. After
// every claim request it rotates the token file, as the kubelet does, so each request must carry
// the file's content of its time.
type claimOperator struct {
	t         *testing.T
	srv       *httptest.Server
	tokenFile string
	// before, when set, runs as the 200 answer is about to be sent.
	before func()
	// held gets a value when a request is held (claimStep.hold).
	held chan struct{}

	mu       sync.Mutex
	steps    []claimStep
	requests int
	tokens   []string // the bearer of each claim request
	expected []string // the token file's content at each claim request
	waits    []string
	taskAuth []string // "<path> <authorization> <X-Tatara-Project>" of each task request
}

func newClaimOperator(t *testing.T, steps ...claimStep) *claimOperator {
	t.Helper()
	o := &claimOperator{t: t, steps: steps, tokenFile: filepath.Join(t.TempDir(), "token"), held: make(chan struct{}, 1)}
	o.rotate(0)
	o.srv = httptest.NewUnstartedServer(http.HandlerFunc(o.serve))
	// A fresh connection for every request: a broken one is then the client's error to handle,
	// not one net/http retries on its own (with the old token) on a reused connection.
	o.srv.Config.SetKeepAlivesEnabled(false)
	o.srv.Start()
	t.Cleanup(o.srv.Close)
	return o
}

func (o *claimOperator) rotate(n int) {
	// WriteFile truncates in place; the kubelet swaps a symlink. Either way the next read sees it.
	if err := os.WriteFile(o.tokenFile, fmt.Appendf(nil, "sa-token-%d\n", n), 0o600); err != nil {
		o.t.Error(err)
	}
}

func (o *claimOperator) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/v1/tasks/") {
		o.mu.Lock()
		o.taskAuth = append(o.taskAuth, r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Tatara-Project"))
		o.mu.Unlock()
		_, _ = w.Write([]byte(`{"name":"claimed"}`))
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != claim.OperatorPath {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	o.mu.Lock()
	current, _ := os.ReadFile(o.tokenFile)
	o.tokens = append(o.tokens, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	o.expected = append(o.expected, strings.TrimSpace(string(current)))
	o.waits = append(o.waits, r.URL.Query().Get(claim.WaitParam))
	step := o.steps[min(o.requests, len(o.steps)-1)]
	o.requests++
	o.rotate(o.requests)
	before := o.before
	o.mu.Unlock()
	switch {
	case step.hold:
		select {
		case o.held <- struct{}{}:
		default:
		}
		<-r.Context().Done()
		return
	case step.hangUp:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	case step.status == http.StatusOK && before != nil:
		before()
	}
	if step.body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(step.status)
	_, _ = w.Write([]byte(step.body))
}

func (o *claimOperator) snapshot() (requests int, tokens, expected, waits, taskAuth []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.requests, slicesClone(o.tokens), slicesClone(o.expected), slicesClone(o.waits), slicesClone(o.taskAuth)
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// poolMCP is a `tatara mcp --transport http` started as in a pool pod.
type poolMCP struct {
	cmd       *exec.Cmd
	logs      *logLines
	done      <-chan struct{}
	listen    string
	metrics   string
	claimFile string
}

// newPoolMCP picks the addresses and the claim file of a pool pod's `tatara mcp`; start starts it.
func newPoolMCP(t *testing.T) *poolMCP {
	t.Helper()
	addrs := freeAddrs(t, 2)
	return &poolMCP{listen: addrs[0], metrics: addrs[1], claimFile: filepath.Join(t.TempDir(), "assignment.json")}
}

func startPoolMCP(t *testing.T, op *claimOperator, kind string) *poolMCP {
	t.Helper()
	p := newPoolMCP(t)
	p.start(t, op, kind)
	return p
}

func (p *poolMCP) start(t *testing.T, op *claimOperator, kind string) {
	t.Helper()
	p.cmd = exec.Command(tataraBin(t), "mcp", "--transport", "http", "--listen", p.listen, "--metrics-addr", p.metrics)
	p.cmd.Env = append(os.Environ(), "TATARA_PROJECT=proj", "TATARA_TASK_KIND="+kind, "TATARA_OPERATOR_URL="+op.srv.URL,
		claim.EnvFile+"="+p.claimFile, claim.EnvOperatorTokenFile+"="+op.tokenFile)
	p.logs, p.done = startLogged(t, p.cmd)
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done; _ = p.cmd.Wait() })
}

func (p *poolMCP) accepts() bool {
	conn, err := net.DialTimeout("tcp", p.listen, time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

func (p *poolMCP) rawLogs() string {
	p.logs.mu.Lock()
	defer p.logs.mu.Unlock()
	return strings.Join(p.logs.raw, "\n")
}

// exit waits for the process to end and returns its exit code.
func (p *poolMCP) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("tatara mcp did not exit; log:\n%s", p.rawLogs())
	}
	_ = p.cmd.Wait()
	return p.cmd.ProcessState.ExitCode()
}

func answerJSON(t *testing.T, a claim.Answer) string {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A pool pod's `tatara mcp` waits for its claim before it listens for MCP: it asks again at once
// after a 204, retries server errors and broken connections, sends the token file's current
// content every time, writes the assignment without the token, and only then opens the MCP port,
// serving the claimed Task with the claimed token.
func TestMCPInAPoolPodServesTheClaimingTask(t *testing.T) {
	assignment := claim.Assignment{Project: "proj", Task: "claimed-task", Kind: "implement", Directive: "fix the bug",
		RepoDir: "/workspace/demo", PushBranch: "tatara/claimed-task-1a2b3c4d", AuthorName: "Tatara Agent", AuthorEmail: "agent@tatara.dev"}
	// Claimed an hour ago by the operator's clock: the first MCP request's histogram measures from it.
	claimed := claimStep{status: http.StatusOK, body: answerJSON(t, claim.Answer{Assignment: assignment, Token: claimedToken,
		ClaimedAt: time.Now().Add(-time.Hour)})}
	tests := []struct {
		name    string
		steps   []claimStep
		retries int // WARN lines for failed requests
	}{
		{"claimed after two empty waits", []claimStep{{status: http.StatusNoContent}, {status: http.StatusNoContent}, claimed}, 0},
		{"server errors and a broken connection are retried", []claimStep{
			{status: http.StatusServiceUnavailable, body: `{"error":"starting"}`}, {hangUp: true}, {status: http.StatusInternalServerError}, claimed}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := newClaimOperator(t, tt.steps...)
			p := newPoolMCP(t)
			var acceptedEarly, writtenEarly atomic.Bool
			op.mu.Lock() // the handler reads it (and p's fields) under the same lock
			op.before = func() {
				acceptedEarly.Store(p.accepts())
				_, err := os.Stat(p.claimFile)
				writtenEarly.Store(err == nil)
			}
			op.mu.Unlock()
			p.start(t, op, "implement")

			// Once it serves MCP, the assignment is written. (It waits for the log line, not for the
			// port: a freed port can be taken by another test's process meanwhile.)
			testutil.WaitFor(t, "the MCP server", func() bool {
				select {
				case <-p.done:
					t.Fatalf("tatara mcp exited while waiting for its claim:\n%s", p.rawLogs())
				default:
				}
				return p.logs.find("mcp server started") != nil
			})
			raw, err := os.ReadFile(p.claimFile)
			if err != nil {
				t.Fatalf("the MCP server started but the claim file is not there: %v", err)
			}
			if !p.accepts() {
				t.Fatal("the MCP server started but its port accepts no connection")
			}
			if acceptedEarly.Load() || writtenEarly.Load() {
				t.Errorf("before the claim was answered: MCP port accepting %v, claim file written %v; want neither", acceptedEarly.Load(), writtenEarly.Load())
			}
			if got, err := claim.ReadFile(p.claimFile); err != nil || got != assignment {
				t.Errorf("claim file = %+v (%v), want %+v", got, err, assignment)
			}
			if strings.Contains(string(raw), claimedToken) || strings.Contains(string(raw), "token") {
				t.Errorf("the claim file holds the token: %s", raw)
			}

			requests, tokens, expected, waits, _ := op.snapshot()
			if requests != len(tt.steps) {
				t.Errorf("%d claim requests, want %d", requests, len(tt.steps))
			}
			for i := range tokens {
				if tokens[i] != expected[i] || waits[i] != "20" {
					t.Errorf("claim request %d: bearer %q, wait %q; want the token file's current %q and wait 20 (claim.MaxWait)", i, tokens[i], waits[i], expected[i])
				}
			}
			testutil.WaitFor(t, "startup log", func() bool { return p.logs.find("mcp server started") != nil })
			// Lines come in order: those before "mcp server started" are all read.
			if got := strings.Count(p.rawLogs(), `"msg":"claim request failed; retrying"`); got != tt.retries {
				t.Errorf("%d retry log lines, want %d:\n%s", got, tt.retries, p.rawLogs())
			}
			if start := p.logs.find("mcp server started"); start["project"] != "proj" || start["task"] != "claimed-task" {
				t.Errorf("startup log = %v, want the claimed project and task", start)
			}
			if rec := p.logs.find("pod claimed"); rec == nil || rec["task"] != "claimed-task" || rec["project"] != "proj" || rec["waited"] == nil {
				t.Errorf("pod claimed log = %v", rec)
			}

			// The tools act for the claimed Task, with its token.
			c, err := client.NewStreamableHttpClient("http://" + p.listen + "/mcp")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			initialize(t, c)
			req := mcp.CallToolRequest{}
			req.Params.Name = "task_get"
			if res, err := c.CallTool(context.Background(), req); err != nil || res.IsError {
				t.Fatalf("task_get: %v %+v", err, res)
			}
			_, _, _, _, taskAuth := op.snapshot()
			if want := "/api/v1/tasks/claimed-task Bearer " + claimedToken + " proj"; len(taskAuth) != 1 || taskAuth[0] != want {
				t.Errorf("the operator's task endpoint saw %q, want [%q]", taskAuth, want)
			}

			// The agent's first request was observed once, measured from the claim.
			const metric = "tatara_mcp_claim_to_first_request_seconds"
			if got := testutil.ScrapeLines(t, "http://"+p.metrics+"/metrics", metric+"_count"); len(got) != 1 || got[0] != metric+"_count 1" {
				t.Errorf("%s_count lines %q, want one observation", metric, got)
			}
			for _, l := range testutil.ScrapeLines(t, "http://"+p.metrics+"/metrics", metric+"_sum ") {
				if sum, err := strconv.ParseFloat(strings.TrimPrefix(l, metric+"_sum "), 64); err != nil || sum < 3600 || sum > 3700 {
					t.Errorf("%s, want the hour since the claim", l)
				}
			}

			// Still metrics, still a clean stop; no token in the log.
			if resp, err := http.Get("http://" + p.metrics + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("/healthz after the claim: %v %v", resp, err)
			} else {
				_ = resp.Body.Close()
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.exit(t); code != 0 {
				t.Errorf("exit code after SIGTERM = %d, want 0; log:\n%s", code, p.rawLogs())
			}
			if logs := p.rawLogs(); strings.Contains(logs, claimedToken) || strings.Contains(logs, "sa-token-") {
				t.Errorf("a token reached the log:\n%s", logs)
			}
		})
	}
}

// A claim answer that can never become a claim ends `tatara mcp` with an error naming the status
// and the operator's reason, or what is wrong with the answer; nothing is written, and the MCP
// port is never opened.
func TestMCPInAPoolPodRefusesABadClaim(t *testing.T) {
	good := claim.Assignment{Project: "proj", Task: "t1", Kind: "implement", Directive: "d"}
	answer := func(a claim.Assignment, token string) claimStep {
		return claimStep{status: http.StatusOK, body: answerJSON(t, claim.Answer{Assignment: a, Token: token})}
	}
	noDirective := good
	noDirective.Directive = ""
	review := good
	review.Kind = "review"
	tests := []struct {
		name  string
		steps []claimStep
		want  []string
	}{
		{"gone", []claimStep{{status: http.StatusNoContent}, {status: http.StatusGone, body: `{"error":"the pool pod is being deleted"}`}},
			[]string{"410 Gone", "the pool pod is being deleted"}},
		{"token refused", []claimStep{{status: http.StatusUnauthorized, body: `{"error":"token review failed"}`}}, []string{"401 Unauthorized", "token review failed"}},
		{"forbidden", []claimStep{{status: http.StatusForbidden, body: "not a pool pod's token\n"}}, []string{"403 Forbidden", "not a pool pod's token"}},
		{"long error body is cut", []claimStep{{status: http.StatusGone, body: `{"error":"` + strings.Repeat("x", 5000) + `"}`}}, []string{"410 Gone", "bytes cut]"}},
		{"unexpected status", []claimStep{{status: http.StatusNotFound, body: `{"error":"no such route"}`}}, []string{"404 Not Found", "no such route"}},
		{"malformed answer", []claimStep{{status: http.StatusOK, body: `{"project":`}}, []string{"malformed claim answer"}},
		{"incomplete assignment", []claimStep{answer(noDirective, claimedToken)}, []string{"malformed claim answer", "no directive"}},
		{"no token", []claimStep{answer(good, "")}, []string{"malformed claim answer", "without a token"}},
		{"another kind", []claimStep{answer(review, claimedToken)}, []string{"claim refused", `kind "review"`, `kind "implement"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := newClaimOperator(t, tt.steps...)
			p := startPoolMCP(t, op, "implement")
			if code := p.exit(t); code != 1 {
				t.Fatalf("exit code %d, want 1; log:\n%s", code, p.rawLogs())
			}
			logs := p.rawLogs()
			errLine := logs[strings.LastIndex(logs, "Error:"):]
			t.Log(errLine)
			for _, w := range tt.want {
				if !strings.Contains(errLine, w) {
					t.Errorf("the error lacks %q:\n%s", w, logs)
				}
			}
			if len(errLine) > 1024 {
				t.Errorf("the error is %d bytes, want the operator's body cut", len(errLine))
			}
			if _, err := os.Stat(p.claimFile); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the claim file was written (%v)", err)
			}
			if p.logs.find("mcp server started") != nil || strings.Contains(logs, claimedToken) {
				t.Errorf("the MCP server started, or the token was logged:\n%s", logs)
			}
		})
	}
}

// SIGTERM while the operator holds the claim request open (a pool pod deleted before any Task
// claimed it) ends the wait and the process cleanly; /healthz answered during the wait.
func TestMCPInAPoolPodStopsWaitingOnSIGTERM(t *testing.T) {
	op := newClaimOperator(t, claimStep{status: http.StatusNoContent}, claimStep{hold: true})
	p := startPoolMCP(t, op, "implement")
	select {
	case <-op.held:
	case <-p.done:
		t.Fatalf("tatara mcp exited before asking for its claim:\n%s", p.rawLogs())
	case <-time.After(30 * time.Second):
		t.Fatal("no claim request")
	}
	resp, err := http.Get("http://" + p.metrics + "/healthz")
	if err != nil {
		t.Fatalf("/healthz during the claim wait: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz during the claim wait = %d, want 200", resp.StatusCode)
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exit(t); code != 0 {
		t.Errorf("exit code %d, want 0; log:\n%s", code, p.rawLogs())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("stopping took %v: the held claim request was waited out", took)
	}
	if p.logs.find("claim wait stopped") == nil || p.logs.find("mcp server started") != nil {
		t.Errorf("want a claim wait stopped log line and no MCP server:\n%s", p.rawLogs())
	}
	if _, err := os.Stat(p.claimFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the claim file was written (%v)", err)
	}
}
