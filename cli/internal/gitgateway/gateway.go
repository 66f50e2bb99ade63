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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

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
