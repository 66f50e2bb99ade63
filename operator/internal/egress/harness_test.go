package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"

	"tatara.dev/operator/internal/egress/allowlist"
)

// mapResolver resolves the names it holds (asked rooted, with a trailing dot) and no others.
type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[strings.TrimSuffix(host, ".")]; ok && strings.HasSuffix(host, ".") {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// loopbackPermitted is the production set without 127.0.0.0/8, so that names can be pointed at
// this test's servers; ::1 and everything else stay forbidden.
func loopbackPermitted() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range allowlist.ForbiddenPrefixes() {
		if !p.Contains(netip.MustParseAddr("127.0.0.1")) {
			out = append(out, p)
		}
	}
	return out
}

// fakeIdentities names the sources it holds.
type fakeIdentities map[netip.Addr]Identity

func (f fakeIdentities) Identify(_ context.Context, src netip.Addr) Identity { return f[src] }

// agentA is the identity of connections from 127.0.0.1 in these tests.
var agentA = Identity{Pod: "agent-a", PodUID: "pod-uid-a", Task: "task-a", TaskUID: "task-uid-a"}

type recordedEvent struct {
	regarding, related              runtime.Object
	eventtype, reason, action, note string
}

// fakeRecorder keeps every Event, with the objects it is about (events.FakeRecorder keeps only
// the text).
type fakeRecorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (f *fakeRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, recordedEvent{regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...)})
}

func (f *fakeRecorder) all() []recordedEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedEvent(nil), f.events...)
}

// syncBuffer is a log sink safe for the proxy's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines are the JSON log lines whose msg is msg.
func (b *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// harness is a proxy serving on 127.0.0.1 with a fresh registry, log and recorder.
type harness struct {
	addr    string
	proxy   *Proxy
	metrics *Metrics
	logs    *syncBuffer
	events  *fakeRecorder
}

// startProxy serves a proxy of Project "demo" in namespace "ns" with cfg's Policy, Resolver,
// Forbidden, Identify and Limits (the rest is the harness's) until the test ends.
func startProxy(t testing.TB, cfg Config) *harness {
	t.Helper()
	h := &harness{metrics: NewMetrics(prometheus.NewRegistry(), "demo"), logs: &syncBuffer{}, events: &fakeRecorder{}}
	cfg.Project, cfg.Namespace, cfg.Metrics, cfg.Events = "demo", "ns", h.metrics, h.events
	cfg.Log = slog.New(slog.NewJSONHandler(h.logs, nil))
	h.proxy = New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.proxy.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	return h
}

// policyFor is a Policy holding allow (and nothing from repos or a model).
func policyFor(t testing.TB, allow ...string) *allowlist.Policy {
	t.Helper()
	list, errs := NewAllowList(projectWith(allow, nil, ""))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	p := &allowlist.Policy{}
	p.Set(list)
	return p
}

// dialFrom connects to addr from the local address from (127.0.0.1 when empty).
func dialFrom(t testing.TB, addr, from string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 30 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	return c
}

// reply is the proxy's answer to one request; conn and br carry on with a tunnel.
type reply struct {
	code   int
	body   string
	header http.Header
	conn   net.Conn
	br     *bufio.Reader
}

// send writes raw (an HTTP request) on a new connection to the proxy from from (127.0.0.1 when
// empty) and reads the answer: the whole body, unless it opened a tunnel.
func send(t testing.TB, proxyAddr, from, raw string) reply {
	t.Helper()
	c := dialFrom(t, proxyAddr, from)
	if _, err := c.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", strings.SplitN(raw, "\r\n", 2)[0], err)
	}
	defer func() { _ = resp.Body.Close() }()
	if method == http.MethodConnect && resp.StatusCode == http.StatusOK {
		return reply{code: resp.StatusCode, header: resp.Header, conn: c, br: br} // the tunnel is the caller's
	}
	// Read to the end: a refusal's body is sized, and after one the proxy closes. An error (a
	// reset after a 431 the server sent without reading the rest) leaves what was read.
	body, _ := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, body: string(body), header: resp.Header, conn: c, br: br}
}

func connectRequest(target string) string {
	return http.MethodConnect + " " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"
}
