// Package gitgateway is the git smart-HTTP gateway of the agent pod (`tatara git-gateway`). The
// agent runs arbitrary code and is treated as an attacker; it must push its work without ever
// seeing a push credential, and only to its own Task's branch. The gateway, a sidecar listening on
// loopback, alone holds the token: it forwards the four smart-HTTP requests of fetch and push to
// the one upstream repository it was configured with, replacing whatever credential the client
// sent with HTTP Basic auth, and reads the command list of every push before forwarding it,
// refusing the whole push if any ref update falls outside refs/heads/<branch prefix>, deletes a
// ref, or uses a protocol feature it cannot check (signed pushes, push options).
package gitgateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config.
const (
	// DefaultUsername is the Basic auth user name sent with the token (GitHub's for app and
	// fine-grained tokens; GitLab and Gitea accept any name with a token).
	DefaultUsername = "x-access-token"
	// DefaultMaxPushBytes bounds the body of one request (a push's packfile included).
	DefaultMaxPushBytes int64 = 256 << 20
)

// Outcomes of a push, the values of tatara_git_gateway_pushes_total's outcome label.
const (
	OutcomeAccepted = "accepted"
	OutcomeRefused  = "refused"
)

// The smart-HTTP paths served, relative to the gateway's root and to the upstream URL.
const (
	pathInfoRefs    = "/info/refs"
	pathUploadPack  = "/git-upload-pack"
	pathReceivePack = "/git-receive-pack"
	serviceUpload   = "git-upload-pack"
	serviceReceive  = "git-receive-pack"
)

// Config configures the gateway.
type Config struct {
	// Upstream is the repository every request goes to (http or https, no credentials, query or
	// fragment), e.g. https://github.com/org/repo.git.
	Upstream *url.URL
	// Username is the Basic auth user name sent upstream; empty means DefaultUsername.
	Username string
	// Token is the Basic auth password sent upstream. It is never logged nor sent to the client.
	Token string
	// BranchPrefix is the Task's branch, e.g. "tatara/my-task": a push may update
	// refs/heads/<BranchPrefix> and refs/heads/<BranchPrefix>/..., nothing else.
	BranchPrefix string
	// MaxPushBytes bounds a request body (compressed and decompressed); 0 means
	// DefaultMaxPushBytes.
	MaxPushBytes int64
	// Registerer, when not nil, gets tatara_git_gateway_pushes_total.
	Registerer prometheus.Registerer
	// Transport sends the requests upstream; nil means a clone of http.DefaultTransport.
	Transport http.RoundTripper
}

type handler struct {
	upstream *url.URL
	username string
	token    string
	branch   string // refs/heads/<BranchPrefix>
	maxBytes int64
	log      *slog.Logger
	pushes   *prometheus.CounterVec
	proxy    *httputil.ReverseProxy
}

// NewHandler validates cfg and returns the gateway's handler, which serves the smart-HTTP
// endpoints at its root ("/info/refs", "/git-upload-pack", "/git-receive-pack"); log (nil
// discards) gets one line per push and per refused request, never the token.
func NewHandler(cfg Config, log *slog.Logger) (http.Handler, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	upstream, err := validateUpstream(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	username := cfg.Username
	if username == "" {
		username = DefaultUsername
	}
	if strings.ContainsRune(username, ':') || hasControl(username) {
		return nil, fmt.Errorf("invalid username %q: it must not contain ':' or control characters", username)
	}
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, errors.New("invalid token: it is empty")
	}
	if hasControl(cfg.Token) {
		return nil, errors.New("invalid token: it contains a control character (a newline inside the token file?)")
	}
	if err := checkBranchPrefix(cfg.BranchPrefix); err != nil {
		return nil, fmt.Errorf("invalid branch prefix: %w", err)
	}
	maxBytes := cfg.MaxPushBytes
	switch {
	case maxBytes == 0:
		maxBytes = DefaultMaxPushBytes
	case maxBytes < 0:
		return nil, fmt.Errorf("invalid max push bytes %d: it must be positive", maxBytes)
	}
	pushes, err := newPushCounter(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	transport := cfg.Transport
	if transport == nil {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	h := &handler{
		upstream: upstream,
		username: username,
		token:    cfg.Token,
		branch:   "refs/heads/" + cfg.BranchPrefix,
		maxBytes: maxBytes,
		log:      log,
		pushes:   pushes,
	}
	h.proxy = &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		Transport:      transport,
		ModifyResponse: h.modifyResponse,
		ErrorHandler:   h.proxyError,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return h, nil
}

func newPushCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tatara_git_gateway_pushes_total",
		Help: "Pushes (receive-pack requests with ref updates) checked by the git gateway, by outcome: accepted (forwarded upstream) or refused (answered by the gateway, nothing forwarded).",
	}, []string{"outcome"})
	if reg != nil {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("failed to register tatara_git_gateway_pushes_total: %w", err)
			}
			existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
			if !ok {
				return nil, fmt.Errorf("failed to register tatara_git_gateway_pushes_total: %w", err)
			}
			c = existing
		}
	}
	c.WithLabelValues(OutcomeAccepted)
	c.WithLabelValues(OutcomeRefused)
	return c, nil
}

// validateUpstream returns a copy of u, or why it cannot be the upstream. Error messages never
// show u's userinfo, which may be a credential.
func validateUpstream(u *url.URL) (*url.URL, error) {
	if u == nil {
		return nil, errors.New("invalid upstream: no URL given")
	}
	cp := *u
	cp.User = nil
	shown := cp.String()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("invalid upstream %s: the scheme must be http or https", shown)
	case u.User != nil:
		return nil, fmt.Errorf("invalid upstream %s: the URL must not carry credentials (user info); the token comes from the token file", shown)
	case u.Opaque != "" || u.Host == "":
		return nil, fmt.Errorf("invalid upstream %s: no host", shown)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("invalid upstream %s: the URL must not have a query or fragment", shown)
	}
	return &cp, nil
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// match returns the upstream path suffix and, for /info/refs, the service of a request the
// gateway forwards; ok is false for every other request.
func match(r *http.Request) (suffix, service string, ok bool) {
	if r.URL.RawPath != "" { // an escaped path ("/info%2Frefs") is no git client's
		return "", "", false
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == pathInfoRefs:
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil || len(q["service"]) != 1 {
			return "", "", false
		}
		if s := q.Get("service"); s == serviceUpload || s == serviceReceive {
			return pathInfoRefs, s, true
		}
	case r.Method == http.MethodPost && r.URL.Path == pathUploadPack:
		return pathUploadPack, "", true
	case r.Method == http.MethodPost && r.URL.Path == pathReceivePack:
		return pathReceivePack, "", true
	}
	return "", "", false
}

// reqState is what a request's handling learns that the proxy's error handler needs.
type reqState struct{ tooLarge atomic.Bool }

type stateKey struct{}

// limitedBody reads through an http.MaxBytesReader and remembers when the limit was hit.
type limitedBody struct {
	r  io.Reader
	st *reqState
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var mbe *http.MaxBytesError
	if err != nil && errors.As(err, &mbe) {
		b.st.tooLarge.Store(true)
	}
	return n, err
}

// body is a request body made of a reader and the original body's closer.
type body struct {
	io.Reader
	io.Closer
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	suffix, _, ok := match(r)
	if !ok {
		h.log.Warn("git gateway request refused: not a git smart-HTTP request", "method", r.Method, "path", truncate([]byte(r.URL.Path)), "query", truncate([]byte(r.URL.RawQuery)))
		textError(w, http.StatusNotFound, "not found: the git gateway serves only GET /info/refs?service=git-upload-pack, GET /info/refs?service=git-receive-pack, POST /git-upload-pack and POST /git-receive-pack\n")
		return
	}
	st := &reqState{}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	if suffix == pathReceivePack {
		h.serveReceivePack(w, r, st)
		return
	}
	out := r.Clone(r.Context())
	out.Body = body{&limitedBody{r: http.MaxBytesReader(w, r.Body, h.maxBytes), st: st}, r.Body}
	h.proxy.ServeHTTP(w, out)
}

// serveReceivePack checks a push's command list and forwards the push only if every ref update
// is allowed.
func (h *handler) serveReceivePack(w http.ResponseWriter, r *http.Request, st *reqState) {
	raw := &limitedBody{r: http.MaxBytesReader(w, r.Body, h.maxBytes), st: st}
	src := io.Reader(raw)
	gzipped := false
	switch enc := r.Header.Values("Content-Encoding"); {
	case len(enc) == 0:
	case len(enc) == 1 && (strings.EqualFold(enc[0], "gzip") || strings.EqualFold(enc[0], "x-gzip")):
		zr, err := gzip.NewReader(src)
		if err != nil {
			h.refuse(w, raw, http.StatusBadRequest, fmt.Sprintf("invalid push request: the gzip body does not decompress: %v", err), nil)
			return
		}
		src = &limitedBody{r: http.MaxBytesReader(w, zr, h.maxBytes), st: st}
		gzipped = true
	default:
		h.refuse(w, raw, http.StatusUnsupportedMediaType, fmt.Sprintf("invalid push request: Content-Encoding %q is not supported (gzip or none)", strings.Join(enc, ", ")), nil)
		return
	}

	push, prefix, err := readCommands(src)
	if err != nil {
		var pe *protocolError
		if errors.As(err, &pe) || st.tooLarge.Load() {
			h.refuse(w, raw, http.StatusBadRequest, err.Error(), nil)
			return
		}
		h.log.Warn("git push not forwarded: failed to read the request", "error", err.Error())
		textError(w, http.StatusBadRequest, "failed to read the push request\n")
		return
	}
	if refusals := h.check(push); len(refusals) > 0 {
		if (push.hasCapability("report-status") || push.hasCapability("report-status-v2")) && !push.PushCert {
			h.reportRefused(w, raw, push, refusals)
			return
		}
		h.refuse(w, raw, http.StatusForbidden, joinReasons(refusals), push.Commands)
		return
	}
	if len(push.Commands) == 0 {
		// git sends a bare flush-pkt to probe before a large push; the upstream updates nothing.
		h.log.Debug("forwarding a receive-pack request without ref updates")
	} else {
		h.pushes.WithLabelValues(OutcomeAccepted).Inc()
		h.log.Info("git push accepted", "refs", push.refs(), "updates", commandStrings(push.Commands), "gzip", gzipped)
	}
	out := r.Clone(r.Context())
	out.Body = body{io.MultiReader(bytes.NewReader(prefix), src), r.Body}
	if gzipped {
		out.Header.Del("Content-Encoding")
		out.Header.Del("Content-Length")
		out.ContentLength = -1
	}
	h.proxy.ServeHTTP(w, out)
}

// refusal is one reason a push is refused: about one ref, or (ref "") the whole push.
type refusal struct{ ref, reason string }

func joinReasons(rs []refusal) string {
	lines := make([]string, len(rs))
	for i, r := range rs {
		lines[i] = "push refused: " + r.reason
	}
	return strings.Join(lines, "\n")
}

// allowedCapabilities are the receive-pack capabilities a push may ask for (gitprotocol-capabilities):
// the ones git itself sends, none of which changes what the upstream does beyond the ref updates
// the gateway checked. Anything else is refused by name, push-options above all: a host can read
// options as instructions (open or merge a merge request, set CI variables, skip CI).
var allowedCapabilities = map[string]bool{
	"report-status": true, "report-status-v2": true, "side-band-64k": true, "side-band": true,
	"quiet": true, "atomic": true, "ofs-delta": true, "delete-refs": true, "no-thin": true,
	"agent": true, "object-format": true, "session-id": true,
}

// check returns why push is refused; none means it may be forwarded.
func (h *handler) check(push *pushRequest) []refusal {
	if push.PushCert {
		return []refusal{{"", "signed pushes (push-cert) are not supported by the git gateway"}}
	}
	var out []refusal
	for _, c := range push.Capabilities {
		name, _, _ := strings.Cut(c, "=")
		switch {
		case name == "push-options":
			out = append(out, refusal{"", "push options (git push -o) are not supported by the git gateway"})
		case !allowedCapabilities[name]:
			out = append(out, refusal{"", fmt.Sprintf("capability %q is not supported by the git gateway", truncate([]byte(c)))})
		}
	}
	for _, c := range push.Commands {
		switch {
		case checkRefFormat(c.Ref) != nil:
			out = append(out, refusal{c.Ref, fmt.Sprintf("%q is not a valid ref name: %v", c.Ref, checkRefFormat(c.Ref))})
		case c.Ref != h.branch && !strings.HasPrefix(c.Ref, h.branch+"/"):
			out = append(out, refusal{c.Ref, fmt.Sprintf("%s is outside %s (the Task's branch)", c.Ref, h.branch)})
		case c.isDelete():
			out = append(out, refusal{c.Ref, fmt.Sprintf("%s would be deleted; the git gateway never deletes refs", c.Ref)})
		}
	}
	return out
}

// reportRefused answers a refused push the way receive-pack reports rejected refs (HTTP 200 with a
// report-status naming each ref "ng" and why), so git shows the agent
// "! [remote rejected] <ref> (<reason>)" and exits non-zero, instead of a bare "HTTP 403" whose
// body git does not print. Nothing is forwarded; every ref of the push is reported, since the
// whole push is refused.
func (h *handler) reportRefused(w http.ResponseWriter, raw *limitedBody, push *pushRequest, refusals []refusal) {
	if raw.st.tooLarge.Load() {
		h.refuse(w, raw, http.StatusRequestEntityTooLarge, "", push.Commands)
		return
	}
	_, _ = io.Copy(io.Discard, raw)
	whole, perRef := "", map[string]string{}
	for _, r := range refusals {
		if r.ref == "" {
			whole = r.reason
		} else if perRef[r.ref] == "" {
			perRef[r.ref] = r.reason
		}
	}
	var report bytes.Buffer
	writePktLine(&report, "unpack ok\n")
	for _, c := range push.Commands {
		reason := perRef[c.Ref]
		switch {
		case reason != "":
		case whole != "":
			reason = whole
		default:
			reason = "not pushed: another ref of this push was refused"
		}
		writePktLine(&report, "ng "+c.Ref+" "+strings.ReplaceAll(reason, "\n", " ")+"\n")
	}
	report.WriteString("0000")
	body := report.Bytes()
	// With a side band, the report travels in band 1 (the client asked for one when it lists it).
	if band := sideBandSize(push); band > 0 {
		var framed bytes.Buffer
		for len(body) > 0 {
			n := min(len(body), band)
			writePktLine(&framed, "\x01"+string(body[:n]))
			body = body[n:]
		}
		framed.WriteString("0000")
		body = framed.Bytes()
	}
	h.pushes.WithLabelValues(OutcomeRefused).Inc()
	h.log.Warn("git push refused", "status", http.StatusOK, "reason", joinReasons(refusals), "refs", push.refs(), "updates", commandStrings(push.Commands))
	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// sideBandSize is the most data one side-band packet carries for the push's capabilities, or 0
// without a side band (pkt-line lengths less the 4-byte header and the band byte).
func sideBandSize(push *pushRequest) int {
	switch {
	case push.hasCapability("side-band-64k"):
		return 65520 - 5
	case push.hasCapability("side-band"):
		return 1000 - 5
	}
	return 0
}

// writePktLine appends s as one pkt-line.
func writePktLine(b *bytes.Buffer, s string) { fmt.Fprintf(b, "%04x%s", len(s)+4, s) }

// refuse answers a push the gateway does not forward, counts and logs it. A body that exceeded
// the size limit is answered 413 whatever the parse made of it.
//
// The rest of the body (bounded by the size limit) is read and dropped first: git is still
// sending its packfile, and an answer before the end of the request can reach it as a broken
// pipe instead of the 403 and its reason.
func (h *handler) refuse(w http.ResponseWriter, raw *limitedBody, code int, msg string, cmds []command) {
	if raw.st.tooLarge.Load() {
		code, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("push refused: the request exceeds %d bytes (--max-push-bytes)", h.maxBytes)
	} else {
		_, _ = io.Copy(io.Discard, raw)
	}
	h.pushes.WithLabelValues(OutcomeRefused).Inc()
	refs := make([]string, len(cmds))
	for i, c := range cmds {
		refs[i] = c.Ref
	}
	h.log.Warn("git push refused", "status", code, "reason", msg, "refs", refs, "updates", commandStrings(cmds))
	textError(w, code, msg+"\n")
}

func commandStrings(cmds []command) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = c.String()
	}
	return out
}

// rewrite points a matched request at the upstream with the gateway's credential and none of
// the client's.
func (h *handler) rewrite(pr *httputil.ProxyRequest) {
	suffix, service, _ := match(pr.In)
	u := h.upstream.JoinPath(suffix)
	u.RawQuery = ""
	if service != "" {
		u.RawQuery = url.Values{"service": {service}}.Encode()
	}
	pr.Out.URL = u
	pr.Out.Host = ""
	for k := range pr.Out.Header {
		lk := strings.ToLower(k)
		if lk == "authorization" || lk == "cookie" || lk == "forwarded" || strings.HasPrefix(lk, "proxy-") {
			delete(pr.Out.Header, k)
		}
	}
	pr.Out.SetBasicAuth(h.username, h.token)
}

// modifyResponse keeps the upstream's credential challenges, cookies and redirects from the
// client: a 401 would make git ask the agent for a credential, and a redirect would send it
// around the gateway.
func (h *handler) modifyResponse(resp *http.Response) error {
	for _, k := range []string{"Set-Cookie", "Www-Authenticate", "Proxy-Authenticate"} {
		resp.Header.Del(k)
	}
	req := resp.Request
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusProxyAuthRequired:
		h.log.Warn("upstream refused the gateway's credential", "status", code, "method", req.Method, "path", req.URL.Path)
		replaceResponse(resp, http.StatusBadGateway, fmt.Sprintf("the upstream repository refused the git gateway's credential (HTTP %d)\n", code))
	case code >= 300 && code < 400 && code != http.StatusNotModified:
		loc := resp.Header.Get("Location")
		h.log.Warn("upstream redirected; not followed", "status", code, "location", loc, "method", req.Method, "path", req.URL.Path)
		replaceResponse(resp, http.StatusBadGateway, fmt.Sprintf("the upstream repository redirected (HTTP %d); the git gateway does not follow redirects: configure its upstream with the final URL\n", code))
	case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, pathReceivePack):
		h.log.Info("git push forwarded", "status", code)
	case code >= 400:
		h.log.Warn("upstream answered with an error", "status", code, "method", req.Method, "path", req.URL.Path)
	}
	return nil
}

func replaceResponse(resp *http.Response, code int, msg string) {
	_ = resp.Body.Close()
	resp.StatusCode = code
	resp.Status = fmt.Sprintf("%d %s", code, http.StatusText(code))
	resp.Header = http.Header{
		"Content-Type":           {"text/plain; charset=utf-8"},
		"Content-Length":         {strconv.Itoa(len(msg))},
		"X-Content-Type-Options": {"nosniff"},
	}
	resp.Body = io.NopCloser(strings.NewReader(msg))
	resp.ContentLength = int64(len(msg))
	resp.TransferEncoding = nil
	resp.Uncompressed = false
}

// proxyError answers a request the upstream did not answer.
func (h *handler) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	var mbe *http.MaxBytesError
	if (st != nil && st.tooLarge.Load()) || errors.As(err, &mbe) {
		h.log.Warn("request body too large; upstream request aborted", "method", r.Method, "path", r.URL.Path, "max_bytes", h.maxBytes)
		textError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request exceeds %d bytes (--max-push-bytes)\n", h.maxBytes))
		return
	}
	if errors.Is(err, context.Canceled) {
		h.log.Info("client went away; upstream request aborted", "method", r.Method, "path", r.URL.Path)
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	h.log.Warn("upstream request failed", "method", r.Method, "path", r.URL.Path, "error", err.Error())
	textError(w, http.StatusBadGateway, "the git gateway could not reach the upstream repository\n")
}

func textError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
}
