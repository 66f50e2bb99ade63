// Package rest is the HTTP layer of the operator REST API (/api/v1), which the cli's 20 operator
// tools call: the routes (one per tool, server.go), authentication (a bearer Task token, which
// maps to exactly one Task through its per-Task Secret, auth.go; a pool pod's ServiceAccount
// token for its claim, reviewed by the API server, claim.go; and the token review for backends,
// tokenreview.go), the per-kind authorization table (authz.go), the limits (connections per
// source and in all, body and header size, timeouts: limits.go; per-Task and per-source rate
// limits: ratelimit.go), and the encoding (request bodies decoded and validated, requests.go and
// decode.go; JSON answers; the Idempotency-Key header, idempotency.go). What a call decides
// (subtask creation and its policy, limits and lock, a review's directive, notes, intents, the
// status writes and the Events that mirror them, the claim's answer) lives in internal/taskops: a
// handler here decodes and validates, calls one taskops.Service method, and maps its error's
// Code to the HTTP status (statusOf, errors.go).
package rest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tatara.dev/cli/pkg/claim"
	"tatara.dev/cli/pkg/redact"
	tatarav1 "tatara.dev/operator/api/v1alpha1"
	"tatara.dev/operator/internal/connlimit"
	"tatara.dev/operator/internal/metrics"
	"tatara.dev/operator/internal/taskops"
)

// Options configure the REST server.
type Options struct {
	// Addr is the listen address, e.g. ":8082".
	Addr string
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly, for read-modify-write of Task objects.
	APIReader client.Reader
	// Recorder emits the Events that mirror every recorded write (taskops).
	Recorder events.EventRecorder
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	// MaxBodyBytes bounds request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Limits bound each connection's time and header size.
	Limits Limits
	// TLS, when set, makes the server speak HTTPS (TLS.Config); nil is plain HTTP.
	TLS *tls.Config
	// RateLimit bounds each Task's requests (429 with Retry-After above it); the zero value is
	// no limit. The token review is not limited by it: its callers are backends, not Tasks.
	RateLimit RateLimit
	// SourceRateLimit bounds each source address's requests before authentication, every
	// route included (429 with Retry-After); the zero value is no limit.
	SourceRateLimit RateLimit
	// LockNamespace is where the Leases that serialise subtask_create per Project across every
	// replica live (the operator's own namespace; taskops.Options.LockNamespace). Empty
	// serialises inside this process only, which holds the limits for one replica alone.
	LockNamespace string
	// InternalIssueRateLimit bounds each Task's internal-issue reports, apart from RateLimit (429
	// with Retry-After); the zero value is no limit.
	InternalIssueRateLimit RateLimit
	// InternalIssuesPerProject is taskops.Options.InternalIssuesPerProject.
	InternalIssuesPerProject int
}

// Server is the REST API. It implements controller-runtime's manager.Runnable.
type Server struct {
	opts Options
	mux  *http.ServeMux
	// grace holds a place per request waiting out tokenCacheGrace.
	grace *graceSlots
	// limiters holds each Task's token bucket; nil without a rate limit.
	limiters *taskLimiters
	// reportLimiters holds each Task's bucket of internal-issue reports; nil without that limit.
	reportLimiters *taskLimiters
	// sources holds each source address's token bucket; nil without a source limit.
	sources *sourceLimiters
	// serving is true from the moment the listener accepts until shutdown begins.
	serving atomic.Bool
	// ops makes the calls' decisions.
	ops *taskops.Service
	// podReviews keeps the API server's answers about pool pods' tokens, podReviewFailures each
	// source's budget of failed ones (claim.go).
	podReviews        podReviews
	podReviewFailures *sourceLimiters
}

// Serving is a readiness check: nil while the REST API accepts requests. An agent pod's calls go
// to ready operator pods only, so a new pod gets none before its listener is up.
func (s *Server) Serving(*http.Request) error {
	if !s.serving.Load() {
		return errors.New("the REST API is not serving")
	}
	return nil
}

// call is one authenticated request.
type call struct {
	w    http.ResponseWriter
	r    *http.Request
	task *tatarav1.Task
	// requestID is the call's Idempotency-Key ("" for none).
	requestID string
}

type handler func(ctx context.Context, c *call) (int, any, *apiError)

// scope says which path value must belong to the caller's Task.
type scope int

const (
	scopeTask    scope = iota // {task} is the caller's Task
	scopeProject              // {project} is the caller's Task's project
)

type route struct {
	tool    string
	method  string
	path    string
	scope   scope
	handler handler
}

// routes is the REST surface: one row per operator tool, with the method and path the cli's
// catalog calls (TestRoutesAreTheOperatorTools compares them with profiles.OperatorRoutes).
func (s *Server) routes() []route {
	intent := func(tool string) route {
		return route{tool, http.MethodPost, "/api/v1/tasks/{task}/intents/" + tool, scopeTask, s.intentHandler(tool)}
	}
	return []route{
		{ToolTaskGet, http.MethodGet, "/api/v1/tasks/{task}", scopeTask, s.taskGet},
		{ToolTaskList, http.MethodGet, "/api/v1/projects/{project}/tasks", scopeProject, s.taskList},
		{ToolProjectGet, http.MethodGet, "/api/v1/projects/{project}", scopeProject, s.projectGet},
		{ToolRepoList, http.MethodGet, "/api/v1/projects/{project}/repos", scopeProject, s.repoList},
		{ToolTaskNote, http.MethodPost, "/api/v1/tasks/{task}/notes", scopeTask, s.taskNote},
		{ToolSubtaskCreate, http.MethodPost, "/api/v1/tasks/{task}/subtasks", scopeTask, s.subtaskCreate},
		{ToolSubtaskList, http.MethodGet, "/api/v1/tasks/{task}/subtasks", scopeTask, s.subtaskList},
		{ToolSubtaskGet, http.MethodGet, "/api/v1/tasks/{task}/subtasks/{subtask}", scopeTask, s.subtaskGet},
		{ToolSubtaskCancel, http.MethodPost, "/api/v1/tasks/{task}/subtasks/{subtask}/cancel", scopeTask, s.subtaskCancel},
		{ToolComment, http.MethodPost, "/api/v1/tasks/{task}/comments", scopeTask, s.comment},
		{ToolCommentOnIssue, http.MethodPost, "/api/v1/tasks/{task}/issue-comments", scopeTask, s.commentOnIssue},
		{ToolProposeIssue, http.MethodPost, "/api/v1/tasks/{task}/proposals", scopeTask, s.proposeIssue},
		{ToolProposalList, http.MethodGet, "/api/v1/projects/{project}/proposals", scopeProject, s.proposalList},
		intent(ToolSkipResearch),
		intent(ToolChangeSummary),
		intent(ToolPROutcome),
		intent(ToolReviewVerdict),
		intent(ToolIssueOutcome),
		intent(ToolDeclineImplementation),
		intent(ToolAlreadyDone),
	}
}

// New builds the server and its routes.
func New(opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	opts.Limits = opts.Limits.withDefaults()
	ops := taskops.New(taskops.Options{Client: opts.Client, APIReader: opts.APIReader, Recorder: opts.Recorder,
		Metrics: opts.Metrics, Log: opts.Log, LockNamespace: opts.LockNamespace, InternalIssuesPerProject: opts.InternalIssuesPerProject})
	s := &Server{opts: opts, mux: http.NewServeMux(), grace: newGraceSlots(), ops: ops,
		podReviewFailures: newLimiters[netip.Addr](PodReviewFailures, time.Now)}
	if opts.RateLimit.Enabled() {
		s.limiters = newTaskLimiters(opts.RateLimit, time.Now)
	}
	if opts.InternalIssueRateLimit.Enabled() {
		s.reportLimiters = newTaskLimiters(opts.InternalIssueRateLimit, time.Now)
	}
	if opts.SourceRateLimit.Enabled() {
		s.sources = newLimiters[netip.Addr](opts.SourceRateLimit, time.Now)
	}
	for _, rt := range append(s.routes(), s.reportRoute()) {
		s.mux.Handle(rt.method+" "+rt.path, s.timed(rt.path, s.wrap(rt)))
	}
	s.mux.Handle(http.MethodPost+" "+TokenReviewPath, s.timed(TokenReviewPath, http.HandlerFunc(s.tokenReview)))
	s.mux.Handle(http.MethodGet+" "+claim.OperatorPath, s.timed(claim.OperatorPath, http.HandlerFunc(s.podClaim)))
	s.mux.Handle(http.MethodGet+" "+HealthzPath, s.timed(HealthzPath, http.HandlerFunc(healthz)))
	s.mux.Handle(fallbackRoute, s.timed(fallbackRoute, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count("unknown", http.StatusNotFound)
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
	})))
	return s
}

// fallbackRoute is the pattern of the 404 handler, the route label of every request that
// matches no route.
const fallbackRoute = "/"

// timed observes the request's latency in tatara_operator_http_request_duration_seconds. The
// route label is the registered path pattern (e.g. /api/v1/tasks/{task}), never the raw path, and
// promhttp folds methods outside the standard set into "unknown", so the series stay bounded.
func (s *Server) timed(route string, next http.Handler) http.Handler {
	if s.opts.Metrics == nil {
		return next
	}
	obs := s.opts.Metrics.HTTPRequestDuration.MustCurryWith(prometheus.Labels{"route": route})
	return promhttp.InstrumentHandlerDuration(obs, next)
}

// Handler returns the HTTP handler of the API: every route behind the per-source limit.
func (s *Server) Handler() http.Handler { return s.sourceLimited(s.mux) }

// NeedLeaderElection is false: every replica serves the API; all state lives in the API server.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("failed to listen on %q: %w", s.opts.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// The server's own errors (a failed TLS handshake, a handler's panic) go to the JSON log too.
	l := s.opts.Limits
	var refused func()
	if s.opts.Metrics != nil {
		refused = s.opts.Metrics.APIConnectionsRefused.Inc
	}
	// The cap per source sits inside the global one: a connection closed for its source's cap
	// never holds a place of the global cap.
	ln = netutil.LimitListener(connlimit.PerSource(ln, l.MaxConnectionsPerSource, refused), l.MaxConnections)
	srv := &http.Server{Handler: s.Handler(), ErrorLog: slog.NewLogLogger(s.opts.Log.Handler(), slog.LevelWarn),
		ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout, WriteTimeout: l.WriteTimeout,
		IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes}
	errc := make(chan error, 1)
	if s.opts.TLS != nil {
		srv.TLSConfig = s.opts.TLS
		// HTTP/1.1 only, as over plain HTTP: the cli needs nothing more, and agents can reach this
		// port, so HTTP/2's stream-flood class of attacks stays out (controller-runtime's servers
		// turn HTTP/2 off for the same reason).
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	s.serving.Store(true)
	defer s.serving.Store(false)
	s.opts.Log.Info("serving operator REST API", "addr", ln.Addr().String(), "tls", s.opts.TLS != nil)
	select {
	case err := <-errc:
		return fmt.Errorf("failed to serve REST API on %q: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	s.serving.Store(false)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("failed to shut down REST API: %w", err)
	}
	return nil
}

type errorBody struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing left to tell it
}

func (s *Server) count(tool string, status int) {
	if s.opts.Metrics != nil {
		s.opts.Metrics.APIRequests.WithLabelValues(tool, strconv.Itoa(status)).Inc()
	}
}

// wrap applies authentication (401), the Task's rate limit (429), scope (403) and the kind's
// authorization (403) before the handler, and records metrics and a log line after it.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		status, body, task := s.serve(rt, w, r)
		writeJSON(w, status, body)
		s.count(rt.tool, status)
		// The path and the error are the caller's text: cut, so a request cannot make its log
		// line as large as it likes.
		attrs := []any{"tool", rt.tool, "method", r.Method, "path", redact.Truncate(r.URL.Path), "code", status, "duration_seconds", time.Since(start).Seconds()}
		if task != nil {
			attrs = append(attrs, "namespace", task.Namespace, "task", task.Name, "kind", string(task.Spec.Kind))
		}
		if e, ok := body.(errorBody); ok {
			attrs = append(attrs, "error", redact.Truncate(e.Error))
		}
		s.opts.Log.Info("api request", attrs...)
	})
}

func (s *Server) serve(rt route, w http.ResponseWriter, r *http.Request) (int, any, *tatarav1.Task) {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.Limits.HandlerTimeout)
	defer cancel()
	task, aerr := s.authenticate(ctx, r)
	if aerr != nil {
		return aerr.status, errorBody{Error: aerr.msg}, nil
	}
	if aerr := s.rateLimited(w, task.UID); aerr != nil {
		return aerr.status, errorBody{Error: aerr.msg}, task
	}
	switch rt.scope {
	case scopeTask:
		if name := r.PathValue("task"); name != task.Name {
			return http.StatusForbidden, errorBody{Error: fmt.Sprintf("the token belongs to task %q, not %q", task.Name, name)}, task
		}
	case scopeProject:
		if name := r.PathValue("project"); name != task.Spec.ProjectRef.Name {
			return http.StatusForbidden, errorBody{Error: fmt.Sprintf("the token's task belongs to project %q, not %q", task.Spec.ProjectRef.Name, name)}, task
		}
	}
	if !Allowed(task.Spec.Kind, rt.tool) {
		return http.StatusForbidden, errorBody{Error: fmt.Sprintf("tool %s is not allowed for tasks of kind %q", rt.tool, task.Spec.Kind)}, task
	}
	id, aerr := requestID(r)
	if aerr != nil {
		return aerr.status, errorBody{Error: aerr.msg}, task
	}
	status, body, herr := rt.handler(ctx, &call{w: w, r: r, task: task, requestID: id})
	if herr != nil {
		return herr.status, errorBody{Error: herr.msg}, task
	}
	return status, body, task
}
