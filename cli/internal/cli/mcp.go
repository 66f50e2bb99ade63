package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"tatara.dev/cli/internal/backend"
	"tatara.dev/cli/internal/catalog"
	"tatara.dev/cli/internal/mcpserver"
	"tatara.dev/cli/internal/obs"
	"tatara.dev/cli/internal/version"
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
)

type mcpOptions struct {
	transport   string
	listen      string
	toolProfile string
	metricsAddr string
	callTimeout time.Duration
}

func newMCPCommand(logOut io.Writer) *cobra.Command {
	o := mcpOptions{}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the agent tool surface over MCP (stdio or streamable HTTP)",
		Long: `Serve the agent tool surface over MCP.

The tool profile (--tool-profile, else TATARA_TOOL_PROFILE) selects which tools are registered;
an empty or unknown profile serves every tool and logs a WARN. Backends come from
TATARA_MEMORY_URL, TATARA_CHAT_URL and TATARA_OPERATOR_URL (bearer TATARA_TOKEN); task and
project arguments default to TATARA_TASK and TATARA_PROJECT.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runMCP(ctx, o, newLogger(logOut), os.Stdin, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.transport, "transport", "stdio", "stdio or http (MCP streamable HTTP)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:7777", "address of the streamable HTTP endpoint (path /mcp)")
	f.StringVar(&o.toolProfile, "tool-profile", os.Getenv(EnvToolProfile), "tool profile; overrides "+EnvToolProfile)
	f.StringVar(&o.metricsAddr, "metrics-addr", os.Getenv(EnvMetricsAddr), "address serving /metrics and /healthz (empty disables); defaults to "+EnvMetricsAddr)
	f.DurationVar(&o.callTimeout, "call-timeout", mcpserver.DefaultCallTimeout, "timeout of one backend call")
	return cmd
}

func runMCP(ctx context.Context, o mcpOptions, log *slog.Logger, stdin io.Reader, stdout io.Writer) error {
	if o.transport != "stdio" && o.transport != "http" {
		return fmt.Errorf("invalid --transport %q: want stdio or http", o.transport)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := obs.NewMetrics(reg)
	metrics.SetBuildInfo(version.Version, version.Revision())

	project, task := os.Getenv(EnvProject), os.Getenv(EnvTask)
	identity := map[string]string{"X-Tatara-Project": project, "X-Tatara-Task": task}
	httpClient := &http.Client{}
	srv := mcpserver.New(mcpserver.Config{
		Profile: o.toolProfile,
		Backends: map[catalog.Target]*backend.Client{
			catalog.TargetMemory:   {Name: "memory", BaseURL: os.Getenv(EnvMemoryURL), Headers: identity, HTTP: httpClient},
			catalog.TargetChat:     {Name: "chat", BaseURL: os.Getenv(EnvChatURL), Headers: identity, HTTP: httpClient},
			catalog.TargetOperator: {Name: "operator", BaseURL: os.Getenv(EnvOperatorURL), Token: os.Getenv(EnvToken), HTTP: httpClient},
		},
		Context:     map[string]string{catalog.EnvProject: project, catalog.EnvTask: task},
		CallTimeout: o.callTimeout,
		Version:     version.Version,
		Logger:      log,
		Metrics:     metrics,
	})

	// Listen for MCP before the metrics server starts: the agent pod's startup probe checks the
	// metrics port (the MCP port is loopback-only), so "metrics up" must imply "MCP listening".
	var mcpListener net.Listener
	if o.transport == "http" {
		ln, err := net.Listen("tcp", o.listen)
		if err != nil {
			return fmt.Errorf("failed to listen for MCP on %q: %w", o.listen, err)
		}
		mcpListener = ln
		defer func() { _ = ln.Close() }()
	}

	var metricsSrv *http.Server
	if o.metricsAddr != "" {
		ln, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			return fmt.Errorf("failed to listen for metrics on %q: %w", o.metricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = metricsSrv.Serve(ln) }()
		log.Info("metrics server listening", "addr", ln.Addr().String())
	}
	defer func() {
		if metricsSrv != nil {
			shutdown(metricsSrv)
		}
	}()

	startup := []any{"profile", o.toolProfile, "resolved_profile", srv.ResolvedProfile,
		"registered_tools", len(srv.Tools), "transport", o.transport, "version", version.Version, "project", project, "task", task}
	if o.transport == "stdio" {
		log.Info("mcp server started", startup...)
		err := server.NewStdioServer(srv.MCP).Listen(ctx, stdin, stdout)
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("failed to serve MCP over stdio: %w", err)
		}
		log.Info("mcp server stopped")
		return nil
	}

	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(srv.MCP, server.WithEndpointPath("/mcp")))
	httpSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(mcpListener) }()
	log.Info("mcp server started", append(startup, "listen", "http://"+mcpListener.Addr().String()+"/mcp")...)
	select {
	case <-ctx.Done():
		log.Info("mcp server stopping", "reason", context.Cause(ctx).Error())
		shutdown(httpSrv)
		return nil
	case err := <-errc:
		return fmt.Errorf("failed to serve MCP on %q: %w", o.listen, err)
	}
}

func shutdown(s *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
}
