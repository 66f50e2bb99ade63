package agentcli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tatara.dev/e2e/internal/model"
)

// proxied is one request the egress proxy was sent: a CONNECT or an absolute-form request, its
// target host:port, and the User-Agent it carried (curl names itself on a CONNECT, the agent CLI
// does not).
type proxied struct {
	Method, Target, UserAgent string
}

func (r proxied) String() string { return r.Method + " " + r.Target + " (" + r.UserAgent + ")" }

func (r proxied) byCurl() bool { return strings.HasPrefix(r.UserAgent, "curl/") }

// egressProxy is a forward proxy on loopback, as an agent pod's egress proxy with an allow-list
// is: it tunnels CONNECTs to, and forwards absolute-form requests for, the hosts in routes (each to
// a loopback server: the proxy resolves the names, so no DNS is needed) and loopback targets (so
// that a model request sent through it still gets its answer, and shows); every other host gets
// 403 with the allow-list refusal header. It records every request.
type egressProxy struct {
	*httptest.Server
	routes map[string]string
	mu     sync.Mutex
	seen   []proxied
}

// The header and value with which the proxy refuses a host. The agent CLI knows them (and
// `X-Deny-Reason: host_not_allowed`) and tells WebFetch's caller that the egress proxy blocked the
// host; a bare 403 gets only "proxy refused the connection", the body unread.
const denyHeader, denyValue = "X-Proxy-Error", "blocked-by-allowlist"

func newEgressProxy(t *testing.T, routes map[string]string) *egressProxy {
	t.Helper()
	p := &egressProxy{routes: routes}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *egressProxy) requests() []proxied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// cliTargets are the distinct targets, sorted, of the requests that were not curl's: the agent
// CLI's own.
func (p *egressProxy) cliTargets() []string {
	var out []string
	for _, r := range p.requests() {
		if !r.byCurl() {
			out = append(out, r.Target)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// saw tells whether the proxy was sent method for target, by curl or not.
func (p *egressProxy) saw(method, target string, byCurl bool) bool {
	return slices.ContainsFunc(p.requests(), func(r proxied) bool {
		return r.Method == method && r.Target == target && r.byCurl() == byCurl
	})
}

// loopbackTargets are the requests the proxy was sent for loopback: in a pod, the model gateway's
// and the MCP server's.
func (p *egressProxy) loopbackTargets() []proxied {
	var out []proxied
	for _, r := range p.requests() {
		if host, _, _ := net.SplitHostPort(r.Target); host == "localhost" || net.ParseIP(host).IsLoopback() {
			out = append(out, r)
		}
	}
	return out
}

func (p *egressProxy) backend(target string) string {
	if b, ok := p.routes[target]; ok {
		return b
	}
	if host, _, err := net.SplitHostPort(target); err == nil && (host == "localhost" || net.ParseIP(host).IsLoopback()) {
		return target
	}
	return ""
}

func (p *egressProxy) serve(w http.ResponseWriter, r *http.Request) {
	target := r.Host
	if r.Method != http.MethodConnect {
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		port := r.URL.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[r.URL.Scheme]
		}
		target = net.JoinHostPort(r.URL.Hostname(), port)
	}
	p.mu.Lock()
	p.seen = append(p.seen, proxied{Method: r.Method, Target: target, UserAgent: r.Header.Get("User-Agent")})
	p.mu.Unlock()
	backend := p.backend(target)
	if backend == "" {
		w.Header().Set(denyHeader, denyValue)
		http.Error(w, target+" is not on the allow-list", http.StatusForbidden)
		return
	}
	if r.Method == http.MethodConnect {
		tunnel(w, r, backend)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = "http", backend
	out.Header.Del("Proxy-Connection")
	resp, err := (&http.Transport{}).RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func tunnel(w http.ResponseWriter, r *http.Request, backend string) {
	up, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(r.Context(), "tcp", backend)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = up.Close() }()
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer func() { _ = conn.Close() }()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	go func() {
		// What the client sent past the CONNECT is already in buf.
		_, _ = io.Copy(up, io.MultiReader(io.LimitReader(buf, int64(buf.Reader.Buffered())), conn))
		_ = up.Close()
	}()
	_, _ = io.Copy(conn, up)
}

// origin is the web behind the proxy, one handler for every host the proxy routes to it: it
// serves the test page and, as api.anthropic.com, the agent CLI's WebFetch domain check (every
// domain may be fetched). It records every request.
type origin struct {
	mu   sync.Mutex
	seen []originRequest
}

type originRequest struct {
	Host, Path, Query, UserAgent string
}

// pageMarker is the test page's text. No underscores: the CLI turns HTML into markdown, which
// escapes them.
const pageMarker = "EgressPageMarker7d3a91"

func (o *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.seen = append(o.seen, originRequest{Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, UserAgent: r.UserAgent()})
	o.mu.Unlock()
	switch {
	case r.Host == "api.anthropic.com" && r.URL.Path == "/api/web/domain_info":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"domain": r.URL.Query().Get("domain"), "can_fetch": true})
	case r.URL.Path == "/page":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<html><body><p>"+pageMarker+": the allowed page.</p></body></html>\n")
	default:
		http.NotFound(w, r)
	}
}

func (o *origin) requests() []originRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

// fetchedByWebFetch tells whether the agent CLI's WebFetch (whose User-Agent is Claude-User)
// asked host for path.
func (o *origin) fetchedByWebFetch(host, path string) bool {
	return slices.ContainsFunc(o.requests(), func(r originRequest) bool {
		return r.Host == host && r.Path == path && strings.HasPrefix(r.UserAgent, "Claude-User")
	})
}

// testCA writes a new CA's certificate (PEM) to caPath and returns a server certificate it
// signed for names.
func testCA(t *testing.T, caPath string, names ...string) tls.Certificate {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentcli egress test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, caPath, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// toolOutcome is one tool call the agent made and its result.
type toolOutcome struct {
	Tool, Input, Result string
	IsError             bool
}

// toolOutcomes are the agent's tool calls, in order, with their results, read from the
// conversations the model was sent. (The stand-in's records keep only the results a request's
// last message brings, and the CLI may put a message of its own after them.)
func (s *standIn) toolOutcomes(t *testing.T) []toolOutcome {
	t.Helper()
	type blk struct {
		Type      string          `json:"type"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		IsError   bool            `json:"is_error"`
		Content   json.RawMessage `json:"content"`
		Text      string          `json:"text"`
	}
	blocks := func(raw json.RawMessage) []blk {
		var str string
		if json.Unmarshal(raw, &str) == nil {
			return []blk{{Type: "text", Text: str}}
		}
		var out []blk
		_ = json.Unmarshal(raw, &out)
		return out
	}
	var order []string
	calls := map[string]*toolOutcome{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, body := range s.bodies {
		var req struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(body, &req) != nil {
			continue
		}
		for _, m := range req.Messages {
			for _, b := range blocks(m.Content) {
				switch b.Type {
				case "tool_use":
					if calls[b.ID] == nil {
						order = append(order, b.ID)
						calls[b.ID] = &toolOutcome{Tool: b.Name, Input: string(b.Input)}
					}
				case "tool_result":
					if c := calls[b.ToolUseID]; c != nil {
						var text []string
						for _, rb := range blocks(b.Content) {
							text = append(text, rb.Text)
						}
						c.Result, c.IsError = strings.Join(text, "\n"), b.IsError
					}
				}
			}
		}
	}
	out := make([]toolOutcome, 0, len(order))
	for _, id := range order {
		out = append(out, *calls[id])
	}
	return out
}

// outcome is the result of the agent's call of tool whose input contains inputPart.
func (s *standIn) outcome(t *testing.T, tool, inputPart string) toolOutcome {
	t.Helper()
	for _, o := range s.toolOutcomes(t) {
		if o.Tool == tool && strings.Contains(o.Input, inputPart) {
			return o
		}
	}
	t.Fatalf("the agent made no %s call with %q in its input: %+v", tool, inputPart, s.toolOutcomes(t))
	return toolOutcome{}
}

const egressScript = "egress-proxy"

// The script's tool calls: WebFetch of a page on the allow-list, given as http:// (the CLI asks
// for https:// instead), and of a host off it; curl of the allowed page over http:// (curl takes
// only http_proxy, lowercase, for it) and over https:// (HTTPS_PROXY), trusting the test's CA.
const egressSteps = `call WebFetch {"url":"http://allowed.test/page","prompt":"Quote the page."}
call WebFetch {"url":"https://blocked.test/","prompt":"Quote the page."}
call Bash {"command":"curl -sS -o /dev/null -w '%{http_code}' http://allowed.test/page"}
call Bash {"command":"curl -sS --cacert \"$NODE_EXTRA_CA_CERTS\" -o /dev/null -w '%{http_code}' https://allowed.test/page"}
`

// egressRun is one run of the CLI behind the egress proxy.
type egressRun struct {
	proxy *egressProxy
	web   *origin
	model *standIn
}

// TestAgentCLIRequestsAndTheEgressProxy: agent pods get HTTPS_PROXY and HTTP_PROXY (an egress
// proxy with an allow-list), NO_PROXY (in-cluster names and loopback), and a NetworkPolicy that
// drops every direct connection out of the cluster. This runs the agent CLI, under the wrapper
// with the environment it gives the CLI (DISABLE_TELEMETRY=1,
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, loopback added to NO_PROXY and no_proxy), behind a
// recording proxy that lets allowed.test through (and, in one run, api.anthropic.com) and refuses
// every other host, and pins what it found:
//
//   - The CLI's own requests all honour HTTPS_PROXY/HTTP_PROXY; with the wrapper's environment it
//     sends nothing but what its tools ask for: no telemetry, update or feature-flag requests (the
//     control, with DISABLE_TELEMETRY and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC set empty by
//     a Project's extraEnvs, shows them, through the proxy, to api.anthropic.com:443).
//   - Its model requests (ANTHROPIC_BASE_URL on 127.0.0.1) honour NO_PROXY, either case; without
//     it they go to the proxy: the CLI does not exempt loopback by itself, the wrapper does.
//   - WebFetch fetches through the proxy, always over https (CONNECT host:443, an http:// URL is
//     upgraded), but first asks https://api.anthropic.com/api/web/domain_info?domain=<host>,
//     through the proxy too; when that is refused the fetch fails ("Unable to verify if domain
//     ... is safe to fetch"). The user setting skipWebFetchPreflight: true skips the check (there
//     is no environment variable for it), and the wrapper writes it when the CLI has a proxy;
//     allowing api.anthropic.com:443 works too, but opens an API that takes any key. A host the
//     proxy refuses with `X-Proxy-Error: blocked-by-allowlist` is reported to the model as
//     blocked by the egress proxy.
//   - The Bash tool's children inherit the variables: curl of an https:// URL goes through
//     HTTPS_PROXY, but curl of an http:// URL ignores HTTP_PROXY (it reads only the lowercase
//     http_proxy) and connects directly: pods need the lowercase variables as well.
func TestAgentCLIRequestsAndTheEgressProxy(t *testing.T) {
	claude := claudeCode(t)
	wrapper := buildWrapper(t)
	const upper, lower = "HTTPS_PROXY={proxy} HTTP_PROXY={proxy}", "https_proxy={proxy} http_proxy={proxy}"
	tests := []struct {
		name    string
		wrapped bool
		// env is added to the run's environment ({proxy} is the proxy's URL), as extraEnvs are.
		env            string
		allowAnthropic bool
		// modelProxied: the model requests go through the proxy (no NO_PROXY).
		modelProxied bool
		steps        string
		check        func(t *testing.T, r egressRun)
	}{
		// The CLI alone first: what it does by itself behind a proxy that refuses the domain check.
		{name: "the CLI alone, uppercase variables, WebFetch's domain check refused", env: upper + " NO_PROXY=127.0.0.1,localhost", steps: egressSteps,
			check: func(t *testing.T, r egressRun) {
				if got, want := r.proxy.cliTargets(), []string{"api.anthropic.com:443"}; !slices.Equal(got, want) {
					t.Errorf("the CLI asked the proxy for %q; want only the domain check's %q", got, want)
				}
				for _, host := range []string{"allowed.test", "blocked.test"} {
					if o := r.model.outcome(t, "WebFetch", host); !o.IsError || !strings.Contains(o.Result, "Unable to verify if domain "+host+" is safe to fetch") {
						t.Errorf("WebFetch of %s with its domain check refused: %+v; want the domain check's error", host, o)
					}
				}
				if r.web.fetchedByWebFetch("allowed.test", "/page") {
					t.Error("WebFetch fetched the page although its domain check failed")
				}
				if o := r.model.outcome(t, "Bash", "http://allowed.test"); !strings.Contains(o.Result, "Could not resolve host: allowed.test") ||
					r.proxy.saw(http.MethodGet, "allowed.test:80", true) {
					t.Errorf("curl of http:// with HTTP_PROXY only: %+v; want it to ignore HTTP_PROXY and resolve the host itself", o)
				}
				if o := r.model.outcome(t, "Bash", "https://allowed.test"); o.Result != "200" || !r.proxy.saw(http.MethodConnect, "allowed.test:443", true) {
					t.Errorf("curl of https:// with HTTPS_PROXY: %+v; want 200, through the proxy", o)
				}
			}},
		// Under the wrapper, with the variables the operator gives a proxied pod: the wrapper
		// writes skipWebFetchPreflight into the CLI's user settings, so nothing goes to the domain
		// check.
		{name: "under the wrapper, the operator's variables (both cases)", wrapped: true, env: upper + " " + lower, steps: egressSteps,
			check: func(t *testing.T, r egressRun) {
				if got, want := r.proxy.cliTargets(), []string{"allowed.test:443", "blocked.test:443"}; !slices.Equal(got, want) {
					t.Errorf("the CLI asked the proxy for %q; want only WebFetch's %q", got, want)
				}
				if o := r.model.outcome(t, "WebFetch", "allowed.test"); o.IsError || !r.web.fetchedByWebFetch("allowed.test", "/page") ||
					r.model.requestsContaining(pageMarker) == 0 {
					t.Errorf("WebFetch of allowed.test: %+v; want the page, fetched over https through the proxy, in the model's context", o)
				}
				if o := r.model.outcome(t, "WebFetch", "blocked.test"); !o.IsError || !strings.Contains(o.Result, "Access to blocked.test is blocked by the network egress proxy") {
					t.Errorf("WebFetch of blocked.test: %+v; want the egress proxy's refusal", o)
				}
				if o := r.model.outcome(t, "Bash", "http://allowed.test"); o.Result != "200" || !r.proxy.saw(http.MethodGet, "allowed.test:80", true) {
					t.Errorf("curl of http:// with http_proxy: %+v; want 200, through the proxy", o)
				}
				if o := r.model.outcome(t, "Bash", "https://allowed.test"); o.Result != "200" || !r.proxy.saw(http.MethodConnect, "allowed.test:443", true) {
					t.Errorf("curl of https://: %+v; want 200, through the proxy", o)
				}
			}},
		{name: "the CLI alone, api.anthropic.com allowed", env: upper + " " + lower + " NO_PROXY=127.0.0.1,localhost", allowAnthropic: true, steps: egressSteps,
			check: func(t *testing.T, r egressRun) {
				if got, want := r.proxy.cliTargets(), []string{"allowed.test:443", "api.anthropic.com:443", "blocked.test:443"}; !slices.Equal(got, want) {
					t.Errorf("the CLI asked the proxy for %q; want %q", got, want)
				}
				for _, host := range []string{"allowed.test", "blocked.test"} {
					if !slices.ContainsFunc(r.web.requests(), func(q originRequest) bool {
						return q.Host == "api.anthropic.com" && q.Path == "/api/web/domain_info" && q.Query == "domain="+host
					}) {
						t.Errorf("no domain check for %s reached api.anthropic.com: %+v", host, r.web.requests())
					}
				}
				if o := r.model.outcome(t, "WebFetch", "allowed.test"); o.IsError || !r.web.fetchedByWebFetch("allowed.test", "/page") ||
					r.model.requestsContaining(pageMarker) == 0 {
					t.Errorf("WebFetch of allowed.test after its domain check: %+v; want the page in the model's context", o)
				}
			}},
		// The wrapper always exempts loopback; these show what the CLI does itself.
		{name: "the CLI alone, HTTP_PROXY and no NO_PROXY", env: upper, modelProxied: true,
			check: func(t *testing.T, r egressRun) {
				if got := r.proxy.loopbackTargets(); len(got) == 0 || got[0].Method != http.MethodPost {
					t.Errorf("the proxy got %v for loopback; want the model request: the CLI does not exempt loopback by itself", got)
				}
			}},
		{name: "the CLI alone, NO_PROXY", env: upper + " NO_PROXY=127.0.0.1,localhost"},
		{name: "the CLI alone, no_proxy", env: upper + " no_proxy=127.0.0.1,localhost"},
		{name: "under the wrapper, extraEnvs turn telemetry and nonessential traffic on (control)", wrapped: true,
			env: upper + " " + lower + " DISABLE_TELEMETRY= CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=", allowAnthropic: true,
			check: func(t *testing.T, r egressRun) {
				if got, want := r.proxy.cliTargets(), []string{"api.anthropic.com:443"}; !slices.Equal(got, want) {
					t.Errorf("the CLI asked the proxy for %q; want %q, so that nothing under the wrapper's defaults is vacuous", got, want)
				}
				t.Logf("the CLI's requests to api.anthropic.com: %+v", r.web.requests())
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			workdir := filepath.Join(dir, "work")
			for _, d := range []string{filepath.Join(dir, "home"), workdir} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// The web: allowed.test over https (the CLI trusts the test's CA through
			// NODE_EXTRA_CA_CERTS, curl through --cacert) and http, and api.anthropic.com.
			caPath := filepath.Join(dir, "ca.pem")
			web := &origin{}
			tlsWeb := httptest.NewUnstartedServer(web)
			tlsWeb.TLS = &tls.Config{Certificates: []tls.Certificate{testCA(t, caPath, "allowed.test", "api.anthropic.com")}}
			tlsWeb.StartTLS()
			defer tlsWeb.Close()
			plainWeb := httptest.NewServer(web)
			defer plainWeb.Close()
			routes := map[string]string{"allowed.test:443": tlsWeb.Listener.Addr().String(), "allowed.test:80": plainWeb.Listener.Addr().String()}
			if tt.allowAnthropic {
				routes["api.anthropic.com:443"] = tlsWeb.Listener.Addr().String()
			}
			proxy := newEgressProxy(t, routes)
			m := newStandIn(t)

			env := []string{"NODE_EXTRA_CA_CERTS=" + caPath}
			for _, kv := range strings.Fields(tt.env) {
				env = append(env, strings.ReplaceAll(kv, "{proxy}", proxy.URL))
			}
			directive := model.ScriptHeader + " id=" + egressScript + "\n" + tt.steps + "say done"
			var out []byte
			if tt.wrapped {
				out = runWrapped(t, wrapper, claude, dir, workdir, directive, m.URL, env...)
			} else {
				out = runDirect(t, claude, dir, workdir, directive, m.URL, "user", true, env...)
			}
			t.Logf("the proxy was sent: %v", proxy.requests())
			recs := m.messages(t, egressScript)
			if len(recs) == 0 || recs[len(recs)-1].Answer != "text" || recs[len(recs)-1].Error != "" {
				t.Fatalf("the run did not reach the script's end: %+v\n%s", recs, tail(out))
			}
			if !tt.modelProxied {
				if got := proxy.loopbackTargets(); len(got) > 0 {
					t.Errorf("the proxy was sent %v: requests to the model (or the MCP server) on loopback must not go through it", got)
				}
			}
			if tt.check != nil {
				tt.check(t, egressRun{proxy: proxy, web: web, model: m})
			}
		})
	}
}
