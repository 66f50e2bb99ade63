package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"tatara.dev/cli/internal/backend"
	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/internal/issuerecord"
	"tatara.dev/cli/internal/mcpserver"
	"tatara.dev/cli/internal/obs"
	"tatara.dev/cli/pkg/agentpod"
	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/cli/pkg/claim"
	"tatara.dev/cli/pkg/internalissue"
	"tatara.dev/cli/pkg/scrapewait"
)

// Environment variables read by `tatara mcp`.
const (
	EnvToolProfile = "TATARA_TOOL_PROFILE"
	EnvMetricsAddr = "TATARA_METRICS_ADDR"
	EnvMemoryURL   = "TATARA_MEMORY_URL"
	EnvChatURL     = "TATARA_CHAT_URL"
	EnvOperatorURL = "TATARA_OPERATOR_URL"
	EnvToken       = "TATARA_TOKEN"
	EnvProject     = "TATARA_PROJECT"
	EnvTask        = "TATARA_TASK"
	// EnvOperatorCABundle is the PEM CA bundle the operator client trusts instead of the system
	// roots; the operator sets it when its REST API serves TLS with a CA (docs/security.md).
	EnvOperatorCABundle = "TATARA_OPERATOR_CA_BUNDLE"
	// EnvRecordInternalIssues, "true", sends each report_internal_issue report to the operator to
	// be recorded (InternalIssue), after it is logged and counted; the operator sets it from the cli
	// chart's internalIssues.record.
	EnvRecordInternalIssues = "TATARA_RECORD_INTERNAL_ISSUES"
)

type mcpOptions struct {
	transport       string
	listen          string
	toolProfile     string
	metricsAddr     string
	callTimeout     time.Duration
	maxBodyBytes    int64
	shutdownTimeout time.Duration
	scrapeWait      time.Duration
}

// defaultShutdownTimeout bounds the graceful stop on SIGTERM: in-flight tool calls may finish,
// open streams are closed at once.
const defaultShutdownTimeout = 10 * time.Second

func newMCPCommand(logOut io.Writer) *cobra.Command {
	o := mcpOptions{}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the agent tool surface over MCP (stdio or streamable HTTP)",
		Long: `Serve the agent tool surface over MCP.

The tool profile (--tool-profile, else TATARA_TOOL_PROFILE) selects which tools are registered;
an empty or unknown profile serves every tool and logs a WARN. Backends come from
TATARA_MEMORY_URL, TATARA_CHAT_URL and TATARA_OPERATOR_URL (bearer TATARA_TOKEN); task and
project arguments default to TATARA_TASK and TATARA_PROJECT. With TATARA_OPERATOR_CA_BUNDLE (PEM)
set, the operator's https URL is verified against that bundle alone. With
TATARA_RECORD_INTERNAL_ISSUES=true, each valid report_internal_issue report is also sent, after
it is logged and counted and without delaying the answer, to the operator, which keeps it in an
InternalIssue record.

In a warm pool's pod (TATARA_CLAIM_FILE set) there is no Task yet: the command first asks the
operator for the pod's claim (GET /api/v1/claim, bearer the token in TATARA_CLAIM_TOKEN_FILE)
until a Task claims the pod, writes the assignment (never the token) to TATARA_CLAIM_FILE, and
only then listens for MCP, with the claiming Task's project, task and token. /metrics and
/healthz are served during the wait.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runMCP(ctx, o, logOut, os.Stdin, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.transport, "transport", "stdio", "stdio or http (MCP streamable HTTP)")
	f.StringVar(&o.listen, "listen", agentpod.MCPListen, "address of the streamable HTTP endpoint (path /mcp)")
	f.StringVar(&o.toolProfile, "tool-profile", os.Getenv(EnvToolProfile), "tool profile; overrides "+EnvToolProfile)
	f.StringVar(&o.metricsAddr, "metrics-addr", os.Getenv(EnvMetricsAddr), "address serving /metrics and /healthz (empty disables); defaults to "+EnvMetricsAddr)
	f.DurationVar(&o.callTimeout, "call-timeout", mcpserver.DefaultCallTimeout, "timeout of one backend call")
	f.Int64Var(&o.maxBodyBytes, "max-body-bytes", mcpserver.DefaultMaxBodyBytes, "largest request body the HTTP transport reads; a larger one is refused with 413")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "how long in-flight HTTP requests may run after SIGTERM")
	f.DurationVar(&o.scrapeWait, "scrape-wait", 0, "after the MCP server stops, keep serving /metrics until they are scraped from outside the pod once more, at most this long (0: exit at once)")
	return cmd
}

func runMCP(ctx context.Context, o mcpOptions, logOut io.Writer, stdin io.Reader, stdout io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	log := newLogger(logOut)
	recording, err := envBool(EnvRecordInternalIssues)
	if err != nil {
		return err
	}
	operatorURL := os.Getenv(EnvOperatorURL)
	operatorHTTP, err := operatorClient(operatorURL, os.Getenv(EnvOperatorCABundle))
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := obs.NewMetrics(reg)

	id := taskIdentity{project: os.Getenv(EnvProject), task: os.Getenv(EnvTask), token: os.Getenv(EnvToken)}
	var metricsSrv *metricsServer
	claimFile := os.Getenv(claim.EnvFile)
	if claimFile != "" {
		// A pool pod: its metrics port is up while it waits for a Task, which may take hours.
		if metricsSrv, err = startMetrics(o.metricsAddr, reg, log); err != nil {
			return err
		}
		defer metricsSrv.stop()
		defer metricsSrv.waitForScrape(o.scrapeWait)
		a, err := awaitClaim(ctx, claimFile, operatorURL, operatorHTTP, log)
		if err != nil && ctx.Err() != nil {
			log.Info("claim wait stopped", "reason", context.Cause(ctx).Error())
			return nil
		}
		if err != nil {
			return err
		}
		id = taskIdentity{project: a.Project, task: a.Task, token: a.Token, claimedAt: a.ClaimedAt}
		log = newLogger(logOut, a.Token)
	}
	backends := backend.TaskClients(os.Getenv(EnvMemoryURL), os.Getenv(EnvChatURL), operatorURL,
		id.project, id.task, id.token, backend.HTTPClient(), operatorHTTP, log)
	var recordIssue func(internalissue.Report)
	var fwd *issuerecord.Forwarder
	fwdCtx, stopFwd := context.WithCancel(ctx)
	defer stopFwd()
	if recording && operatorURL == "" {
		log.Warn("internal issues are not recorded: "+EnvRecordInternalIssues+" is true but "+EnvOperatorURL+" is not set", "task", id.task)
	}
	if recording && operatorURL != "" {
		fwd = issuerecord.New(issuerecord.Config{Operator: backends[catalog.TargetOperator], Task: id.task, Log: log,
			Count: func(outcome string) { metrics.InternalIssueRecords.WithLabelValues(outcome).Inc() }})
		for _, outcome := range issuerecord.Outcomes {
			metrics.InternalIssueRecords.WithLabelValues(outcome)
		}
		go fwd.Run(fwdCtx)
		recordIssue = fwd.Send
	}
	srv := newTaskMCPServer(o, id, backends, log, metrics, recordIssue)

	// Listen for MCP first, once the server is built (in a pool pod, once the claim is written):
	// the wrapper starts the agent as soon as this port accepts a connection, so the first MCP
	// request is answered, and reads the claim then; in a Task's pod "metrics up" implies it too.
	var mcpListener net.Listener
	if o.transport == "http" {
		ln, err := net.Listen("tcp", o.listen)
		if err != nil {
			return fmt.Errorf("failed to listen for MCP on %q: %w", o.listen, err)
		}
		mcpListener = ln
		defer func() { _ = ln.Close() }()
	}
	if metricsSrv == nil {
		if metricsSrv, err = startMetrics(o.metricsAddr, reg, log); err != nil {
			return err
		}
		defer metricsSrv.stop()
		// Runs before stop: the last tool calls' counts reach Prometheus before the sidecar exits.
		defer metricsSrv.waitForScrape(o.scrapeWait)
	}
	if fwd != nil {
		// Deferred after the metrics server's final scrape, so it runs before it: the reports still
		// queued at SIGTERM are sent (within issuerecord.DefaultDrainFor), and their outcomes
		// counted, before the last scrape.
		defer func() { stopFwd(); <-fwd.Done() }()
	}

	startup := []any{"profile", o.toolProfile, "resolved_profile", srv.ResolvedProfile,
		"registered_tools", len(srv.Tools), "transport", o.transport, "version", buildinfo.Version,
		"project", id.project, "task", id.task}
	if o.transport == "stdio" {
		return serveStdio(ctx, srv, log, startup, stdin, stdout)
	}
	return serveHTTP(ctx, o, srv, mcpListener, log, startup)
}

func (o mcpOptions) validate() error {
	switch {
	case o.transport != "stdio" && o.transport != "http":
		return fmt.Errorf("invalid --transport %q: want stdio or http", o.transport)
	case o.maxBodyBytes <= 0:
		return fmt.Errorf("invalid --max-body-bytes %d: want a positive number of bytes", o.maxBodyBytes)
	case o.shutdownTimeout <= 0:
		return fmt.Errorf("invalid --shutdown-timeout %v: want a positive duration", o.shutdownTimeout)
	case o.scrapeWait < 0:
		return fmt.Errorf("invalid --scrape-wait %v: want a duration >= 0", o.scrapeWait)
	}
	return nil
}

// newTaskMCPServer builds the MCP server of the pod's Task: its profile, and the backends it
// calls with the Task's identity and token (id), from the environment in a Task's pod and from
// the claim in a pool pod.
func newTaskMCPServer(o mcpOptions, id taskIdentity, backends map[catalog.Target]*backend.Client, log *slog.Logger, metrics *obs.Metrics,
	recordIssue func(internalissue.Report)) *mcpserver.Server {
	return mcpserver.New(mcpserver.Config{
		Profile:     o.toolProfile,
		Backends:    backends,
		RecordIssue: recordIssue,
		Context:     map[string]string{catalog.EnvProject: id.project, catalog.EnvTask: id.task},
		CallTimeout: o.callTimeout,
		Version:     buildinfo.Version,
		Logger:      log,
		Metrics:     metrics,
		ClaimedAt:   id.claimedAt,
	})
}

func serveStdio(ctx context.Context, srv *mcpserver.Server, log *slog.Logger, startup []any, stdin io.Reader, stdout io.Writer) error {
	log.Info("mcp server started", startup...)
	err := server.NewStdioServer(srv.MCP).Listen(ctx, stdin, stdout)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("failed to serve MCP over stdio: %w", err)
	}
	log.Info("mcp server stopped")
	return nil
}

// serveHTTP serves streamable HTTP on ln until ctx ends, then ends the sessions and their
// streams within --shutdown-timeout.
func serveHTTP(ctx context.Context, o mcpOptions, srv *mcpserver.Server, ln net.Listener, log *slog.Logger, startup []any) error {
	mux := http.NewServeMux()
	httpSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	mcpHandler := srv.NewHTTPHandler(mcpserver.HTTPConfig{Server: httpSrv, MaxBodyBytes: o.maxBodyBytes, LimitSetting: "--max-body-bytes"})
	mux.Handle(agentpod.MCPPath, mcpHandler)
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()
	log.Info("mcp server started", append(startup, "listen", "http://"+ln.Addr().String()+agentpod.MCPPath)...)
	select {
	case <-ctx.Done():
		log.Info("mcp server stopping", "reason", context.Cause(ctx).Error())
		// The MCP sessions and their open GET streams end first: a stream never goes idle, so
		// a plain http.Server.Shutdown would wait the whole timeout for it.
		sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
		defer cancel()
		if err := mcpHandler.Shutdown(sctx); err != nil {
			log.Warn("mcp server did not stop gracefully", "error", err.Error(), "timeout", o.shutdownTimeout.String())
		}
		log.Info("mcp server stopped")
		return nil
	case err := <-errc:
		return fmt.Errorf("failed to serve MCP on %q: %w", o.listen, err)
	}
}

// envBool reads a boolean environment variable: unset or empty is false; anything strconv.ParseBool
// does not read stops the command with an error naming the variable.
func envBool(name string) (bool, error) {
	v := os.Getenv(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("invalid %s %q: want true or false", name, v)
	}
	return b, nil
}

// operatorClient is the operator backend's HTTP client. A CA bundle that does not parse, or one
// given with a plain-HTTP operator URL (the bundle would be ignored and the Task token sent in
// clear), stops the cli at start instead of failing every operator tool later.
func operatorClient(operatorURL, caBundle string) (*http.Client, error) {
	hc, err := backend.OperatorHTTPClient(caBundle)
	if err != nil {
		return nil, fmt.Errorf("invalid %s: %w", EnvOperatorCABundle, err)
	}
	if caBundle != "" && operatorURL != "" {
		if u, err := url.Parse(operatorURL); err != nil || u.Scheme != "https" {
			return nil, fmt.Errorf("%s is set but %s %q is not an https URL", EnvOperatorCABundle, EnvOperatorURL, operatorURL)
		}
	}
	return hc, nil
}

// metricsServer serves /metrics and /healthz; the zero value (no address) serves nothing.
type metricsServer struct {
	srv  *http.Server
	gate *scrapewait.Gate
	log  *slog.Logger
}

// startMetrics serves reg's /metrics and a /healthz on addr until stop is called; an empty addr
// serves nothing. Both commands start it after their main listener, so a passing probe on
// /healthz means the main port accepts connections; the one exception is a pool pod's
// `tatara mcp`, which serves it during the claim wait, before it listens for MCP.
func startMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (*metricsServer, error) {
	if addr == "" {
		return &metricsServer{}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("failed to listen for metrics on %q: %w", addr, err)
	}
	gate := scrapewait.New()
	mux := http.NewServeMux()
	mux.Handle("/metrics", gate.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("metrics server listening", "addr", ln.Addr().String())
	return &metricsServer{srv: srv, gate: gate, log: log}, nil
}

// waitForScrape holds the exit until Prometheus has scraped /metrics once more, at most max
// (package scrapewait); it logs which of the two ended the wait.
func (m *metricsServer) waitForScrape(max time.Duration) {
	if m.srv == nil || max <= 0 {
		return
	}
	m.log.Info("waiting for a final metrics scrape", "max", max.String())
	start := time.Now()
	scraped := m.gate.Wait(context.Background(), max)
	m.log.Info("final metrics scrape", "scraped", scraped, "waited", time.Since(start).Round(time.Millisecond).String())
}

func (m *metricsServer) stop() {
	if m.srv != nil {
		shutdown(m.srv)
	}
}

func shutdown(s *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
}
