package modelgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The reverse proxy to the upstream: the gateway's credential added, the agent's dropped, the
// response metered as it passes.

// forwardedHeaders and forwardedPrefixes are the only request headers of the agent's that reach
// the upstream: what the Anthropic SDK and Claude Code send (anthropic-version, anthropic-beta,
// x-app, X-Claude-Code-Session-Id, X-Stainless-*, User-Agent, Content-Type, Accept). An
// allow-list, not a deny-list, because the request carries the gateway's credential and any
// other header may steer the upstream or a proxy in front of it.
var (
	forwardedHeaders  = []string{"Accept", "Content-Type", "User-Agent", "X-App", "X-Claude-Code-Session-Id"}
	forwardedPrefixes = []string{"Anthropic-", "X-Stainless-", "X-Claude-Code-"}
	// credentialWords: a header named with one of these is dropped even under an allowed
	// prefix; the only credential upstream is the gateway's.
	credentialWords = []string{"auth", "key", "token", "secret", "cookie", "credential", "passw"}
)

// filterHeaders returns the headers of h the upstream may see.
func filterHeaders(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if forwardHeader(k) {
			out[k] = slices.Clone(v)
		}
	}
	return out
}

func forwardHeader(name string) bool {
	name = http.CanonicalHeaderKey(name)
	if slices.Contains(forwardedHeaders, name) {
		return true
	}
	lower := strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(lower, w) {
			return false
		}
	}
	for _, p := range forwardedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// rewrite points a forwarded request at the upstream (its path joined to the upstream's, its
// query kept) with the gateway's credential and, of the agent's headers, only the allowed ones.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	u := g.upstream.JoinPath(pr.In.URL.Path)
	// Of the query, only what the CLI sends (beta=true): the rest could steer a gateway upstream.
	if beta, ok := pr.In.URL.Query()["beta"]; ok {
		u.RawQuery = url.Values{"beta": beta}.Encode()
	}
	pr.Out.URL = u
	pr.Out.Host = ""
	pr.Out.Header = filterHeaders(pr.Out.Header)
	// The meter reads the body as it passes, which it could not encoded. Set, it also keeps the
	// transport from asking for gzip itself, whose decompression could hold stream bytes back.
	pr.Out.Header.Set("Accept-Encoding", "identity")
	pr.Out.Header.Set(g.authHeader, g.authValue)
}

// maxErrorScrubBytes bounds the part of an upstream error response searched for the credential.
const maxErrorScrubBytes = 1 << 20

// modifyResponse picks the response's meter and keeps the upstream's cookies from the agent.
// A redirect is passed back as it is: the proxy does not follow it, and the agent, which holds
// no credential, gains nothing by following it.
func (g *Gateway) modifyResponse(resp *http.Response) error {
	x := exchangeOf(resp.Request)
	if x == nil {
		return nil
	}
	resp.Header.Del("Set-Cookie")
	x.code, x.headersAt = resp.StatusCode, time.Now()
	if resp.StatusCode >= 400 {
		g.scrubError(resp)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch enc := resp.Header.Get("Content-Encoding"); {
	case enc != "" && !strings.EqualFold(enc, "identity"):
		g.log.Warn("model response not metered: the upstream encoded it despite Accept-Encoding: identity", "path", x.path, "status", resp.StatusCode, "content_encoding", enc)
	case mt == "text/event-stream":
		x.meter = &sseMeter{}
	case mt == "application/json":
		x.meter = &jsonMeter{}
	}
	resp.Body = &meteredBody{ReadCloser: resp.Body, x: x}
	return nil
}

// scrubError masks the credential in an upstream error response before the agent reads it. No
// model API echoes it; a misconfigured proxy in front of one might. Error bodies are small and
// not streamed, so reading one first costs nothing.
func (g *Gateway) scrubError(resp *http.Response) {
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorScrubBytes))
	if err != nil || !bytes.Contains(head, []byte(g.credential)) {
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
		return
	}
	g.log.Warn("upstream error response echoed the credential; masked", "status", resp.StatusCode)
	head = bytes.ReplaceAll(head, []byte(g.credential), []byte("[REDACTED]"))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
}

// proxyError answers a request the upstream did not answer.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	x := exchangeOf(r)
	var mbe *http.MaxBytesError
	switch {
	case (x != nil && x.tooLarge.Load()) || errors.As(err, &mbe):
		g.log.Warn("request body too large; upstream request aborted", "path", r.URL.Path, "max_bytes", g.maxBytes)
		x.setCode(http.StatusRequestEntityTooLarge)
		writeAPIError(w, http.StatusRequestEntityTooLarge, errTooLarge, g.tooLargeMessage())
	case errors.Is(err, context.Canceled):
		g.log.Info("client went away; upstream request aborted", "path", r.URL.Path)
		x.setCode(http.StatusBadGateway)
		w.WriteHeader(http.StatusBadGateway)
	default:
		// The transport's errors name the upstream URL, which carries no credential, and never
		// a header.
		g.log.Warn("upstream request failed", "path", r.URL.Path, "error", err.Error())
		x.setCode(http.StatusBadGateway)
		writeAPIError(w, http.StatusBadGateway, errAPI, "tatara: the model gateway could not reach the upstream model API")
	}
}

// The model API's error types the gateway answers with.
const (
	errInvalidRequest = "invalid_request_error"
	errNotFound       = "not_found_error"
	errTooLarge       = "request_too_large"
	errAPI            = "api_error"
	errRateLimit      = "rate_limit_error"
)

// apiError is the model API's error body, so the CLI reports the gateway's refusals as it
// reports the API's own.
type apiError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeAPIError(w http.ResponseWriter, code int, errType, msg string) {
	e := apiError{Type: "error"}
	e.Error.Type, e.Error.Message = errType, msg
	b, _ := json.Marshal(e)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// refuse answers a request the gateway does not forward, and counts it.
func (g *Gateway) refuse(w http.ResponseWriter, start time.Time, code int, errType, msg string) {
	writeAPIError(w, code, errType, msg)
	g.metrics.observe(modelNone, code, time.Since(start))
}

// limitedBody reads a request body through an http.MaxBytesReader and remembers when the limit
// was hit: the transport may report the failed upload without the MaxBytesError.
type limitedBody struct {
	r io.Reader
	x *exchange
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var mbe *http.MaxBytesError
	if err != nil && errors.As(err, &mbe) {
		b.x.tooLarge.Store(true)
	}
	return n, err
}

// readCloser is a body made of a reader and the original body's closer.
type readCloser struct {
	io.Reader
	io.Closer
}

type exchangeKey struct{}

func exchangeOf(r *http.Request) *exchange {
	x, _ := r.Context().Value(exchangeKey{}).(*exchange)
	return x
}

// exchange is one forwarded request, from its arrival to the end of its response. Its fields
// are set by the request's own goroutine (the proxy reads the upstream's response in the
// handler's), except tooLarge, which the transport's body writer sets.
type exchange struct {
	g         *Gateway
	start     time.Time
	path      string
	agent     context.Context // the agent's request's: done once the agent hung up
	code      int
	headersAt time.Time // when the upstream's response headers came; zero without a response
	firstByte time.Time // when its body's first byte passed
	meter     meter     // nil for a response that carries no usage the gateway reads
	tooLarge  atomic.Bool
}

func (x *exchange) setCode(code int) {
	if x != nil {
		x.code = code
	}
}

// meteredBody is the upstream's response body as the proxy copies it to the agent: every byte
// passes through the meter on its way.
type meteredBody struct {
	io.ReadCloser
	x *exchange
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if b.x.firstByte.IsZero() {
			b.x.firstByte = time.Now()
		}
		if b.x.meter != nil {
			b.x.meter.write(p[:n])
		}
	}
	return n, err
}

// Close reads what is left of the response through the meter when the agent hung up before
// its end (the proxy closes the body then), until the response ends or DrainGrace cancels it.
func (b *meteredBody) Close() error {
	if b.x.meter != nil && b.x.agent.Err() != nil {
		_, _ = io.Copy(io.Discard, b)
	}
	return b.ReadCloser.Close()
}
