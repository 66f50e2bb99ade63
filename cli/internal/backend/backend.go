// Package backend calls the HTTP services behind the tools (memory, chat, operator) and
// turns every failure into an error an agent can act on.
package backend

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/pkg/cabundle"
	"tatara.dev/cli/pkg/tasktoken"
)

const (
	// maxResponseBytes bounds what one tool result may put into the model's context.
	maxResponseBytes = 1 << 20
	// maxErrorSnippet bounds the body quoted in an error.
	maxErrorSnippet = 512
)

// StatusError is a non-2xx answer.
type StatusError struct {
	Backend string
	Method  string
	Path    string
	Status  int
	Snippet string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s backend answered %d %s to %s %s", e.Backend, e.Status, http.StatusText(e.Status), e.Method, e.Path)
	if e.Snippet != "" {
		msg += ": " + e.Snippet
	}
	return msg
}

// Client is one backend.
type Client struct {
	Name    string // memory, chat, operator: used in errors
	BaseURL string
	// Token is sent as a bearer token when set: the Task token, to every backend.
	Token string
	// Headers are added to every request (e.g. the calling project and task).
	Headers map[string]string
	HTTP    *http.Client
	// Retry bounds the retries of a call the backend did not take (see Do); the zero value
	// tries once.
	Retry Retry
	// Log records each retry; nil logs nothing.
	Log *slog.Logger
	// IdempotencyKeys sends every call that is not a GET or HEAD with a fresh Idempotency-Key
	// (the same on each of its tries) and retries it like a GET: only for a backend that records
	// the key and answers a repeat without acting again (the operator).
	IdempotencyKeys bool
}

// IdempotencyKeyHeader is the header of a call's idempotency key. Go's http.Transport also
// resends a request carrying it when a reused connection was closed before any answer.
const IdempotencyKeyHeader = "Idempotency-Key"

// newIdempotencyKey is crypto/rand's Text: 128 random bits in 26 base32 characters, unique per
// call without coordination.
func newIdempotencyKey() string { return cryptorand.Text() }

// Retry is a capped exponential backoff with full jitter.
type Retry struct {
	// Attempts is the most tries of one call, the first included.
	Attempts int
	// Base is the first backoff ceiling, doubled per retry up to Max.
	Base, Max time.Duration
}

// DefaultRetry rides out a backend's rollout: while a new operator pod takes over its Service,
// connections are refused or answered 503 for a few seconds. Six tries back off for at most
// 0.2+0.4+0.8+1.6+2 = 5 s in all, well inside the cli's call timeout.
var DefaultRetry = Retry{Attempts: 6, Base: 200 * time.Millisecond, Max: 2 * time.Second}

func (r Retry) backoff(retry int) time.Duration {
	ceiling := min(r.Base<<retry, r.Max)
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling) + 1 // full jitter: many agents do not retry in step
}

// Do sends req and returns the response body as text.
func (c *Client) Do(ctx context.Context, req catalog.Request) (string, error) {
	var key string
	if c.IdempotencyKeys && req.Method != http.MethodGet && req.Method != http.MethodHead {
		key = newIdempotencyKey()
	}
	return c.DoWithKey(ctx, req, key)
}

// NewIdempotencyKey returns a fresh key for DoWithKey.
func NewIdempotencyKey() string { return newIdempotencyKey() }

// DoWithKey is Do with the caller's idempotency key ("" for none), for a caller that tries one
// call again after Do gave up on it: the backend then counts it once, whichever try it took.
func (c *Client) DoWithKey(ctx context.Context, req catalog.Request, key string) (string, error) {
	u := strings.TrimRight(c.BaseURL, "/") + req.Path
	if len(req.Query) > 0 {
		u += "?" + req.Query.Encode()
	}
	var payload []byte
	if req.Body != nil {
		b, err := json.Marshal(req.Body)
		if err != nil {
			return "", fmt.Errorf("failed to encode %s request body: %w", c.Name, err)
		}
		payload = b
	}
	attempts := max(c.Retry.Attempts, 1)
	var resp *http.Response
	var err error
	// lastAnswer is the last retryable answer the backend gave: when the call's deadline then cuts
	// a retry short, that answer says more than the deadline does.
	var lastAnswer *StatusError
	tries := 0
	for {
		resp, err = c.send(ctx, req, u, payload, key)
		tries++
		why := retryable(ctx, req.Method, key != "", resp, err)
		if why == "" || tries >= attempts {
			break
		}
		wait := c.Retry.backoff(tries - 1)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			break // no time for another try: this one is the answer
		}
		if resp != nil {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorSnippet))
			_ = resp.Body.Close()
			lastAnswer = &StatusError{Backend: c.Name, Method: req.Method, Path: req.Path, Status: resp.StatusCode, Snippet: snippet(data, maxErrorSnippet)}
		}
		if c.Log != nil {
			attrs := []any{"backend", c.Name, "method", req.Method, "path", req.Path,
				"reason", why, "try", tries, "of", attempts, "backoff", wait.String()}
			if key != "" {
				attrs = append(attrs, "idempotency_key", key)
			}
			c.Log.Info("retrying backend call", attrs...)
		}
		select {
		case <-ctx.Done():
			// As below: what the backend last said tells more than the deadline.
			if lastAnswer != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return "", lastAnswer
			}
			return "", fmt.Errorf("failed to reach %s backend for %s %s in time (%d tries, last: %s): %w", c.Name, req.Method, req.Path, tries, why, context.Cause(ctx))
		case <-time.After(wait):
		}
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			if lastAnswer != nil {
				return "", lastAnswer
			}
			return "", fmt.Errorf("%s backend did not answer %s %s in time (%d tries): %w", c.Name, req.Method, req.Path, tries, context.DeadlineExceeded)
		}
		return "", fmt.Errorf("failed to reach %s backend for %s %s (%d tries): %w", c.Name, req.Method, req.Path, tries, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return "", fmt.Errorf("failed to read %s backend answer to %s %s: %w", c.Name, req.Method, req.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", &StatusError{Backend: c.Name, Method: req.Method, Path: req.Path, Status: resp.StatusCode, Snippet: snippet(data, maxErrorSnippet)}
	}
	if len(data) > maxResponseBytes {
		return snippet(data, maxResponseBytes) + "\n[answer truncated at 1 MiB]", nil
	}
	if len(data) == 0 {
		return fmt.Sprintf("%s %s: %d %s", req.Method, req.Path, resp.StatusCode, http.StatusText(resp.StatusCode)), nil
	}
	return string(data), nil
}

// send makes one try of a call.
func (c *Client) send(ctx context.Context, req catalog.Request, u string, payload []byte, key string) (*http.Response, error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	httpReq, err := http.NewRequestWithContext(ctx, req.Method, u, body)
	if err != nil {
		return nil, fmt.Errorf("failed to build request: %w", err)
	}
	httpReq.Header.Set("Accept", "application/json")
	if body != nil {
		httpReq.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.Headers {
		httpReq.Header.Set(k, v)
	}
	if c.Token != "" {
		httpReq.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if key != "" {
		httpReq.Header.Set(IdempotencyKeyHeader, key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	return hc.Do(httpReq)
}

// retryable says why a try may be repeated, or "" when it may not. A connection that was never
// made carried nothing, so any call may be tried again; a GET or HEAD, or a call with an
// idempotency key (keyed), may also be repeated after a connection reset or closed mid-call or a
// 502, 503 or 504 (the backend is starting, stopping or overloaded), since repeating it changes
// nothing. A POST without a key the backend may have acted on is never repeated, nor is any call
// that failed for a reason a retry cannot change (a certificate the client does not trust, a
// malformed URL), nor any call whose own context has ended. A dial that timed out is a connection
// never made: during a rollout the Service may still route to a pod that is gone, and its SYNs go
// unanswered until the dial timeout.
func retryable(ctx context.Context, method string, keyed bool, resp *http.Response, err error) string {
	idempotent := keyed || method == http.MethodGet || method == http.MethodHead
	switch {
	case ctx.Err() != nil:
		return ""
	case err != nil:
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return "connect failed: " + op.Err.Error()
		}
		if idempotent && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			return "connection lost: " + err.Error()
		}
		return ""
	case idempotent && (resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable ||
		resp.StatusCode == http.StatusGatewayTimeout):
		return fmt.Sprintf("answered %d", resp.StatusCode)
	}
	return ""
}

// snippet returns at most n bytes of b, cut on a rune boundary, trimmed.
func snippet(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
		return strings.TrimSpace(string(b)) + "..."
	}
	return strings.TrimSpace(string(b))
}

// TaskClients are the three backends of one Task's cli: the operator gets the Task token as a
// bearer, memory and chat each a token for their audience alone, which they review with the
// operator (POST /api/v1/tokenreviews with the audience); all get the identity headers
// X-Tatara-Project and X-Tatara-Task, which say what the token will be reviewed as.
// Memory and chat use hc, the operator operatorHC (OperatorHTTPClient); nil is http.DefaultClient.
// Every client retries with DefaultRetry and logs each retry to log (nil: no log); the operator
// client sends idempotency keys.
func TaskClients(memoryURL, chatURL, operatorURL, project, task, token string, hc, operatorHC *http.Client, log *slog.Logger) map[catalog.Target]*Client {
	identity := map[string]string{"X-Tatara-Project": project, "X-Tatara-Task": task}
	client := func(name, url string, h *http.Client) *Client {
		return &Client{Name: name, BaseURL: url, Token: token, Headers: identity, HTTP: h, Retry: DefaultRetry, Log: log}
	}
	operator := client("operator", operatorURL, operatorHC)
	// The operator records each creating call's key (see its REST API's Idempotency-Key); memory
	// and chat make no such promise, so their POSTs are never repeated.
	operator.IdempotencyKeys = true
	memory, chat := client("memory", memoryURL, hc), client("chat", chatURL, hc)
	// Memory and chat get tokens bound to them alone (tasktoken.ForAudience), never the Task
	// token: what a backend receives, it cannot replay to the operator or to the other backend.
	memory.Token = tasktoken.ForAudience(token, tasktoken.AudienceMemory)
	chat.Token = tasktoken.ForAudience(token, tasktoken.AudienceChat)
	return map[catalog.Target]*Client{
		catalog.TargetMemory:   memory,
		catalog.TargetChat:     chat,
		catalog.TargetOperator: operator,
	}
}

// DialTimeout bounds a backend connection attempt, so an unreachable backend fails (and is
// retried) in seconds rather than after the kernel's connect timeout.
const DialTimeout = 5 * time.Second

// HTTPClient is the client of the memory and chat backends: no proxy from the environment (the
// bearer token must go to the backend alone; extraEnvs can set HTTP_PROXY for the agent) and a
// dial timeout.
func HTTPClient() *http.Client { return &http.Client{Transport: transport()} }

func transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	return tr
}

// OperatorHTTPClient is the operator backend's HTTP client. Without a CA bundle it is a plain
// client (the system roots, should the URL be https). With one (PEM), it trusts exactly the
// bundle's certificates for the operator, not the system roots: the operator's certificate comes
// from the cluster's own CA, and nothing else may pose as the operator to collect Task tokens.
// Like HTTPClient, it ignores proxy settings and bounds the dial.
func OperatorHTTPClient(caBundle string) (*http.Client, error) {
	if caBundle == "" {
		return HTTPClient(), nil
	}
	pool, err := cabundle.Parse([]byte(caBundle))
	if err != nil {
		return nil, err
	}
	tr := transport()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}
