package modelgateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/cli/pkg/claim"
	"tatara.dev/testkit/testutil"
)

const testKey = "sk-ant-api03-stub-credential-5f3a9c1e7b2d"

// stubUpstream records what reaches the upstream and answers with answer (a short stream when
// nil).
type stubUpstream struct {
	mu       sync.Mutex
	requests []stubRequest
	answer   http.HandlerFunc
}

type stubRequest struct {
	method, uri string
	header      http.Header
	body        string
}

func (s *stubUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, stubRequest{r.Method, r.URL.RequestURI(), r.Header.Clone(), string(b)})
	answer := s.answer
	s.mu.Unlock()
	if answer == nil {
		answer = streamAnswer(messageStream("claude-test-1", apiUsage{InputTokens: 10}, 3))
	}
	answer(w, r)
}

func (s *stubUpstream) all() []stubRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]stubRequest(nil), s.requests...)
}

func (s *stubUpstream) setAnswer(a http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = a
}

type fixture struct {
	gw   *Gateway
	url  string
	up   *stubUpstream
	reg  *prometheus.Registry
	logs *testutil.SyncBuffer
	// usageFile is where the gateway writes its usage.
	usageFile string
}

// newFixture serves a gateway in front of a stub upstream, both on 127.0.0.1. The upstream's
// base path is cfg.Upstream's path if set, else /base; cfg's Upstream, Credential, UsageFile
// and Registerer are filled in.
func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	f := &fixture{up: &stubUpstream{}, reg: prometheus.NewRegistry(), logs: &testutil.SyncBuffer{}}
	upSrv := httptest.NewServer(f.up)
	t.Cleanup(upSrv.Close)
	base := "/base"
	if cfg.Upstream != nil {
		base = cfg.Upstream.Path
	}
	cfg.Upstream, _ = url.Parse(upSrv.URL + base)
	if cfg.Credential == "" {
		cfg.Credential = testKey
	}
	if cfg.UsageFile == "" {
		cfg.UsageFile = filepath.Join(t.TempDir(), "usage.json")
	}
	f.usageFile = cfg.UsageFile
	cfg.Registerer = f.reg
	// The raw log, unredacted: the package itself must never log the credential.
	gw, err := New(cfg, slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	f.gw = gw
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// result is the gateway's answer to one request.
type result struct {
	code   int
	header http.Header
	body   string
}

func (f *fixture) do(t testing.TB, method, target, body string, header map[string]string) result {
	t.Helper()
	req, err := http.NewRequest(method, f.url+target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	// The agent's client never follows a redirect here, so the test sees what the gateway sent.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// The agent may have the whole body before the gateway has counted it (a body of a known
	// length ends before the handler does): wait, so the next request sees the totals.
	if err := f.gw.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	return result{resp.StatusCode, resp.Header, string(b)}
}

func (f *fixture) post(t testing.TB, target string) result {
	t.Helper()
	return f.do(t, http.MethodPost, target, `{"model":"claude-x","max_tokens":10,"stream":true,"messages":[]}`, nil)
}

// checkAPIError fails t unless res is the model API's error of the status and type, with a
// message containing each of want.
func checkAPIError(t *testing.T, res result, code int, errType string, want ...string) {
	t.Helper()
	var e apiError
	if err := json.Unmarshal([]byte(res.body), &e); err != nil || e.Type != "error" {
		t.Fatalf("body %q is not the model API's error format (%v)", res.body, err)
	}
	if res.code != code || e.Error.Type != errType || res.header.Get("Content-Type") != "application/json" {
		t.Errorf("answer %d %s (%s), want %d %s as application/json", res.code, e.Error.Type, res.header.Get("Content-Type"), code, errType)
	}
	for _, w := range want {
		if !strings.Contains(e.Error.Message, w) {
			t.Errorf("error message %q lacks %q", e.Error.Message, w)
		}
	}
}

// sse is one server-sent event.
type sse struct{ event, data string }

func (e sse) String() string { return "event: " + e.event + "\ndata: " + e.data + "\n\n" }

// messageStream is a streamed message as the Messages API sends it: message_start with the
// input counts (and output 1), a text block, then one message_delta per output count, each
// cumulative.
func messageStream(model string, start apiUsage, outputs ...int64) []sse {
	start.OutputTokens = 1
	u, _ := json.Marshal(start)
	evs := []sse{
		{"message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"usage":%s}}`, model, u)},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"ping", `{"type": "ping"}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
	}
	for _, o := range outputs {
		evs = append(evs, sse{"message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, o)})
	}
	return append(evs, sse{"message_stop", `{"type":"message_stop"}`})
}

// streamAnswer writes the events as a stream, each flushed on its own.
func streamAnswer(evs []sse) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		for _, e := range evs {
			_, _ = io.WriteString(w, e.String())
			w.(http.Flusher).Flush()
		}
	}
}

func jsonAnswer(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// The agent's credential never reaches the upstream, the gateway's does, in the configured
// scheme; of the agent's other headers only the model API's go along.
func TestCredentialReplacesTheAgents(t *testing.T) {
	agentHeaders := map[string]string{
		"X-Api-Key":                "agent-key-0000000000",
		"Authorization":            "Bearer agent-token-000000",
		"Proxy-Authorization":      "Basic YWdlbnQ6cHJveHk=",
		"Cookie":                   "session=agent",
		"Anthropic-Api-Key":        "agent-key-1111111111", // credential-like under an allowed prefix
		"X-Stainless-Auth":         "agent-key-2222222222",
		"Forwarded":                "for=1.2.3.4",
		"X-Forwarded-For":          "1.2.3.4",
		"X-Original-Url":           "/v1/organizations",
		"X-Unknown":                "x",
		"Anthropic-Version":        "2023-06-01",
		"Anthropic-Beta":           "claude-code-20250219,interleaved-thinking-2025-05-14",
		"X-App":                    "cli",
		"X-Claude-Code-Session-Id": "3f0c7a5e-session",
		"User-Agent":               "claude-cli/2.0.0 (external, cli)",
		"X-Stainless-Lang":         "js",
		"X-Stainless-Retry-Count":  "0",
		"Anthropic-Dangerous-Direct-Browser-Access": "true",
		"Accept":          "application/json",
		"Accept-Encoding": "gzip, br",
		"Connection":      "keep-alive, X-Hop",
		"X-Hop":           "hop-by-hop",
	}
	forwarded := []string{"Anthropic-Version", "Anthropic-Beta", "X-App", "X-Claude-Code-Session-Id", "User-Agent",
		"X-Stainless-Lang", "X-Stainless-Retry-Count", "Anthropic-Dangerous-Direct-Browser-Access", "Accept", "Content-Type"}
	tests := []struct {
		scheme         string
		header, value  string
		absent         string
		wantForwarded  []string
		wantNotForward []string
	}{
		{scheme: "", header: "X-Api-Key", value: testKey, absent: "Authorization"},
		{scheme: AuthSchemeAPIKey, header: "X-Api-Key", value: testKey, absent: "Authorization"},
		{scheme: AuthSchemeBearer, header: "Authorization", value: "Bearer " + testKey, absent: "X-Api-Key"},
	}
	for _, tt := range tests {
		t.Run("scheme "+tt.scheme, func(t *testing.T) {
			f := newFixture(t, Config{AuthScheme: tt.scheme})
			const body = `{"model":"claude-x","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
			for _, target := range []string{PathMessages + "?beta=true", PathCountTokens + "?beta=true"} {
				if res := f.do(t, http.MethodPost, target, body, agentHeaders); res.code != http.StatusOK {
					t.Fatalf("POST %s: %d %s", target, res.code, res.body)
				}
			}
			reqs := f.up.all()
			if len(reqs) != 2 {
				t.Fatalf("upstream got %d requests, want 2", len(reqs))
			}
			for i, want := range []string{"/base/v1/messages?beta=true", "/base/v1/messages/count_tokens?beta=true"} {
				r := reqs[i]
				if r.method != http.MethodPost || r.uri != want || r.body != body {
					t.Errorf("upstream request %d: %s %s %q, want POST %s with the agent's body", i, r.method, r.uri, r.body, want)
				}
				if got := r.header.Values(tt.header); len(got) != 1 || got[0] != tt.value {
					t.Errorf("upstream request %d: %s = %q, want the gateway's credential only", i, tt.header, got)
				}
				if v := r.header.Get(tt.absent); v != "" {
					t.Errorf("upstream request %d: %s %q forwarded", i, tt.absent, v)
				}
				for _, h := range forwarded {
					if got, want := r.header.Get(h), agentHeaders[h]; h != "Content-Type" && got != want {
						t.Errorf("upstream request %d: %s = %q, want the agent's %q", i, h, got, want)
					}
				}
				for _, h := range []string{"Proxy-Authorization", "Cookie", "Anthropic-Api-Key", "X-Stainless-Auth", "Forwarded", "X-Forwarded-For",
					"X-Original-Url", "X-Unknown", "X-Hop"} {
					if v := r.header.Get(h); v != "" {
						t.Errorf("upstream request %d: %s %q forwarded", i, h, v)
					}
				}
				// Identity, so the meter reads what passes.
				if got := r.header.Get("Accept-Encoding"); got != "identity" {
					t.Errorf("upstream request %d: Accept-Encoding %q, want identity", i, got)
				}
				for k, v := range r.header {
					for _, s := range v {
						if strings.Contains(s, "agent-") {
							t.Errorf("upstream request %d: the agent's credential reached the upstream in %s: %q", i, k, s)
						}
					}
				}
			}
		})
	}
}

// The forwarded path is joined to the upstream's base path, whatever its slashes.
func TestUpstreamBasePath(t *testing.T) {
	for _, tt := range []struct{ base, want string }{
		{"", "/v1/messages?beta=true"},
		{"/", "/v1/messages?beta=true"},
		{"/anthropic", "/anthropic/v1/messages?beta=true"},
		{"/anthropic/", "/anthropic/v1/messages?beta=true"},
	} {
		t.Run(tt.base, func(t *testing.T) {
			f := newFixture(t, Config{Upstream: &url.URL{Path: tt.base}})
			if res := f.post(t, PathMessages+"?beta=true"); res.code != http.StatusOK {
				t.Fatalf("%d %s", res.code, res.body)
			}
			if reqs := f.up.all(); len(reqs) != 1 || reqs[0].uri != tt.want {
				t.Errorf("upstream requests %v, want one to %s", reqs, tt.want)
			}
		})
	}
}

// Only POST /v1/messages and POST /v1/messages/count_tokens reach the upstream; anything else is
// a 404 in the model API's error format, naming what was asked.
func TestOnlyTheMessagesAPIIsForwarded(t *testing.T) {
	f := newFixture(t, Config{})
	tests := []struct{ method, target, wantPath string }{
		{http.MethodGet, "/v1/messages", "/v1/messages"},
		{http.MethodPut, "/v1/messages/count_tokens", "/v1/messages/count_tokens"},
		{http.MethodPost, "/v1/complete", "/v1/complete"},
		{http.MethodPost, "/v1/messages/batches", "/v1/messages/batches"},
		{http.MethodGet, "/v1/models", "/v1/models"},
		{http.MethodPost, "/v1/messages/", "/v1/messages/"},
		{http.MethodPost, "/v1//messages", "/v1//messages"},
		{http.MethodPost, "/v1/%6Dessages", "/v1/%6Dessages"},
		{http.MethodPost, "/base/v1/messages", "/base/v1/messages"},
		{http.MethodPost, "/", "/"},
		{http.MethodDelete, "/v1/files/f1?x=1", "/v1/files/f1"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			res := f.do(t, tt.method, tt.target, "{}", nil)
			checkAPIError(t, res, http.StatusNotFound, errNotFound, tt.method+" "+tt.wantPath, "POST /v1/messages and POST /v1/messages/count_tokens")
		})
	}
	// The agent CLI's check that its base URL answers is answered by the gateway itself; the
	// same request for another host (a proxy's absolute form) is not.
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		if res := f.do(t, method, "/", "", nil); res.code != http.StatusOK {
			t.Errorf("%s / = %d, want 200", method, res.code)
		}
		rec := httptest.NewRecorder()
		f.gw.ServeHTTP(rec, httptest.NewRequest(method, "http://example.com/", nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s http://example.com/ = %d, want 404", method, rec.Code)
		}
	}
	if n := len(f.up.all()); n != 0 {
		t.Errorf("%d requests reached the upstream, want none", n)
	}
}

// A redirect from the upstream comes back to the agent as it is: the gateway does not follow it.
func TestRedirectIsPassedBackNotFollowed(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			f := newFixture(t, Config{})
			f.up.setAnswer(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/elsewhere/v1/messages", code)
			})
			res := f.post(t, PathMessages)
			if res.code != code || res.header.Get("Location") != "/elsewhere/v1/messages" {
				t.Errorf("answer %d, Location %q; want %d to /elsewhere/v1/messages", res.code, res.header.Get("Location"), code)
			}
			if reqs := f.up.all(); len(reqs) != 1 || reqs[0].uri != "/base/v1/messages" {
				t.Errorf("upstream requests %v, want the one forwarded and no followed redirect", reqs)
			}
		})
	}
}

// A body above the limit is refused with 413, before forwarding when its length is announced.
func TestRequestBodyLimit(t *testing.T) {
	f := newFixture(t, Config{MaxRequestBytes: 1024})
	big := `{"messages":"` + strings.Repeat("x", 2000) + `"}`
	checkAPIError(t, f.do(t, http.MethodPost, PathMessages, big, nil), http.StatusRequestEntityTooLarge, errTooLarge, "limit of 1024 bytes")
	if n := len(f.up.all()); n != 0 {
		t.Errorf("%d requests reached the upstream, want none", n)
	}
	// Without a length (chunked), the upload is cut at the limit.
	req, _ := http.NewRequest(http.MethodPost, f.url+PathMessages, io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	checkAPIError(t, result{resp.StatusCode, resp.Header, string(b)}, http.StatusRequestEntityTooLarge, errTooLarge, "limit of 1024 bytes")
	// Within the limit, it passes.
	if res := f.post(t, PathMessages); res.code != http.StatusOK {
		t.Errorf("a small request: %d %s", res.code, res.body)
	}
}

// A pool pod's gateway (--claim-file) answers 503 until the claim exists (500 while the file
// is unreadable), then forwards.
func TestClaimFileHoldsRequestsUntilTheClaim(t *testing.T) {
	claimFile := filepath.Join(t.TempDir(), "assignment.json")
	f := newFixture(t, Config{ClaimFile: claimFile})
	for _, target := range []string{PathMessages + "?beta=true", PathCountTokens} {
		checkAPIError(t, f.post(t, target), http.StatusServiceUnavailable, errAPI, "not claimed yet")
	}
	// Not a model request is still 404.
	checkAPIError(t, f.do(t, http.MethodGet, "/v1/models", "", nil), http.StatusNotFound, errNotFound)

	if err := os.WriteFile(claimFile, []byte(`{"project":`), 0o600); err != nil {
		t.Fatal(err)
	}
	checkAPIError(t, f.post(t, PathMessages), http.StatusInternalServerError, errAPI, "cannot read this pod's claim")
	if err := os.Remove(claimFile); err != nil {
		t.Fatal(err)
	}
	if n := len(f.up.all()); n != 0 {
		t.Fatalf("%d requests reached the upstream before the claim, want none", n)
	}

	if err := claim.WriteFile(claimFile, claim.Assignment{Project: "proj", Task: "t1", Kind: "implement", Directive: "do it"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if res := f.post(t, PathMessages); res.code != http.StatusOK {
			t.Fatalf("after the claim: %d %s", res.code, res.body)
		}
	}
	if n := len(f.up.all()); n != 2 {
		t.Errorf("%d requests reached the upstream after the claim, want 2", n)
	}
	if got := strings.Count(f.logs.String(), `"msg":"pod claimed"`); got != 1 {
		t.Errorf("%d \"pod claimed\" log lines, want 1:\n%s", got, f.logs.String())
	}
}

// The credential is in no log line and no answer of the gateway's, whatever happens: a
// success, a refusal, an upstream that fails, one that echoes the credential in its error.
func TestCredentialNeverLeaks(t *testing.T) {
	for _, scheme := range []string{AuthSchemeAPIKey, AuthSchemeBearer} {
		t.Run(scheme, func(t *testing.T) {
			f := newFixture(t, Config{AuthScheme: scheme, TokenBudget: 1000})
			var answers []result
			answers = append(answers, f.post(t, PathMessages), f.do(t, http.MethodGet, "/v1/models", "", nil))
			f.up.setAnswer(jsonAnswer(http.StatusUnauthorized, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key `+testKey+`"}}`))
			echoed := f.post(t, PathMessages)
			answers = append(answers, echoed)
			checkAPIError(t, echoed, http.StatusUnauthorized, "authentication_error", "invalid x-api-key [REDACTED]")
			f.up.setAnswer(streamAnswer([]sse{{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}}))
			answers = append(answers, f.post(t, PathMessages))
			f.up.setAnswer(func(w http.ResponseWriter, _ *http.Request) { // the connection dies
				hj, _ := w.(http.Hijacker)
				c, _, _ := hj.Hijack()
				_ = c.Close()
			})
			answers = append(answers, f.post(t, PathMessages))
			f.up.setAnswer(streamAnswer(messageStream("claude-test-1", apiUsage{InputTokens: 2000}, 10)))
			answers = append(answers, f.post(t, PathMessages), f.post(t, PathMessages)) // the second is over budget
			if last := answers[len(answers)-1]; last.code != http.StatusBadRequest {
				t.Errorf("the request over budget: %d %s", last.code, last.body)
			}

			for i, a := range answers {
				if strings.Contains(a.body, testKey) || strings.Contains(fmt.Sprint(a.header), testKey) {
					t.Errorf("answer %d carries the credential: %v %s", i, a.header, a.body)
				}
			}
			logs := f.logs.String()
			if strings.Count(logs, "\n") < 7 {
				t.Errorf("too few log lines to prove anything:\n%s", logs)
			}
			for line := range strings.SplitSeq(logs, "\n") {
				if strings.Contains(line, testKey) {
					t.Errorf("the credential reached the log: %s", line)
				}
			}
			if raw, _ := os.ReadFile(f.usageFile); strings.Contains(string(raw), testKey) {
				t.Errorf("the credential reached the usage file: %s", raw)
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	u, _ := url.Parse("https://api.example.com")
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no upstream", Config{Credential: testKey}, "invalid upstream (--upstream): no URL given"},
		{"ftp upstream", Config{Upstream: parse("ftp://api.example.com"), Credential: testKey}, "scheme must be http or https"},
		{"credential in the upstream", Config{Upstream: parse("https://u:" + testKey + "@api.example.com"), Credential: testKey}, "must not carry credentials"},
		{"query in the upstream", Config{Upstream: parse("https://api.example.com?beta=true"), Credential: testKey}, "must not have a query"},
		{"no host", Config{Upstream: parse("https:///v1"), Credential: testKey}, "no host"},
		{"empty credential", Config{Upstream: u, Credential: " \n"}, "invalid credential (--credential-file): it is empty"},
		{"credential with a newline", Config{Upstream: u, Credential: testKey + "\nx"}, "control character"},
		{"auth scheme", Config{Upstream: u, Credential: testKey, AuthScheme: "basic"}, `invalid auth scheme "basic" (--auth-scheme)`},
		{"negative budget", Config{Upstream: u, Credential: testKey, TokenBudget: -1}, "invalid token budget -1 (--token-budget)"},
		{"negative tokens used", Config{Upstream: u, Credential: testKey, TokensUsed: -1}, "invalid tokens used -1 (--tokens-used)"},
		{"unwritable usage file", Config{Upstream: u, Credential: testKey, UsageFile: filepath.Join(t.TempDir(), "no", "dir", "usage.json")}, "failed to write the usage file (--usage-file)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("the error carries the credential: %v", err)
			}
		})
	}
}

// With MaxConcurrent requests under way, the next is refused with 429 (which the SDK retries)
// before it reaches the upstream, and served once one has ended: the budget, checked before each
// request, can be passed by at most that many.
func TestConcurrentRequestsAreBounded(t *testing.T) {
	const limit = 2
	f := newFixture(t, Config{MaxConcurrent: limit})
	arrived, release := make(chan struct{}, limit), make(chan struct{})
	f.up.setAnswer(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		streamAnswer(messageStream("claude-x", apiUsage{InputTokens: 1}, 1))(w, r)
	})
	var wg sync.WaitGroup
	for range limit {
		wg.Go(func() { f.post(t, PathMessages) })
	}
	for range limit {
		<-arrived // each held upstream: both places taken
	}
	// Not f.post, which waits for every request under way to be counted.
	resp, err := http.Post(f.url+PathMessages, "application/json", strings.NewReader(`{"model":"claude-x","stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	res := result{resp.StatusCode, resp.Header, string(body)}
	checkAPIError(t, res, http.StatusTooManyRequests, errRateLimit, "at most 2 model requests at once")
	if res.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	close(release)
	wg.Wait()
	f.up.setAnswer(streamAnswer(messageStream("claude-x", apiUsage{InputTokens: 1}, 1)))
	if res := f.post(t, PathMessages); res.code != http.StatusOK {
		t.Errorf("after the others ended: %d %s, want 200", res.code, res.body)
	}
	if n := len(f.up.all()); n != limit+1 {
		t.Errorf("%d requests reached the upstream, want %d (the refused one did not)", n, limit+1)
	}
}

// Of the query, only beta reaches the upstream: the agent cannot steer a gateway upstream with
// parameters of its own.
func TestOnlyTheBetaQueryIsForwarded(t *testing.T) {
	f := newFixture(t, Config{})
	f.up.setAnswer(streamAnswer(messageStream("claude-x", apiUsage{InputTokens: 1}, 1)))
	for target, want := range map[string]string{
		PathMessages + "?beta=true":                   "/base/v1/messages?beta=true",
		PathMessages + "?beta=true&route=other&key=x": "/base/v1/messages?beta=true",
		PathMessages + "?route=other":                 "/base/v1/messages",
	} {
		before := len(f.up.all())
		if res := f.post(t, target); res.code != http.StatusOK {
			t.Fatalf("%s: %d %s", target, res.code, res.body)
		}
		if got := f.up.all()[before].uri; got != want {
			t.Errorf("%s reached the upstream as %s, want %s", target, got, want)
		}
	}
}
