package egress

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/egress/allowlist"
)

var localhost = netip.MustParseAddr("127.0.0.1")

// upstream is an httptest server that counts the connections it accepted.
type upstream struct {
	*httptest.Server
	conns atomic.Int64
	port  int
}

func startUpstream(t testing.TB, tlsToo bool) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from "+r.Host)
	}))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	if tlsToo {
		u.StartTLS()
	} else {
		u.Start()
	}
	t.Cleanup(u.Close)
	u.port = u.Listener.Addr().(*net.TCPAddr).Port
	return u
}

// clientVia is an HTTP client whose every request goes through the proxy at proxyAddr and
// trusts tlsUp's certificate (issued for example.com).
func clientVia(proxyAddr string, tlsUp *upstream) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr}), DisableKeepAlives: true}
	if tlsUp != nil {
		pool := x509.NewCertPool()
		pool.AddCert(tlsUp.Certificate())
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: "example.com"}
	}
	return &http.Client{Transport: tr}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func requests(h *harness, decision string, r allowlist.Reason) float64 {
	return testutil.ToFloat64(h.metrics.Requests.WithLabelValues(decision, string(r)))
}

// TestAllowedNameIsProxied: a name on the allow-list whose addresses are permitted reaches its
// server over a CONNECT tunnel (TLS end to end, not intercepted) and as a plain-HTTP request;
// each is counted and logged as allowed with the Task found from the source address.
func TestAllowedNameIsProxied(t *testing.T) {
	tlsUp, plainUp := startUpstream(t, true), startUpstream(t, false)
	h := startProxy(t, Config{
		Policy:   policyFor(t, fmt.Sprintf("allowed.test:%d", tlsUp.port), fmt.Sprintf("allowed.test:%d", plainUp.port)),
		Resolver: mapResolver{"allowed.test": {localhost}}, Forbidden: loopbackPermitted(),
		Identify: fakeIdentities{localhost: agentA},
	})
	c := clientVia(h.addr, tlsUp)
	if code, body := get(t, c, fmt.Sprintf("https://allowed.test:%d/", tlsUp.port)); code != 200 || !strings.HasPrefix(body, "hello") {
		t.Errorf("HTTPS through CONNECT: %d %q", code, body)
	}
	if code, body := get(t, c, fmt.Sprintf("http://allowed.test:%d/", plainUp.port)); code != 200 || !strings.HasPrefix(body, "hello") {
		t.Errorf("plain HTTP: %d %q", code, body)
	}
	if n := requests(h, DecisionAllowed, allowlist.ReasonAllowed); n != 2 {
		t.Errorf("requests_total{decision=allowed} = %v, want 2", n)
	}
	lines := h.logs.lines(t, "egress allowed")
	if len(lines) != 2 {
		t.Fatalf("%d allowed log lines, want 2", len(lines))
	}
	for _, l := range lines {
		if l["level"] != "INFO" || l["project"] != "demo" || l["task"] != "task-a" || l["host"] != "allowed.test" {
			t.Errorf("allowed log line %v", l)
		}
	}
	if len(h.events.all()) != 0 {
		t.Errorf("allowed requests recorded Events: %v", h.events.all())
	}
}

// TestRefusalIsVisible: a name off the list gets a 403 whose one line says what and why, and is
// counted, logged at WARN and recorded as an Event on the Task whose pod asked (found from the
// source address), over CONNECT and plain HTTP alike; nothing reaches any server.
func TestRefusalIsVisible(t *testing.T) {
	h := startProxy(t, Config{
		Policy: policyFor(t, "allowed.test"), Resolver: mapResolver{"allowed.test": {localhost}, "evil.test": {localhost}},
		Forbidden: loopbackPermitted(), Identify: fakeIdentities{localhost: agentA},
	})
	assertBlocked(t, send(t, h.addr, "", connectRequest("evil.test:443")), "evil.test:443", allowlist.ReasonNotAllowed)
	assertBlocked(t, send(t, h.addr, "", "GET http://EVIL.test./x HTTP/1.1\r\nHost: EVIL.test.\r\n\r\n"), "evil.test:80",
		allowlist.ReasonNotAllowed)

	if n := requests(h, DecisionDenied, allowlist.ReasonNotAllowed); n != 2 {
		t.Errorf("requests_total{decision=denied,reason=not_allowed} = %v, want 2", n)
	}
	lines := h.logs.lines(t, "egress blocked")
	if len(lines) != 2 {
		t.Fatalf("%d blocked log lines, want 2", len(lines))
	}
	for i, port := range []float64{443, 80} {
		l := lines[i]
		want := map[string]any{"level": "WARN", "project": "demo", "task": "task-a", "pod": "agent-a", "source": "127.0.0.1",
			"host": "evil.test", "port": port, "reason": "not_allowed"}
		for k, v := range want {
			if l[k] != v {
				t.Errorf("blocked log line %d: %s = %v, want %v (%v)", i, k, l[k], v, l)
			}
		}
	}
	evs := h.events.all()
	if len(evs) != 2 {
		t.Fatalf("%d Events, want 2: %v", len(evs), evs)
	}
	for i, port := range []int{443, 80} {
		e := evs[i]
		task, ok := e.regarding.(*tatarav1.Task)
		if !ok || task.Name != "task-a" || task.Namespace != "ns" || task.UID != "task-uid-a" {
			t.Errorf("Event %d is about %#v, want Task ns/task-a", i, e.regarding)
		}
		if pod, ok := e.related.(*corev1.Pod); !ok || pod.Name != "agent-a" {
			t.Errorf("Event %d relates to %#v, want the pod agent-a", i, e.related)
		}
		want := fmt.Sprintf("blocked: evil.test:%d (not_allowed)", port)
		if e.eventtype != corev1.EventTypeWarning || e.reason != EventReason || e.note != want {
			t.Errorf("Event %d = %s %s %q, want Warning EgressBlocked %q", i, e.eventtype, e.reason, e.note, want)
		}
		// The recorder folds Events of one action into a series: each target needs its own.
		if wantAction := fmt.Sprintf("Connect evil.test:%d", port); e.action != wantAction {
			t.Errorf("Event %d action %q, want %q", i, e.action, wantAction)
		}
	}
}

func assertBlocked(t *testing.T, r reply, target string, reason allowlist.Reason) {
	t.Helper()
	want := "tatara egress proxy: blocked: " + target + " (" + string(reason) + ")\n"
	if r.code != http.StatusForbidden || r.body != want {
		t.Errorf("answer %d %q, want 403 %q", r.code, r.body, want)
	}
	if got := r.header.Get(BlockedHeader); got != BlockedValue {
		t.Errorf("answer's %s = %q, want %q: the agent CLI tells the model a host is blocked by it", BlockedHeader, got, BlockedValue)
	}
}

// TestAddressesAreRefused: whatever the list says, a request that names an address is refused,
// and so is an allowed name with any forbidden address (loopback under the production set, a
// private address next to a permitted one), a name that does not resolve, a malformed request,
// and everything before the Project is read; none reaches the server it would have.
func TestAddressesAreRefused(t *testing.T) {
	up := startUpstream(t, true)
	port := strconv.Itoa(up.port)
	allowed := []string{"allowed.test:" + port, "rebind.test:" + port, "nxdomain.test:" + port, "allowed.test"}
	resolver := mapResolver{"allowed.test": {localhost}, "rebind.test": {localhost, netip.MustParseAddr("::ffff:10.0.0.1")}}
	testPermitted := Config{Policy: policyFor(t, allowed...), Resolver: resolver, Forbidden: loopbackPermitted()}
	production := Config{Policy: policyFor(t, allowed...), Resolver: resolver} // Forbidden nil: ForbiddenPrefixes
	noProject := Config{Policy: &allowlist.Policy{}, Resolver: resolver, Forbidden: loopbackPermitted()}
	for _, c := range []struct {
		name   string
		cfg    Config
		raw    string
		target string
		reason allowlist.Reason
	}{
		{"IPv4 literal", testPermitted, connectRequest("127.0.0.1:" + port), "127.0.0.1:" + port, allowlist.ReasonIPLiteral},
		{"IPv6 literal", testPermitted, connectRequest("[::1]:" + port), "[::1]:" + port, allowlist.ReasonIPLiteral},
		{"short IPv4 literal", testPermitted, connectRequest("127.1:" + port), "127.1:" + port, allowlist.ReasonIPLiteral},
		{"plain HTTP to an address", testPermitted, "GET http://127.0.0.1:" + port + "/ HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\n\r\n",
			"127.0.0.1:" + port, allowlist.ReasonIPLiteral},
		{"allowed name on loopback, production set", production, connectRequest("allowed.test:" + port),
			"allowed.test:" + port, allowlist.ReasonPrivateAddress},
		{"one private address among permitted ones", testPermitted, connectRequest("rebind.test:" + port),
			"rebind.test:" + port, allowlist.ReasonPrivateAddress},
		{"allowed name that does not resolve", testPermitted, connectRequest("nxdomain.test:" + port),
			"nxdomain.test:" + port, allowlist.ReasonResolveFailed},
		{"CONNECT without a port", testPermitted, connectRequest("allowed.test"), "allowed.test:0", allowlist.ReasonBadRequest},
		{"https URL in plain HTTP", testPermitted, "GET https://allowed.test:" + port + "/ HTTP/1.1\r\nHost: allowed.test:" + port + "\r\n\r\n",
			"allowed.test:" + port, allowlist.ReasonBadRequest},
		{"not a proxy request", testPermitted, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "allowed.test:80", allowlist.ReasonBadRequest},
		{"before the Project is read", noProject, connectRequest("allowed.test:" + port), "allowed.test:" + port, allowlist.ReasonNoProject},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := up.conns.Load()
			h := startProxy(t, c.cfg)
			assertBlocked(t, send(t, h.addr, "", c.raw), c.target, c.reason)
			if n := requests(h, DecisionDenied, c.reason); n != 1 {
				t.Errorf("requests_total{decision=denied,reason=%s} = %v, want 1", c.reason, n)
			}
			if n := requests(h, DecisionAllowed, allowlist.ReasonAllowed); n != 0 {
				t.Errorf("requests_total{decision=allowed} = %v, want 0", n)
			}
			if n := up.conns.Load() - before; n != 0 {
				t.Errorf("the server got %d connections", n)
			}
		})
	}
}

// TestOneSourceCannotHoldEveryConnection: a source at its cap of open connections gets its next
// one closed unread (and counted), while another source is still served.
func TestOneSourceCannotHoldEveryConnection(t *testing.T) {
	const perSource = 3
	up := startUpstream(t, true)
	h := startProxy(t, Config{
		Policy: policyFor(t, fmt.Sprintf("allowed.test:%d", up.port)), Resolver: mapResolver{"allowed.test": {localhost}},
		Forbidden: loopbackPermitted(), Limits: Limits{MaxConnections: 16, MaxConnectionsPerSource: perSource},
	})
	// The attacker's connections from 127.0.0.1: tunnels it holds open, then one more. They are
	// accepted in the order they were made, so the one past the cap is the one closed.
	for range perSource {
		if r := send(t, h.addr, "", connectRequest(fmt.Sprintf("allowed.test:%d", up.port))); r.code != http.StatusOK {
			t.Fatalf("a tunnel under the cap: %d", r.code)
		}
	}
	extra := dialFrom(t, h.addr, "")
	if _, err := extra.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a connection past the cap: read %v, want EOF (closed unread)", err)
	}
	if n := testutil.ToFloat64(h.metrics.ConnectionsRefused); n != 1 {
		t.Errorf("connections_refused_total = %v, want 1", n)
	}
	if r := send(t, h.addr, "127.0.0.2", connectRequest(fmt.Sprintf("allowed.test:%d", up.port))); r.code != http.StatusOK {
		t.Errorf("another source while one is at its cap: %d, want 200", r.code)
	}
	if n := testutil.ToFloat64(h.metrics.OpenUpstream); n != perSource+1 {
		t.Errorf("upstream_connections = %v, want %d open tunnels", n, perSource+1)
	}
}

// TestRequestHeaderIsBounded: a request header past the size cap is answered 431 and never
// decided, and one that never ends is closed once the header timeout passes.
func TestRequestHeaderIsBounded(t *testing.T) {
	h := startProxy(t, Config{Policy: policyFor(t, "allowed.test"), Resolver: mapResolver{},
		Limits: Limits{MaxHeaderBytes: 1 << 10, ReadHeaderTimeout: 200 * time.Millisecond}})
	big := "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\nX-Pad: " + strings.Repeat("a", 16<<10) + "\r\n\r\n"
	if r := send(t, h.addr, "", big); r.code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 16 KiB header: %d, want 431", r.code)
	}
	slow := dialFrom(t, h.addr, "")
	if _, err := io.WriteString(slow, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, slow); err != nil {
		t.Errorf("a header that never ends: %v, want the proxy to close the connection", err)
	}
	for _, r := range allowlist.Reasons {
		d := DecisionDenied
		if r == allowlist.ReasonAllowed {
			d = DecisionAllowed
		}
		if n := requests(h, d, r); n != 0 {
			t.Errorf("requests_total{%s,%s} = %v: an unfinished request was decided", d, r, n)
		}
	}
}
