// Package gitgateway is the git smart-HTTP gateway of the agent pod (`tatara git-gateway`). The
// agent runs arbitrary code and is treated as an attacker; it must push its work without ever
// seeing a push credential, and only to its own Task's branch. The gateway, a sidecar listening on
// loopback, alone holds the token: it forwards the four smart-HTTP requests of fetch and push to
// the one upstream repository it was configured with, replacing whatever credential the client
// sent with HTTP Basic auth, and reads the command list of every push before forwarding it,
// refusing the whole push if any ref update falls outside refs/heads/<branch prefix>, deletes a
// ref, or uses a protocol feature it cannot check (signed pushes, push options).
//
// In a warm pool's pod the gateway starts before any Task exists: it learns the branch from the
// claim file (cli/pkg/claim) once a Task has claimed the pod, and refuses every git request until
// then.
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
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"tatara.dev/cli/internal/upstream"
	"tatara.dev/cli/pkg/claim"
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
	// ClaimFile, in a warm pool's pod, takes BranchPrefix's place (exactly one of the two is set):
	// the branch prefix is the claim assignment's push branch, read from this file once it exists
	// and fixed from then on. Until it exists the pod has no Task, hence no branch, and every git
	// request is refused with 503; an assignment without a push branch refuses every push.
	ClaimFile string
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
	// target is where pushes may go: set at start from BranchPrefix, or from ClaimFile on the
	// first request after the claim; nil until then.
	target    atomic.Pointer[pushTarget]
	claimFile string
	claimMu   sync.Mutex // one reader of the claim file at a time
	maxBytes  int64
	log       *slog.Logger
	pushes    *prometheus.CounterVec
	proxy     *httputil.ReverseProxy
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
	if cfg.ClaimFile != "" && cfg.BranchPrefix != "" {
		return nil, errors.New("invalid configuration: a branch prefix and a claim file are mutually exclusive (the claim names the branch)")
	}
	var target *pushTarget
	if cfg.ClaimFile == "" {
		if err := checkBranchPrefix(cfg.BranchPrefix); err != nil {
			return nil, fmt.Errorf("invalid branch prefix: %w", err)
		}
		target = &pushTarget{branch: "refs/heads/" + cfg.BranchPrefix}
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
		upstream:  upstream,
		username:  username,
		token:     cfg.Token,
		claimFile: cfg.ClaimFile,
		maxBytes:  maxBytes,
		log:       log,
		pushes:    pushes,
	}
	h.target.Store(target)
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

// validateUpstream returns a copy of u, or why it cannot be the upstream.
func validateUpstream(u *url.URL) (*url.URL, error) {
	return upstream.Validate(u, "", "token comes from the token file")
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
	suffix, service, ok := match(r)
	if !ok {
		h.log.Warn("git gateway request refused: not a git smart-HTTP request", "method", r.Method, "path", truncate([]byte(r.URL.Path)), "query", truncate([]byte(r.URL.RawQuery)))
		textError(w, http.StatusNotFound, "not found: the git gateway serves only GET /info/refs?service=git-upload-pack, GET /info/refs?service=git-receive-pack, POST /git-upload-pack and POST /git-receive-pack\n")
		return
	}
	target, code, msg := h.currentTarget()
	if target == nil {
		h.log.Warn("git gateway request refused: no claim", "method", r.Method, "path", r.URL.Path, "status", code, "reason", msg)
		textError(w, code, msg+"\n")
		return
	}
	if service == serviceReceive && target.noPush != "" {
		// The push itself (POST) is refused by check, in git's report; this is its first step.
		h.log.Warn("git gateway request refused: no push branch", "method", r.Method, "path", r.URL.Path, "reason", target.noPush)
		textError(w, http.StatusForbidden, "push refused: "+target.noPush+"\n")
		return
	}
	st := &reqState{}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	if suffix == pathReceivePack {
		h.serveReceivePack(w, r, st, target)
		return
	}
	out := r.Clone(r.Context())
	out.Body = body{&limitedBody{r: http.MaxBytesReader(w, r.Body, h.maxBytes), st: st}, r.Body}
	h.proxy.ServeHTTP(w, out)
}

// pushTarget is where pushes may go: refs under branch, or, when noPush says why, nowhere.
type pushTarget struct {
	branch string // refs/heads/<prefix>
	noPush string
}

// currentTarget returns the handler's target. In a pool pod it reads the claim file until that
// succeeds, and keeps the first target it gets: the claim of a pod never changes. Without one,
// it returns the status and message to refuse the request with: 503 while the pod is unclaimed
// (git may be asked again later), 500 for a claim file that cannot be read.
func (h *handler) currentTarget() (*pushTarget, int, string) {
	if t := h.target.Load(); t != nil {
		return t, 0, ""
	}
	h.claimMu.Lock()
	defer h.claimMu.Unlock()
	if t := h.target.Load(); t != nil {
		return t, 0, ""
	}
	a, err := claim.ReadFile(h.claimFile)
	switch {
	case errors.Is(err, claim.ErrNotClaimed):
		return nil, http.StatusServiceUnavailable, "the git gateway serves no git request yet: this pod is not claimed yet (no Task, so no branch)"
	case err != nil:
		h.log.Error("git gateway cannot read the pod's claim", "claim_file", h.claimFile, "error", err.Error())
		return nil, http.StatusInternalServerError, "the git gateway cannot read this pod's claim: " + err.Error()
	}
	t := &pushTarget{}
	if a.PushBranch == "" {
		t.noPush = fmt.Sprintf("task %s has no push branch: the git gateway refuses every push", a.Task)
	} else if err := checkBranchPrefix(a.PushBranch); err != nil {
		t.noPush = fmt.Sprintf("task %s's push branch is invalid (%v): the git gateway refuses every push", a.Task, err)
	} else {
		t.branch = "refs/heads/" + a.PushBranch
	}
	h.target.Store(t)
	h.log.Info("pod claimed", "task", a.Task, "project", a.Project, "branch", t.branch, "no_push", t.noPush, "claim_file", h.claimFile)
	return t, 0, ""
}
