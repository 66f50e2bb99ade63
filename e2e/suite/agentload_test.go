//go:build e2e

package suite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// forwardToPod forwards a local loopback port to port on the pod's loopback (the API server's
// pods/portforward, as kubectl port-forward does), and returns the local port. The forward ends
// with ctx.
func forwardToPod(ctx context.Context, t *testing.T, cfg *rest.Config, pod *corev1.Pod, port string) int {
	t.Helper()
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(strings.TrimRight(cfg.Host, "/") + fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/portforward", pod.Namespace, pod.Name))
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + port}, ctx.Done(), ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("port-forward to %s:%s: %v", pod.Name, port, err)
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("port-forward to %s:%s: ports %v, %v", pod.Name, port, ports, err)
	}
	return int(ports[0].Local)
}

// agentLoad makes operator tool calls through an agent pod's cli at a steady rate, as a busy agent
// would (task_get and task_note in turn, and now and then a report_internal_issue), and records each call's outcome and duration.
type agentLoad struct {
	mcp  *client.Client
	task string

	mu    sync.Mutex
	calls []loadCall
}

type loadCall struct {
	tool       string
	start, end time.Time
	err        string // "" for a successful call
}

func newAgentLoad(ctx context.Context, t *testing.T, mcpURL, task string) *agentLoad {
	t.Helper()
	c, err := client.NewStreamableHttpClient(mcpURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "tatara-e2e-load", Version: "0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("MCP initialize at %s: %v", mcpURL, err)
	}
	return &agentLoad{mcp: c, task: task}
}

// run calls every interval until ctx ends, each call in its own goroutine (a slow call does not
// delay the next), and returns once every call has returned.
func (l *agentLoad) run(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.call(i)
		}()
	}
}

// Every reportEvery-th call of the load, up to loadReports of them, is a report_internal_issue of
// one problem: the cli answers it at once and sends it to the operator in the background, so
// during rollouts its tries meet an operator that is going away or not there yet.
const (
	reportEvery = 50 // 5 s at loadInterval
	loadReports = 8  // within the operator's burst of 10 reports per Task
	// loadReportDescription is the one problem the load reports.
	loadReportDescription = "e2e load report during operator rollouts"
)

func (l *agentLoad) call(i int) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "task_get"
	switch {
	case i%reportEvery == reportEvery/2 && i/reportEvery < loadReports:
		req.Params.Name = "report_internal_issue"
		req.Params.Arguments = map[string]any{"category": "tool_error", "severity": "warn", "description": loadReportDescription}
	case i%2 == 1:
		req.Params.Name = "task_note"
		req.Params.Arguments = map[string]any{"text": fmt.Sprintf("load call %d", i)}
	}
	// A call's own bound, far above the cli's retry budget: a hang is a failure, not a wait.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := loadCall{tool: req.Params.Name, start: time.Now()}
	res, err := l.mcp.CallTool(ctx, req)
	rec.end = time.Now()
	switch {
	case err != nil:
		rec.err = err.Error()
	case res.IsError:
		rec.err = resultText(res)
	}
	l.mu.Lock()
	l.calls = append(l.calls, rec)
	l.mu.Unlock()
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// loadSummary is what the agent saw: calls made and failed, the slowest call, and the longest
// time without a call completing (the gap an agent waiting on the operator would notice).
type loadSummary struct {
	calls, failed int
	// notes is how many task_note calls were answered as recorded, reports how many
	// report_internal_issue calls were answered.
	notes, reports int
	failures       []string
	slowest        time.Duration
	longestGap     time.Duration
	rate           float64
}

func (l *agentLoad) summary() loadSummary {
	l.mu.Lock()
	calls := append([]loadCall(nil), l.calls...)
	l.mu.Unlock()
	var s loadSummary
	s.calls = len(calls)
	if len(calls) == 0 {
		return s
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].end.Before(calls[j].end) })
	first, last := calls[0].start, calls[0].end
	prevEnd := calls[0].start
	for _, c := range calls {
		if c.err != "" {
			s.failed++
			if len(s.failures) < 10 {
				s.failures = append(s.failures, fmt.Sprintf("%s at %s: %s", c.tool, c.start.Format("15:04:05.000"), c.err))
			}
		}
		if c.tool == "task_note" && c.err == "" {
			s.notes++
		}
		if c.tool == "report_internal_issue" && c.err == "" {
			s.reports++
		}
		s.slowest = max(s.slowest, c.end.Sub(c.start))
		s.longestGap = max(s.longestGap, c.end.Sub(prevEnd))
		prevEnd = c.end
		first = minTime(first, c.start)
		last = c.end
	}
	if d := last.Sub(first).Seconds(); d > 0 {
		s.rate = float64(s.calls) / d
	}
	return s
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (s loadSummary) String() string {
	return fmt.Sprintf("%d calls (%.1f/s), %d failed, slowest call %s, longest time without a completed call %s",
		s.calls, s.rate, s.failed, s.slowest.Round(time.Millisecond), s.longestGap.Round(time.Millisecond))
}
