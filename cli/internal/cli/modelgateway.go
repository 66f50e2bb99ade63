package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/net/netutil"

	"tatara.dev/cli/internal/modelgateway"
	"tatara.dev/cli/internal/upstream"
	"tatara.dev/cli/pkg/agentpod"
	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/cli/pkg/redact"
)

// modelGatewayDrain bounds the graceful stop: streams in flight get this long to end before
// their connections are closed (the pod's agent, stopped at the same time, rarely needs it).
const modelGatewayDrain = 5 * time.Second

// maxModelGatewayConnections bounds the connections the model gateway serves at once; more wait
// to be accepted.
const maxModelGatewayConnections = 64

type modelGatewayOptions struct {
	listen         string
	upstream       string
	credentialFile string
	authScheme     string
	metricsAddr    string
	taskKind       string
	profile        string
	tokenBudget    int64
	tokensUsed     int64
	usageFile      string
	claimFile      string
}

func newModelGatewayCommand(logOut io.Writer) *cobra.Command {
	o := modelGatewayOptions{}
	cmd := &cobra.Command{
		Use:   "model-gateway",
		Short: "Forward the agent's model API requests upstream, adding the credential, metering tokens and enforcing the Task's token budget",
		Long: `Forward the agent CLI's model API requests to one upstream, adding the credential.

The agent pod's sidecar: the agent CLI's ANTHROPIC_BASE_URL is this gateway (http://127.0.0.1:7779),
and the agent holds no model credential. The gateway alone reads it (--credential-file, read once
at start) and sends it upstream as x-api-key or as Authorization: Bearer (--auth-scheme), after
dropping whatever credential the agent sent. Only POST /v1/messages and
POST /v1/messages/count_tokens are forwarded (the query kept, with an allow-list of the agent's
headers: Anthropic-*, X-Stainless-*, X-Claude-Code-*, X-App, User-Agent, Content-Type, Accept);
anything else is answered 404. Responses stream through as they arrive; redirects are passed
back, never followed. The gateway's own answers are the model API's errors
({"type":"error","error":{...}}), so the CLI shows them as it shows the API's.

Every response's usage (input, output, cache creation and cache read tokens, as the upstream
reports them in a stream's message_start and message_delta events or a JSON body's usage) is
added to the pod's totals, which are rewritten to --usage-file after every response as
modelusage JSON: the container's termination message, which the operator adds to the Task's
status. With --token-budget, once --tokens-used (the Task's earlier attempts) plus this pod's
tokens reach the budget, every further request is refused with 400 and x-should-retry: false,
and the report says budgetExceeded. A request already forwarded finishes: the budget stops the
next request, not the one that crosses it, so a Task may overshoot it by one response per
request in flight, and at most 8 are forwarded at once (more get 429, which the CLI retries).
An agent that hangs up mid-stream is still counted for what the upstream sends within two
seconds after; a stream that runs on longer than that counts its input and its first output
count only. At most 64 connections are served at once.

In a warm pool's pod, --claim-file makes every request 503 until the cli writes the claim
assignment there. Metrics (tatara_model_*) and /healthz are served on --metrics-addr.
SIGTERM stops the gateway gracefully: streams in flight get a few seconds to end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runModelGateway(ctx, o, logOut)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", agentpod.ModelGatewayListen, "loopback address the gateway listens on (the agent's pod only)")
	f.StringVar(&o.upstream, "upstream", "", "base URL of the model API requests go to (http or https, no credentials, no query), e.g. https://api.anthropic.com")
	f.StringVar(&o.credentialFile, "credential-file", "", "file holding the model API credential; read once, surrounding whitespace trimmed")
	f.StringVar(&o.authScheme, "auth-scheme", modelgateway.AuthSchemeAPIKey, "how the credential is sent: "+modelgateway.AuthSchemeAPIKey+" (an API key) or "+modelgateway.AuthSchemeBearer+" (Authorization: Bearer, an auth token)")
	f.StringVar(&o.metricsAddr, "metrics-addr", ":"+strconv.Itoa(agentpod.ModelGatewayMetricsPort), "address serving /metrics and /healthz (empty disables)")
	f.StringVar(&o.taskKind, "task-kind", os.Getenv(EnvTaskKind), "the kind label of the metrics; defaults to "+EnvTaskKind)
	f.StringVar(&o.profile, "profile", os.Getenv(EnvToolProfile), "the profile label of the metrics; defaults to "+EnvToolProfile)
	f.Int64Var(&o.tokenBudget, "token-budget", 0, "the Task's token budget: requests are refused once it is spent (0: no budget)")
	f.Int64Var(&o.tokensUsed, "tokens-used", 0, "tokens the Task's earlier attempts used, counted toward --token-budget")
	f.StringVar(&o.usageFile, "usage-file", "", "file the pod's model usage (JSON) is rewritten to after every response, e.g. /dev/termination-log")
	f.StringVar(&o.claimFile, "claim-file", "", "in a warm pool's pod: every request is refused with 503 until this claim assignment exists")
	for _, name := range []string{"upstream", "credential-file"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func runModelGateway(ctx context.Context, o modelGatewayOptions, logOut io.Writer) error {
	if err := checkLoopback(o.listen); err != nil {
		return fmt.Errorf("invalid --listen %q: %w", o.listen, err)
	}
	upstreamURL, err := upstream.Parse("--upstream", o.upstream)
	if err != nil {
		return err
	}
	credential, err := readTokenFile("--credential-file", o.credentialFile)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: redact.New(credential).ReplaceAttr}))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gw, err := modelgateway.New(modelgateway.Config{
		Upstream:    upstreamURL,
		Credential:  credential,
		AuthScheme:  o.authScheme,
		TaskKind:    o.taskKind,
		Profile:     o.profile,
		TokenBudget: o.tokenBudget,
		TokensUsed:  o.tokensUsed,
		UsageFile:   o.usageFile,
		ClaimFile:   o.claimFile,
		Registerer:  reg,
	}, log)
	if err != nil {
		return err
	}

	// Listen for the agent before the metrics server starts: the pod's readiness probe checks
	// /healthz, so "healthy" must imply "the gateway accepts connections".
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("failed to listen for model requests on %q: %w", o.listen, err)
	}
	defer func() { _ = ln.Close() }()
	// The agent shares the pod's network: without a cap, idle connections from it could hold
	// the gateway's memory until its limit (each open stream costs some 90 KiB).
	ln = netutil.LimitListener(ln, maxModelGatewayConnections)

	metricsSrv, err := startMetrics(o.metricsAddr, reg, log)
	if err != nil {
		return err
	}
	defer metricsSrv.stop()

	// No ReadTimeout or WriteTimeout: a model's answer streams for as long as it takes (many
	// minutes, with extended thinking); a stalled client is cut off by the idle timeout between
	// requests only.
	srv := &http.Server{
		Handler:           gw,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("model gateway started", "listen", "http://"+ln.Addr().String(), "upstream", upstreamURL.String(), "auth_scheme", o.authScheme,
		"token_budget", o.tokenBudget, "tokens_used", o.tokensUsed, "usage_file", o.usageFile, "claim_file", o.claimFile,
		"kind", o.taskKind, "profile", o.profile, "version", buildinfo.Version)
	select {
	case <-ctx.Done():
		log.Info("model gateway stopping", "reason", context.Cause(ctx).Error())
		drainModelGateway(srv, gw)
		u := gw.Usage()
		log.Info("model gateway stopped", "requests", u.Requests, "tokens", u.Tokens(), "budget_exceeded", u.BudgetExceeded)
		return nil
	case err := <-errc:
		return fmt.Errorf("failed to serve model requests on %q: %w", o.listen, err)
	}
}

// drainModelGateway lets the streams in flight end, for modelGatewayDrain at most, then closes
// their connections and waits for their handlers (which read on for modelgateway.DrainGrace
// after their agent is gone), so what they metered is in the usage file before the process
// exits.
func drainModelGateway(srv *http.Server, gw *modelgateway.Gateway) {
	ctx, cancel := context.WithTimeout(context.Background(), modelGatewayDrain)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		_ = srv.Close()
	}
	ctx, cancel = context.WithTimeout(context.Background(), modelgateway.DrainGrace+time.Second)
	defer cancel()
	_ = gw.Wait(ctx)
}

// checkLoopback refuses an address reachable from outside the pod: the gateway adds a
// credential to whatever reaches it.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("the model gateway must listen on a loopback IP address (the agent's pod only), e.g. %s", agentpod.ModelGatewayListen)
	}
	return nil
}
