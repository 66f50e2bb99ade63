package gitgateway

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"tatara.dev/testkit/testutil"
)

const stubToken = "stub-push-token-8c2e41d9"

// stubUpstream records what reaches the upstream.
type stubUpstream struct {
	mu       sync.Mutex
	requests []stubRequest
}

type stubRequest struct {
	method, uri string
	header      http.Header
	body        []byte
	readErr     error
}

func (s *stubUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, stubRequest{r.Method, r.URL.RequestURI(), r.Header.Clone(), body, err})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	_, _ = io.WriteString(w, "ok")
}

func (s *stubUpstream) all() []stubRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]stubRequest(nil), s.requests...)
}

type stubGateway struct {
	url  string
	up   *stubUpstream
	reg  *prometheus.Registry
	logs *testutil.SyncBuffer
}

func newStubGateway(t *testing.T, maxBytes int64) *stubGateway {
	t.Helper()
	up := &stubUpstream{}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	u, _ := url.Parse(upSrv.URL + "/org/demo.git")
	g := &stubGateway{up: up, reg: prometheus.NewRegistry(), logs: &testutil.SyncBuffer{}}
	h, err := NewHandler(Config{Upstream: u, Token: stubToken, BranchPrefix: "tatara/t1", MaxPushBytes: maxBytes, Registerer: g.reg},
		slog.New(slog.NewJSONHandler(g.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

func (g *stubGateway) post(t *testing.T, body []byte, header map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.url+"/git-receive-pack", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = io.WriteString(zw, s)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const pack = "PACK\x00\x00\x00\x02\x00\x00\x00\x00packdata"

// Every receive-pack request the handler answers itself, and every one it forwards.
func TestReceivePackHandling(t *testing.T) {
	first := func(ref string) string {
		return zero1 + " " + oidB + " " + ref + "\x00report-status side-band-64k agent=git/2.39.5"
	}
	tests := []struct {
		name       string
		body       []byte
		header     map[string]string
		maxBytes   int64
		wantStatus int
		wantBody   string // substring of the gateway's answer
		forwarded  string // the body the upstream gets; empty means nothing reaches it
		outcome    string // the counter incremented, if any
	}{
		{name: "task branch", body: []byte(cmds(first("refs/heads/tatara/t1")) + pack),
			wantStatus: 200, forwarded: cmds(first("refs/heads/tatara/t1")) + pack, outcome: OutcomeAccepted},
		{name: "under the task branch, with shallow lines", body: []byte(cmds("shallow "+oidA, first("refs/heads/tatara/t1/x"), oidA+" "+oidB+" refs/heads/tatara/t1/y") + pack),
			wantStatus: 200, forwarded: cmds("shallow "+oidA, first("refs/heads/tatara/t1/x"), oidA+" "+oidB+" refs/heads/tatara/t1/y") + pack, outcome: OutcomeAccepted},
		{name: "gzip body is forwarded decompressed", body: gz(t, cmds(first("refs/heads/tatara/t1"))+pack), header: map[string]string{"Content-Encoding": "gzip"},
			wantStatus: 200, forwarded: cmds(first("refs/heads/tatara/t1")) + pack, outcome: OutcomeAccepted},
		{name: "probe (flush only) is forwarded uncounted", body: []byte("0000"), wantStatus: 200, forwarded: "0000"},
		{name: "main", body: []byte(cmds(first("refs/heads/main")) + pack),
			wantStatus: 200, wantBody: "ng refs/heads/main refs/heads/main is outside refs/heads/tatara/t1 (the Task's branch)\n", outcome: OutcomeRefused},
		{name: "main, a client without report-status", body: []byte(cmds(zero1+" "+oidB+" refs/heads/main\x00agent=old") + pack),
			wantStatus: 403, wantBody: "push refused: refs/heads/main is outside refs/heads/tatara/t1 (the Task's branch)", outcome: OutcomeRefused},
		{name: "gzip body refused", body: gz(t, cmds(first("refs/heads/main"))+pack), header: map[string]string{"Content-Encoding": "gzip"},
			wantStatus: 200, wantBody: "ng refs/heads/main refs/heads/main is outside", outcome: OutcomeRefused},
		{name: "prefix is a whole component", body: []byte(cmds(first("refs/heads/tatara/t10"))),
			wantStatus: 200, wantBody: "ng refs/heads/tatara/t10 refs/heads/tatara/t10 is outside", outcome: OutcomeRefused},
		{name: "tag", body: []byte(cmds(first("refs/tags/tatara/t1"))),
			wantStatus: 200, wantBody: "ng refs/tags/tatara/t1 refs/tags/tatara/t1 is outside", outcome: OutcomeRefused},
		{name: "one bad ref refuses all", body: []byte(cmds(first("refs/heads/tatara/t1"), oidA+" "+oidB+" refs/heads/main") + pack),
			wantStatus: 200, wantBody: "ng refs/heads/tatara/t1 not pushed: another ref of this push was refused\n005bng refs/heads/main refs/heads/main is outside", outcome: OutcomeRefused},
		{name: "deletion sha1", body: []byte(cmds(oidA + " " + zero1 + " refs/heads/tatara/t1\x00report-status")),
			wantStatus: 200, wantBody: "000eunpack ok\n0066ng refs/heads/tatara/t1 refs/heads/tatara/t1 would be deleted; the git gateway never deletes refs\n0000", outcome: OutcomeRefused},
		{name: "deletion sha256", body: []byte(cmds(oidA256 + " " + zero256 + " refs/heads/tatara/t1/x\x00object-format=sha256")),
			wantStatus: 403, wantBody: "refs/heads/tatara/t1/x would be deleted", outcome: OutcomeRefused},
		{name: "invalid ref under the branch", body: []byte(cmds(first("refs/heads/tatara/t1/../../main"))),
			wantStatus: 200, wantBody: `"refs/heads/tatara/t1/../../main" is not a valid ref name`, outcome: OutcomeRefused},
		{name: "push-cert", body: []byte(cmds("push-cert\x00report-status", "certificate version 0.1\n")),
			wantStatus: 403, wantBody: "signed pushes (push-cert) are not supported", outcome: OutcomeRefused},
		{name: "push options", body: []byte(cmds(zero1+" "+oidB+" refs/heads/tatara/t1\x00report-status push-options") + pkt("merge_request.create") + "0000" + pack),
			wantStatus: 200, wantBody: "ng refs/heads/tatara/t1 push options (git push -o) are not supported", outcome: OutcomeRefused},
		{name: "push options hidden after a second NUL (git reads the capabilities up to it)",
			body:       []byte(cmds(zero1+" "+oidB+" refs/heads/tatara/t1\x00report-status push-options\x00x") + pkt("merge_request.create") + "0000" + pack),
			wantStatus: 200, wantBody: "ng refs/heads/tatara/t1 push options (git push -o) are not supported", outcome: OutcomeRefused},
		{name: "unknown capability", body: []byte(cmds(zero1+" "+oidB+" refs/heads/tatara/t1\x00report-status x-merge-when-pipeline-succeeds") + pack),
			wantStatus: 200, wantBody: `capability "x-merge-when-pipeline-succeeds" is not supported`, outcome: OutcomeRefused},
		{name: "malformed", body: []byte("00zz"), wantStatus: 400, wantBody: `invalid push request: bad pkt-line length "00zz"`, outcome: OutcomeRefused},
		{name: "truncated", body: []byte(pkt(first("refs/heads/tatara/t1"))), wantStatus: 400, wantBody: "truncated", outcome: OutcomeRefused},
		{name: "corrupt gzip", body: []byte("not gzip"), header: map[string]string{"Content-Encoding": "gzip"},
			wantStatus: 400, wantBody: "the gzip body does not decompress", outcome: OutcomeRefused},
		{name: "other encoding", body: []byte(cmds(first("refs/heads/tatara/t1"))), header: map[string]string{"Content-Encoding": "br"},
			wantStatus: 415, wantBody: `Content-Encoding "br" is not supported`, outcome: OutcomeRefused},
		{name: "over the size limit in the command list", body: []byte(cmds(first("refs/heads/tatara/t1")) + pack), maxBytes: 50,
			wantStatus: 413, wantBody: "exceeds 50 bytes", outcome: OutcomeRefused},
		{name: "gzip over the size limit once decompressed", body: gz(t, cmds("shallow "+oidA, "shallow "+oidB, first("refs/heads/tatara/t1"))), header: map[string]string{"Content-Encoding": "gzip"}, maxBytes: 150,
			wantStatus: 413, wantBody: "exceeds 150 bytes", outcome: OutcomeRefused},
		{name: "over the size limit in the pack", body: []byte(cmds(first("refs/heads/tatara/t1")) + strings.Repeat("P", 4096)), maxBytes: 1024,
			wantStatus: 413, wantBody: "exceeds 1024 bytes", outcome: OutcomeAccepted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newStubGateway(t, tt.maxBytes)
			status, body := g.post(t, tt.body, tt.header)
			if status != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", status, body, tt.wantStatus, tt.wantBody)
			}
			reqs := g.up.all()
			switch {
			case tt.forwarded == "" && tt.wantStatus != 413 && len(reqs) > 0:
				t.Fatalf("the upstream got %d requests, want none", len(reqs))
			case tt.forwarded != "":
				if len(reqs) != 1 {
					t.Fatalf("the upstream got %d requests, want 1", len(reqs))
				}
				r := reqs[0]
				if r.method != http.MethodPost || r.uri != "/org/demo.git/git-receive-pack" {
					t.Errorf("upstream request %s %s, want POST /org/demo.git/git-receive-pack", r.method, r.uri)
				}
				if string(r.body) != tt.forwarded {
					t.Errorf("upstream body %q, want %q", r.body, tt.forwarded)
				}
				if ce := r.header.Get("Content-Encoding"); ce != "" {
					t.Errorf("upstream Content-Encoding %q, want none", ce)
				}
				if user, pass, ok := basicAuth(r.header); !ok || user != DefaultUsername || pass != stubToken {
					t.Errorf("upstream credential %q:%q, want the gateway's", user, pass)
				}
			}
			for _, o := range []string{OutcomeAccepted, OutcomeRefused} {
				want := 0.0
				if o == tt.outcome {
					want = 1
				}
				if got := counterValue(t, g.reg, o); got != want {
					t.Errorf("tatara_git_gateway_pushes_total{outcome=%q} = %v, want %v", o, got, want)
				}
			}
			if strings.Contains(g.logs.String(), stubToken) {
				t.Errorf("the token is in the log:\n%s", g.logs.String())
			}
		})
	}
}

func basicAuth(h http.Header) (string, string, bool) {
	r := &http.Request{Header: h}
	return r.BasicAuth()
}

func counterValue(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tatara_git_gateway_pushes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no tatara_git_gateway_pushes_total{outcome=%q}", outcome)
	return 0
}

func TestPushCounterLintsAndStartsAtZero(t *testing.T) {
	g := newStubGateway(t, 0)
	problems, err := promtest.GatherAndLint(g.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric lint: %s: %s", p.Metric, p.Text)
	}
	if n := promtest.CollectAndCount(g.reg, "tatara_git_gateway_pushes_total"); n != 2 {
		t.Errorf("%d series, want 2 (accepted, refused)", n)
	}
	// A second handler on the same registry shares the counter.
	u, _ := url.Parse("http://example.invalid/x.git")
	if _, err := NewHandler(Config{Upstream: u, Token: "t", BranchPrefix: "b", Registerer: g.reg}, nil); err != nil {
		t.Fatal(err)
	}
}

// Fetch requests go to the upstream path with only the service parameter, the gateway's
// credential and none of the client's headers that carry credentials.
func TestForwardedFetchRequests(t *testing.T) {
	g := newStubGateway(t, 0)
	for _, tt := range []struct {
		method, target, want string
	}{
		{http.MethodGet, "/info/refs?service=git-upload-pack&x=1", "/org/demo.git/info/refs?service=git-upload-pack"},
		{http.MethodGet, "/info/refs?service=git-receive-pack", "/org/demo.git/info/refs?service=git-receive-pack"},
		{http.MethodPost, "/git-upload-pack?service=x", "/org/demo.git/git-upload-pack"},
	} {
		req, _ := http.NewRequest(tt.method, g.url+tt.target, strings.NewReader("0000"))
		req.SetBasicAuth("agent", "agent-password")
		req.Header.Set("Cookie", "session=agent")
		req.Header.Set("Proxy-Authorization", "Basic YWdlbnQ6cHJveHk=")
		req.Header.Set("Forwarded", "for=1.2.3.4")
		req.Header.Set("Git-Protocol", "version=2")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d", tt.method, tt.target, resp.StatusCode)
		}
	}
	reqs := g.up.all()
	if len(reqs) != 3 {
		t.Fatalf("upstream got %d requests, want 3", len(reqs))
	}
	for i, want := range []string{"/org/demo.git/info/refs?service=git-upload-pack", "/org/demo.git/info/refs?service=git-receive-pack", "/org/demo.git/git-upload-pack"} {
		r := reqs[i]
		if r.uri != want {
			t.Errorf("upstream request %d: %s, want %s", i, r.uri, want)
		}
		if user, pass, _ := basicAuth(r.header); user != DefaultUsername || pass != stubToken {
			t.Errorf("upstream request %d: credential %q:%q, want the gateway's", i, user, pass)
		}
		for _, h := range []string{"Cookie", "Proxy-Authorization", "Forwarded", "X-Forwarded-For"} {
			if v := r.header.Get(h); v != "" {
				t.Errorf("upstream request %d: %s %q forwarded", i, h, v)
			}
		}
		if v := r.header.Get("Git-Protocol"); v != "version=2" {
			t.Errorf("upstream request %d: Git-Protocol %q, want version=2", i, v)
		}
	}
}

// Of the client's request headers, only those git's smart HTTP needs reach the upstream, on
// every forwarded request, the push included: X-Original-URL and its kind route a request at the
// upstream's front end, and must never travel with the gateway's credential.
func TestForwardedRequestHeaders(t *testing.T) {
	gatewayAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(DefaultUsername+":"+stubToken))
	headers := []struct {
		name, sent string
		want       string // what the upstream gets; empty means the header is dropped
	}{
		{"Content-Type", "application/x-git-upload-pack-request", "application/x-git-upload-pack-request"},
		{"Content-Encoding", "gzip", "gzip"},
		{"Accept", "application/x-git-upload-pack-result", "application/x-git-upload-pack-result"},
		{"Accept-Encoding", "deflate, gzip, br", "deflate, gzip, br"},
		{"Git-Protocol", "version=2", "version=2"},
		{"User-Agent", "git/2.39.5", "git/2.39.5"},
		{"Authorization", "Basic YWdlbnQ6YWdlbnQtcGFzc3dvcmQ=", gatewayAuth},
		{"X-Original-URL", "/org/other.git/git-receive-pack", ""},
		{"X-Rewrite-URL", "/org/other.git/git-receive-pack", ""},
		{"X-HTTP-Method-Override", "DELETE", ""},
		{"X-HTTP-Method", "DELETE", ""},
		{"X-Method-Override", "DELETE", ""},
		{"Cookie", "session=agent", ""},
		{"Proxy-Authorization", "Basic YWdlbnQ6cHJveHk=", ""},
		{"Private-Token", "agent-token", ""},
		{"Forwarded", "for=1.2.3.4;host=other.example.com", ""},
		{"X-Forwarded-For", "1.2.3.4", ""},
		{"X-Forwarded-Host", "other.example.com", ""},
		{"X-Forwarded-Prefix", "/org/other.git", ""},
		{"X-Real-IP", "1.2.3.4", ""},
		{"X-Agent-Custom", "anything", ""},
		{"Te", "trailers", ""},
	}
	push := cmds(zero1 + " " + oidB + " refs/heads/tatara/t1\x00report-status")
	requests := []struct {
		method, target string
		body           []byte
		decompressed   bool // the gateway forwards the body decompressed, without Content-Encoding
	}{
		{http.MethodGet, "/info/refs?service=git-upload-pack", nil, false},
		{http.MethodGet, "/info/refs?service=git-receive-pack", nil, false},
		{http.MethodPost, "/git-upload-pack", gz(t, "0000"), false},
		{http.MethodPost, "/git-receive-pack", gz(t, push+pack), true},
	}
	for _, rq := range requests {
		t.Run(rq.method+" "+rq.target, func(t *testing.T) {
			g := newStubGateway(t, 0)
			req, _ := http.NewRequest(rq.method, g.url+rq.target, bytes.NewReader(rq.body))
			for _, h := range headers {
				req.Header.Set(h.name, h.sent)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			reqs := g.up.all()
			if resp.StatusCode != http.StatusOK || len(reqs) != 1 {
				t.Fatalf("got %d, the upstream %d requests; want 200 and 1", resp.StatusCode, len(reqs))
			}
			got := reqs[0].header
			allowed := map[string]bool{"Content-Length": true} // set by net/http
			for _, h := range headers {
				want := h.want
				if h.name == "Content-Encoding" && rq.decompressed {
					want = ""
				}
				if v := strings.Join(got.Values(h.name), ", "); v != want {
					t.Errorf("upstream %s %q, want %q", h.name, v, want)
				}
				allowed[http.CanonicalHeaderKey(h.name)] = want != ""
			}
			for k, v := range got {
				if !allowed[k] {
					t.Errorf("upstream got %s %q, which the gateway must not forward", k, v)
				}
			}
		})
	}
}

func TestNewHandlerValidation(t *testing.T) {
	mustURL := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	good := func() Config {
		return Config{Upstream: mustURL("https://git.example.com/org/repo.git"), Token: "tok", BranchPrefix: "tatara/t1"}
	}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"valid", func(*Config) {}, ""},
		{"valid http", func(c *Config) { c.Upstream = mustURL("http://127.0.0.1:8080/demo.git") }, ""},
		{"no upstream", func(c *Config) { c.Upstream = nil }, "invalid upstream: no URL given"},
		{"ssh upstream", func(c *Config) { c.Upstream = mustURL("ssh://git@example.com/org/repo.git") }, "scheme must be http or https"},
		{"file upstream", func(c *Config) { c.Upstream = mustURL("file:///srv/repo.git") }, "scheme must be http or https"},
		{"userinfo", func(c *Config) { c.Upstream = mustURL("https://user:s3cr3t-in-url@example.com/r.git") }, "must not carry credentials"},
		{"token as user", func(c *Config) { c.Upstream = mustURL("https://s3cr3t-in-url@example.com/r.git") }, "must not carry credentials"},
		{"no host", func(c *Config) { c.Upstream = mustURL("https:///r.git") }, "no host"},
		{"query", func(c *Config) { c.Upstream = mustURL("https://example.com/r.git?a=b") }, "query or fragment"},
		{"fragment", func(c *Config) { c.Upstream = mustURL("https://example.com/r.git#x") }, "query or fragment"},
		{"empty token", func(c *Config) { c.Token = "" }, "invalid token: it is empty"},
		{"blank token", func(c *Config) { c.Token = " \n" }, "invalid token: it is empty"},
		{"token with newline", func(c *Config) { c.Token = "abc\ndef" }, "control character"},
		{"username with colon", func(c *Config) { c.Username = "a:b" }, "invalid username"},
		{"empty prefix", func(c *Config) { c.BranchPrefix = "" }, "branch prefix is empty"},
		{"prefix with ..", func(c *Config) { c.BranchPrefix = "tatara/../main" }, `contains ".."`},
		{"prefix with leading -", func(c *Config) { c.BranchPrefix = "-t" }, "begins with -"},
		{"prefix with trailing /", func(c *Config) { c.BranchPrefix = "tatara/" }, "ends with /"},
		{"negative max", func(c *Config) { c.MaxPushBytes = -1 }, "invalid max push bytes -1"},
		{"claim file instead of a prefix", func(c *Config) { c.BranchPrefix, c.ClaimFile = "", "/claim/assignment.json" }, ""},
		{"claim file and prefix", func(c *Config) { c.ClaimFile = "/claim/assignment.json" }, "mutually exclusive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good()
			tt.mutate(&cfg)
			_, err := NewHandler(cfg, nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "s3cr3t-in-url") || (cfg.Token != "" && strings.Contains(err.Error(), cfg.Token) && len(cfg.Token) > 3) {
				t.Fatalf("the error shows a credential: %v", err)
			}
		})
	}
}

// An upstream that refuses the credential or redirects is answered 502, without its challenge.
func TestUpstreamChallengesAndRedirectsAreNotPassedOn(t *testing.T) {
	for _, tt := range []struct {
		name     string
		upstream http.HandlerFunc
		wantBody string
	}{
		{"401", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
			w.Header().Set("Set-Cookie", "a=b")
			w.WriteHeader(http.StatusUnauthorized)
		}, "refused the git gateway's credential (HTTP 401)"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.example.com/other.git/info/refs", http.StatusMovedPermanently)
		}, "does not follow redirects"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := httptest.NewServer(tt.upstream)
			defer up.Close()
			u, _ := url.Parse(up.URL + "/demo.git")
			h, err := NewHandler(Config{Upstream: u, Token: stubToken, BranchPrefix: "tatara/t1"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/info/refs?service=git-upload-pack", nil))
			if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("got %d %q, want 502 containing %q", rec.Code, rec.Body.String(), tt.wantBody)
			}
			for _, h := range []string{"WWW-Authenticate", "Set-Cookie", "Location"} {
				if v := rec.Header().Get(h); v != "" {
					t.Errorf("%s %q passed on", h, v)
				}
			}
		})
	}
}
