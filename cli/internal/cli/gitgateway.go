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
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"tatara.dev/cli/internal/gitgateway"
	"tatara.dev/cli/internal/upstream"
	"tatara.dev/cli/pkg/agentpod"
	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/cli/pkg/redact"
)

// maxTokenFileBytes bounds the token file: a push token is a few hundred bytes at most.
const maxTokenFileBytes = 64 << 10

type gitGatewayOptions struct {
	listen       string
	upstream     string
	username     string
	tokenFile    string
	branchPrefix string
	claimFile    string
	maxPushBytes int64
	metricsAddr  string
}

func newGitGatewayCommand(logOut io.Writer) *cobra.Command {
	o := gitGatewayOptions{}
	cmd := &cobra.Command{
		Use:   "git-gateway",
		Short: "Forward git smart-HTTP to one repository, adding the push credential and refusing pushes outside the Task's branch",
		Long: `Forward git smart-HTTP (fetch and push) to one upstream repository.

The agent pod's sidecar: the agent's origin remote is this gateway (http://127.0.0.1:7778/), which
alone reads the push token (--token-file, read once at start) and sends it upstream as HTTP Basic
auth. Only GET /info/refs?service=git-upload-pack|git-receive-pack, POST /git-upload-pack and
POST /git-receive-pack are forwarded; anything else is answered 404. A push is forwarded only if
every ref it updates is refs/heads/<branch prefix> or under refs/heads/<branch prefix>/ and
none is deleted; otherwise the whole push is refused, nothing reaches the upstream, and git shows
the reason per ref ("! [remote rejected] ...", from a report-status; 403 for a client without one).
Signed pushes and push options are refused. SIGTERM stops the gateway gracefully.

In a warm pool's pod, --claim-file replaces --branch-prefix: the pod has no Task yet, so every
git request is answered 503 until the cli writes the claim assignment there; from then on the
branch prefix is the assignment's push branch (read once), and an assignment without one
refuses every push.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runGitGateway(ctx, o, logOut)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", agentpod.GitGatewayListen, "address the gateway listens on (keep it loopback: the agent's pod only)")
	f.StringVar(&o.upstream, "upstream", "", "URL of the one repository requests go to (http or https, no credentials), e.g. https://github.com/org/repo.git")
	f.StringVar(&o.username, "username", gitgateway.DefaultUsername, "user name of the HTTP Basic auth sent upstream")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding the push token (the Basic auth password); read once, surrounding whitespace trimmed")
	f.StringVar(&o.branchPrefix, "branch-prefix", "", "the Task's branch, e.g. tatara/my-task: pushes may update refs/heads/<prefix> and refs/heads/<prefix>/..., nothing else")
	f.StringVar(&o.claimFile, "claim-file", "", "in a warm pool's pod, instead of --branch-prefix: the claim assignment whose push branch is the prefix, once it exists")
	f.Int64Var(&o.maxPushBytes, "max-push-bytes", gitgateway.DefaultMaxPushBytes, "largest request body (a push's packfile included), compressed or not")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "address serving /metrics and /healthz (empty disables)")
	for _, name := range []string{"upstream", "token-file"} {
		_ = cmd.MarkFlagRequired(name)
	}
	cmd.MarkFlagsOneRequired("branch-prefix", "claim-file")
	cmd.MarkFlagsMutuallyExclusive("branch-prefix", "claim-file")
	return cmd
}

func runGitGateway(ctx context.Context, o gitGatewayOptions, logOut io.Writer) error {
	upstreamURL, err := upstream.Parse("--upstream", o.upstream)
	if err != nil {
		return err
	}
	token, err := readTokenFile("--token-file", o.tokenFile)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: redact.New(token).ReplaceAttr}))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	handler, err := gitgateway.NewHandler(gitgateway.Config{
		Upstream:     upstreamURL,
		Username:     o.username,
		Token:        token,
		BranchPrefix: o.branchPrefix,
		ClaimFile:    o.claimFile,
		MaxPushBytes: o.maxPushBytes,
		Registerer:   reg,
	}, log)
	if err != nil {
		return err
	}

	// Listen for git before the metrics server starts: the pod's readiness probe checks /healthz,
	// so "healthy" must imply "the gateway accepts connections".
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("failed to listen for git on %q: %w", o.listen, err)
	}
	defer func() { _ = ln.Close() }()

	metricsSrv, err := startMetrics(o.metricsAddr, reg, log)
	if err != nil {
		return err
	}
	defer metricsSrv.stop()

	// No ReadTimeout or WriteTimeout: a clone or push of a large repository streams for as long
	// as it takes; a stalled client is cut off by the idle timeout between requests only.
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	branch := []any{"branch", "refs/heads/" + o.branchPrefix}
	if o.claimFile != "" {
		branch = []any{"claim_file", o.claimFile}
	}
	log.Info("git gateway started", append([]any{"listen", "http://" + ln.Addr().String() + "/", "upstream", upstreamURL.String(),
		"max_push_bytes", o.maxPushBytes, "version", buildinfo.Version}, branch...)...)
	select {
	case <-ctx.Done():
		log.Info("git gateway stopping", "reason", context.Cause(ctx).Error())
		shutdown(srv)
		return nil
	case err := <-errc:
		return fmt.Errorf("failed to serve git on %q: %w", o.listen, err)
	}
}

// readTokenFile reads a token file (the push token, or a pool pod's claim token), named in
// errors as what (the flag or variable that gave it). Errors name the file, never its content.
func readTokenFile(what, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("failed to read %s: %w", what, err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("failed to read %s %s: %w", what, path, err)
	}
	if len(b) > maxTokenFileBytes {
		return "", fmt.Errorf("invalid %s %s: larger than %d bytes", what, path, maxTokenFileBytes)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("invalid %s %s: it is empty", what, path)
	}
	return token, nil
}
