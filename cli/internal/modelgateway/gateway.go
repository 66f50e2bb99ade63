// Package modelgateway is the model API gateway of the agent pod (`tatara model-gateway`). The
// agent runs arbitrary code and is treated as an attacker; it must call the model without ever
// seeing the model API's credential. The gateway, a sidecar listening on loopback, alone holds
// it: the agent CLI's ANTHROPIC_BASE_URL is the gateway, which forwards the two requests of the
// Messages API the CLI makes (POST /v1/messages and POST /v1/messages/count_tokens) to the one
// upstream it was configured with, replacing whatever credential the client sent with its own.
//
// On the way back it meters the tokens each response reports, reading server-sent events as
// they stream through without holding them, keeps the pod's totals in a modelusage.Usage and
// rewrites them to a file after every response (the container's termination message, which the
// operator adds to the Task's status). With a token budget, it refuses the next request once the
// Task's tokens reach it.
//
// In a warm pool's pod the gateway starts before any Task exists and refuses every request
// until the claim file (cli/pkg/claim) exists.
package modelgateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/cli/internal/upstream"
	"tatara.dev/cli/pkg/claim"
	"tatara.dev/cli/pkg/modelusage"
	"tatara.dev/cli/pkg/redact"
)

// The two requests forwarded, relative to the gateway's root and to the upstream URL.
const (
	PathMessages    = "/v1/messages"
	PathCountTokens = "/v1/messages/count_tokens"
)

// How the credential is sent upstream, the values of Config.AuthScheme: as ANTHROPIC_API_KEY is
// (x-api-key: <key>) or as ANTHROPIC_AUTH_TOKEN is (Authorization: Bearer <token>).
const (
	AuthSchemeAPIKey = "x-api-key"
	AuthSchemeBearer = "bearer"
)

// DefaultMaxRequestBytes bounds a request body: the Messages API's own limit.
const DefaultMaxRequestBytes int64 = 32 << 20

// DefaultMaxConcurrent bounds the requests forwarded at once: the agent CLI runs a few at a time
// (its subagents); more are answered 429, which it retries.
const DefaultMaxConcurrent = 8

// DrainGrace is how long the upstream's response is still read, and metered, after the agent
// hung up: a stream's output count comes in its last message_delta, just after the text ends,
// and an agent that hangs up as the text ends must not escape it. It ends sooner at the
// response's end; it is not longer because the upstream generates (and bills) for as long as
// it is read.
const DrainGrace = 2 * time.Second

// Config configures the gateway. The flag each field comes from is named where an error about
// it is reported.
type Config struct {
	// Upstream is the model API's base URL (http or https, no credentials, query or fragment),
	// e.g. https://api.anthropic.com; the forwarded paths are joined to it.
	Upstream *url.URL
	// Credential is sent upstream with every forwarded request. It is never logged nor sent to
	// the client.
	Credential string
	// AuthScheme is AuthSchemeAPIKey (the default when empty) or AuthSchemeBearer.
	AuthScheme string
	// TaskKind and Profile are the kind and profile labels of every metric.
	TaskKind, Profile string
	// TokenBudget, when positive, bounds the Task's tokens: once TokensUsed plus this pod's
	// tokens reach it, every further request is refused. A request already forwarded finishes,
	// so the budget stops the next request, not the one that crosses it.
	TokenBudget int64
	// TokensUsed is what the Task's earlier attempts used, counted toward TokenBudget.
	TokensUsed int64
	// UsageFile, when set, gets this pod's modelusage.Usage as JSON, written at start and after
	// every response (typically /dev/termination-log).
	UsageFile string
	// ClaimFile, in a warm pool's pod: every request is refused with 503 until this file holds
	// the pod's claim assignment.
	ClaimFile string
	// MaxRequestBytes bounds a request body; 0 means DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// MaxConcurrent bounds the requests forwarded at once; 0 means DefaultMaxConcurrent.
	MaxConcurrent int
	// Registerer, when not nil, gets the gateway's metrics (metrics.go).
	Registerer prometheus.Registerer
	// Transport sends the requests upstream; nil means a clone of http.DefaultTransport.
	Transport http.RoundTripper
}

// Gateway is the gateway's http.Handler.
type Gateway struct {
	upstream *url.URL
	// authHeader and authValue are the credential's header; credential is the bare secret, which
	// the gateway masks in what the upstream answers.
	authHeader, authValue, credential string

	budget, used int64
	usageFile    string
	maxBytes     int64

	claimFile string
	claimed   atomic.Bool
	claimMu   sync.Mutex // one reader of the claim file at a time

	log      *slog.Logger
	metrics  *metrics
	proxy    *httputil.ReverseProxy
	inflight sync.WaitGroup
	// forwarding holds a place per request forwarded upstream (MaxConcurrent).
	forwarding chan struct{}

	mu    sync.Mutex // guards usage and the usage file
	usage modelusage.Usage
}

// New validates cfg, writes the usage file's first (empty) report and returns the gateway; log
// (nil discards) gets one line per request, never the credential.
func New(cfg Config, log *slog.Logger) (*Gateway, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	upstream, err := validateUpstream(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	switch {
	case strings.TrimSpace(cfg.Credential) == "":
		return nil, errors.New("invalid credential (--credential-file): it is empty")
	case strings.ContainsFunc(cfg.Credential, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return nil, errors.New("invalid credential (--credential-file): it contains a control character (a newline inside the file?)")
	case cfg.TokenBudget < 0:
		return nil, fmt.Errorf("invalid token budget %d (--token-budget): it must be 0 (no budget) or positive", cfg.TokenBudget)
	case cfg.TokensUsed < 0:
		return nil, fmt.Errorf("invalid tokens used %d (--tokens-used): it must not be negative", cfg.TokensUsed)
	case cfg.MaxRequestBytes < 0:
		return nil, fmt.Errorf("invalid max request bytes %d: it must be positive", cfg.MaxRequestBytes)
	}
	g := &Gateway{
		upstream:   upstream,
		credential: cfg.Credential,
		budget:     cfg.TokenBudget,
		used:       cfg.TokensUsed,
		usageFile:  cfg.UsageFile,
		claimFile:  cfg.ClaimFile,
		maxBytes:   cfg.MaxRequestBytes,
		log:        log,
	}
	switch cfg.AuthScheme {
	case AuthSchemeAPIKey, "":
		g.authHeader, g.authValue = "X-Api-Key", cfg.Credential
	case AuthSchemeBearer:
		g.authHeader, g.authValue = "Authorization", "Bearer "+cfg.Credential
	default:
		return nil, fmt.Errorf("invalid auth scheme %q (--auth-scheme): want %s or %s", cfg.AuthScheme, AuthSchemeAPIKey, AuthSchemeBearer)
	}
	if g.maxBytes == 0 {
		g.maxBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxConcurrent < 0 {
		return nil, fmt.Errorf("invalid max concurrent requests %d: it must be positive", cfg.MaxConcurrent)
	}
	g.forwarding = make(chan struct{}, cmp.Or(cfg.MaxConcurrent, DefaultMaxConcurrent))
	if g.metrics, err = newMetrics(cfg.Registerer, cfg.TaskKind, cfg.Profile); err != nil {
		return nil, err
	}
	if err := g.writeUsage(); err != nil {
		return nil, err
	}
	transport := cfg.Transport
	if transport == nil {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:   g.rewrite,
		Transport: transport,
		// Every write reaches the agent at once: the model's reply streams as server-sent events,
		// and each one is the CLI's progress.
		FlushInterval:  -1,
		ModifyResponse: g.modifyResponse,
		ErrorHandler:   g.proxyError,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return g, nil
}

// validateUpstream returns a copy of u, or why it cannot be the upstream.
func validateUpstream(u *url.URL) (*url.URL, error) {
	cp, err := upstream.Validate(u, " (--upstream)", "credential comes from --credential-file")
	if err != nil {
		return nil, err
	}
	if cp.Path == "" { // joined to a forwarded path, it would make a relative one
		cp.Path, cp.RawPath = "/", ""
	}
	return cp, nil
}

// forwarded reports whether r is one of the two requests the gateway forwards.
func forwarded(r *http.Request) bool {
	if r.Method != http.MethodPost || r.URL.RawPath != "" { // an escaped path is no SDK's
		return false
	}
	return r.URL.Path == PathMessages || r.URL.Path == PathCountTokens
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.inflight.Add(1)
	defer g.inflight.Done()
	start := time.Now()
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/" && r.URL.Host == "" {
		// The agent CLI checks that its base URL answers before its first model request; the
		// gateway answers for the upstream, which it reaches only with a model request.
		w.WriteHeader(http.StatusOK)
		return
	}
	if !forwarded(r) {
		g.log.Warn("model gateway request refused: not a model request", "method", r.Method, "path", r.URL.Path)
		g.refuse(w, start, http.StatusNotFound, errNotFound, fmt.Sprintf("tatara: the model gateway forwards only POST %s and POST %s, not %s %s",
			PathMessages, PathCountTokens, redact.Truncate(r.Method), redact.Truncate(r.URL.EscapedPath())))
		return
	}
	if code, msg := g.checkClaim(); code != 0 {
		g.log.Warn("model gateway request refused: no claim", "path", r.URL.Path, "status", code, "reason", msg)
		g.refuse(w, start, code, errAPI, msg)
		return
	}
	if used, spent := g.budgetSpent(); spent {
		g.metrics.refusals.Inc()
		g.log.Warn("model request refused: the token budget is spent", "path", r.URL.Path, "token_budget", g.budget, "tokens_used", used)
		// The SDK retries some statuses; this refusal will not pass, so it must not.
		w.Header().Set("X-Should-Retry", "false")
		g.refuse(w, start, http.StatusBadRequest, errInvalidRequest, fmt.Sprintf(
			"tatara: this Task's token budget of %d tokens is spent (%d used); the model gateway forwards no further model request for this Task", g.budget, used))
		return
	}
	// The budget is checked before each request and its tokens counted after: the places bound
	// what the requests under way when it is reached can add past it.
	select {
	case g.forwarding <- struct{}{}:
		defer func() { <-g.forwarding }()
	default:
		g.log.Warn("model request refused: too many at once", "path", r.URL.Path, "max_concurrent", cap(g.forwarding))
		w.Header().Set("Retry-After", "1")
		g.refuse(w, start, http.StatusTooManyRequests, errRateLimit, fmt.Sprintf(
			"tatara: the model gateway forwards at most %d model requests at once", cap(g.forwarding)))
		return
	}
	if r.ContentLength > g.maxBytes {
		g.log.Warn("model request refused: body too large", "path", r.URL.Path, "content_length", r.ContentLength, "max_bytes", g.maxBytes)
		g.refuse(w, start, http.StatusRequestEntityTooLarge, errTooLarge, g.tooLargeMessage())
		return
	}
	x := &exchange{g: g, start: start, path: r.URL.Path, agent: r.Context()}
	// The upstream request outlives the agent's by DrainGrace.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	stop := context.AfterFunc(r.Context(), func() { time.AfterFunc(DrainGrace, cancel) })
	defer stop()
	out := r.Clone(context.WithValue(ctx, exchangeKey{}, x))
	out.Body = readCloser{&limitedBody{r: http.MaxBytesReader(w, r.Body, g.maxBytes), x: x}, r.Body}
	// Deferred, so a response the agent stopped reading (the proxy then aborts the handler with
	// a panic) is counted too.
	defer x.finish()
	g.proxy.ServeHTTP(w, out)
}

func (g *Gateway) tooLargeMessage() string {
	return fmt.Sprintf("tatara: the request body exceeds the model gateway's limit of %d bytes", g.maxBytes)
}

// checkClaim returns 0 when the gateway may forward, else the status and message to refuse the
// request with: 503 while a pool pod is unclaimed (the SDK retries it), 500 for a claim file
// that cannot be read. The first successful read is kept: the claim of a pod never changes.
func (g *Gateway) checkClaim() (int, string) {
	if g.claimFile == "" || g.claimed.Load() {
		return 0, ""
	}
	g.claimMu.Lock()
	defer g.claimMu.Unlock()
	if g.claimed.Load() {
		return 0, ""
	}
	a, err := claim.ReadFile(g.claimFile)
	switch {
	case errors.Is(err, claim.ErrNotClaimed):
		return http.StatusServiceUnavailable, "tatara: the model gateway forwards no request yet: this pod is not claimed yet (no Task)"
	case err != nil:
		g.log.Error("model gateway cannot read the pod's claim", "claim_file", g.claimFile, "error", err.Error())
		return http.StatusInternalServerError, "tatara: the model gateway cannot read this pod's claim: " + err.Error()
	}
	g.claimed.Store(true)
	g.log.Info("pod claimed", "task", a.Task, "project", a.Project, "claim_file", g.claimFile)
	return 0, ""
}

// Wait blocks until every request being served has been answered and counted, or ctx ends.
func (g *Gateway) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		g.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
