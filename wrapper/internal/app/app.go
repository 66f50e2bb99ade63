// Package app is the wrapper process: it reads its settings, serves metrics and health, runs the
// agent CLI for the Task's directive while tailing its transcript, and exits with the agent's
// exit code so the pod phase (Succeeded / Failed) drives the Task. In a warm pool's pod it first
// waits, without a time limit, for the Task that claims the pod (claim_assignment.go).
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tatara.dev/cli/pkg/agentpod"
	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/cli/pkg/claim"
	"tatara.dev/cli/pkg/redact"
	"tatara.dev/cli/pkg/scrapewait"
	ws "tatara.dev/cli/pkg/workspace"
	"tatara.dev/wrapper/internal/agent"
	"tatara.dev/wrapper/internal/metrics"
	"tatara.dev/wrapper/internal/pid1"
	"tatara.dev/wrapper/internal/server"
	"tatara.dev/wrapper/internal/transcript"
	"tatara.dev/wrapper/internal/workspace"
)

// Exit codes of the wrapper itself, and workspace.ExitCheckoutFailed (cli/pkg/workspace); any
// other code is the agent's.
const (
	ExitUsage      = 2   // bad flags or environment
	ExitSetup      = 3   // could not prepare the run (listen, write config)
	ExitAgentStart = 127 // the agent command could not be started
	ExitNoMCP      = 4   // the MCP server never accepted a connection, so the agent was not started
	// ExitAgentFailed is the agent's exit with one of the wrapper's own codes (reservedExitCodes):
	// the agent runs arbitrary code and must not pass for the wrapper, e.g. exit 5 as a checkout
	// that failed before it started. Its own code is logged.
	ExitAgentFailed = 1
)

// reservedExitCodes are the wrapper's; an agent that exits with one exits ExitAgentFailed.
var reservedExitCodes = []int{ExitUsage, ExitSetup, ExitNoMCP, ws.ExitCheckoutFailed, ExitAgentStart}

// DefaultMCPWait bounds how long the agent's start waits for the cli sidecar's MCP server: as long
// as the startup probe it replaces allowed (60 checks, 1 s apart).
const DefaultMCPWait = 60 * time.Second

// Config is the wrapper's settings; flags override the environment.
type Config struct {
	Project, Task, TaskKind string
	Directive               string
	AgentCommand            string
	MCPURL                  string
	MetricsAddr             string
	StateDir                string
	ConfigDir               string
	WorkDir                 string
	PollInterval            time.Duration
	HealthStaleAfter        time.Duration
	Linger                  time.Duration
	ScrapeWait              time.Duration
	MCPWait                 time.Duration
	LogLevel                slog.Level
	// ClaimFile is set in a warm pool's pod (claim.EnvFile): Task and Directive are empty until
	// the claim assignment there gives them, and the MCP wait has no time limit.
	ClaimFile string
	// TerminationLog gets the reason when a claimed pod's checkout of its Task's ref fails.
	// The wrapper empties it once the agent has run: the agent can write it too.
	TerminationLog string
}

// ParseConfig reads the settings from args (flags) and getenv.
func ParseConfig(args []string, getenv func(string) string) (Config, error) {
	c := Config{
		Project:   getenv("TATARA_PROJECT"),
		Task:      getenv("TATARA_TASK"),
		TaskKind:  getenv("TATARA_TASK_KIND"),
		ClaimFile: getenv(claim.EnvFile),
	}
	fs := flag.NewFlagSet("wrapper", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	def := func(env, fallback string) string {
		if v := getenv(env); v != "" {
			return v
		}
		return fallback
	}
	fs.StringVar(&c.Directive, "directive", getenv("TATARA_DIRECTIVE"), "the agent's prompt (env TATARA_DIRECTIVE)")
	fs.StringVar(&c.AgentCommand, "agent-command", def("TATARA_AGENT_COMMAND", "claude"), "agent CLI to run (env TATARA_AGENT_COMMAND)")
	fs.StringVar(&c.MCPURL, "mcp-url", def("TATARA_MCP_URL", agent.DefaultMCPURL), "MCP server URL written into the agent's MCP config (env TATARA_MCP_URL)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", def("TATARA_WRAPPER_METRICS_ADDR", fmt.Sprintf(":%d", agentpod.WrapperMetricsPort)), "address of /metrics, /healthz, /readyz (env TATARA_WRAPPER_METRICS_ADDR)")
	fs.StringVar(&c.StateDir, "state-dir", def("TATARA_WRAPPER_STATE_DIR", filepath.Join(os.TempDir(), "tatara-wrapper")), "directory for the MCP config and the agent's config dir (env TATARA_WRAPPER_STATE_DIR)")
	fs.StringVar(&c.ConfigDir, "claude-config-dir", getenv("TATARA_CLAUDE_CONFIG_DIR"), "agent config dir, CLAUDE_CONFIG_DIR for the agent (default <state-dir>/claude)")
	fs.StringVar(&c.WorkDir, "workdir", getenv("TATARA_WORKDIR"), "the agent's working directory (default: the wrapper's)")
	fs.DurationVar(&c.PollInterval, "poll-interval", transcript.DefaultPollInterval, "how often the transcript is checked for new bytes")
	fs.DurationVar(&c.HealthStaleAfter, "health-stale-after", 30*time.Second, "tailer heartbeat age that fails /healthz")
	lingerDef, err := durationEnv(getenv, "TATARA_WRAPPER_LINGER")
	if err != nil {
		return c, err
	}
	fs.DurationVar(&c.Linger, "linger", lingerDef, "keep serving /metrics this long after the agent exits, or until SIGTERM (env TATARA_WRAPPER_LINGER)")
	scrapeWaitDef, err := durationEnv(getenv, "TATARA_WRAPPER_SCRAPE_WAIT")
	if err != nil {
		return c, err
	}
	fs.DurationVar(&c.ScrapeWait, "scrape-wait", scrapeWaitDef, "after the agent exits, keep serving /metrics until they are scraped from outside the pod once more, at most this long (env TATARA_WRAPPER_SCRAPE_WAIT)")
	mcpWaitDef := DefaultMCPWait
	if getenv("TATARA_WRAPPER_MCP_WAIT") != "" {
		if mcpWaitDef, err = durationEnv(getenv, "TATARA_WRAPPER_MCP_WAIT"); err != nil {
			return c, err
		}
	}
	fs.DurationVar(&c.MCPWait, "mcp-wait", mcpWaitDef, "start the agent only once the MCP server accepts a connection, waiting at most this long (env TATARA_WRAPPER_MCP_WAIT; no limit in a pool pod)")
	fs.StringVar(&c.TerminationLog, "termination-log", workspace.DefaultTerminationLog, "file a claimed pod's failed checkout of its Task's ref is reported in, for the operator")
	level := fs.String("log-level", def("TATARA_WRAPPER_LOG_LEVEL", "info"), "debug, info, warn or error (env TATARA_WRAPPER_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("failed to parse flags %q: %w", strings.Join(args, " "), err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("failed to parse flags: unexpected argument %q", fs.Arg(0))
	}
	if err := c.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, fmt.Errorf("failed to parse log level %q: %w", *level, err)
	}
	switch {
	case strings.TrimSpace(c.Directive) == "" && c.ClaimFile == "":
		return c, errors.New("failed to read directive: TATARA_DIRECTIVE (or --directive) is empty")
	case c.AgentCommand == "":
		return c, errors.New("failed to read agent command: TATARA_AGENT_COMMAND (or --agent-command) is empty")
	case c.PollInterval <= 0 || c.HealthStaleAfter <= 0 || c.MCPWait <= 0 || c.Linger < 0 || c.ScrapeWait < 0:
		return c, errors.New("failed to validate durations: --poll-interval, --health-stale-after and --mcp-wait must be > 0, --linger and --scrape-wait >= 0")
	}
	if c.ConfigDir == "" {
		c.ConfigDir = filepath.Join(c.StateDir, "claude")
	}
	// The agent inherits the wrapper's HOME (agent.Env).
	if err := checkOutsideWorkDir(c, getenv("HOME")); err != nil {
		return c, err
	}
	return c, nil
}

// checkOutsideWorkDir refuses a state dir, agent config dir or HOME at or under the agent's
// working directory, a clone of code another agent may have written: the CLI would read its user
// settings (hooks, env) from there, the shell its rc files and git its global config. A Project's
// extraEnvs can set TATARA_WRAPPER_STATE_DIR and HOME.
func checkOutsideWorkDir(c Config, home string) error {
	workDir, err := filepath.Abs(c.WorkDir) // "" is the wrapper's own, which the agent inherits
	if err != nil {
		return fmt.Errorf("failed to resolve the working directory %q: %w", c.WorkDir, err)
	}
	for _, d := range []struct{ name, path string }{
		{"TATARA_WRAPPER_STATE_DIR (--state-dir)", c.StateDir},
		{"TATARA_CLAUDE_CONFIG_DIR (--claude-config-dir)", c.ConfigDir},
		{"HOME", home},
	} {
		if d.path == "" {
			continue
		}
		path, err := filepath.Abs(d.path)
		if err != nil {
			return fmt.Errorf("failed to resolve %s %q: %w", d.name, d.path, err)
		}
		// Rel, not a string prefix: /workspace-other is not under /workspace.
		if rel, err := filepath.Rel(workDir, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("failed to validate %s %q: it is at or under the agent's working directory %q, which the repository controls", d.name, path, workDir)
		}
	}
	return nil
}

// durationEnv parses the duration in the environment variable name; unset is 0.
func durationEnv(getenv func(string) string, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("failed to parse %s %q: %w", name, v, err)
	}
	return d, nil
}

// Main runs the wrapper and returns its exit code.
func Main(args []string, getenv func(string) string, environ []string, stderr io.Writer) int {
	cfg, err := ParseConfig(args, getenv)
	// The wrapper never gets the Task token (the cli sidecar alone has it; the agent runs arbitrary
	// code in this container, and this process not being dumpable is only a second layer): the
	// redactor masks it by its shape (tatara_ and 64 hex characters), wherever the agent's
	// transcript echoes it.
	red := redact.New()
	if err != nil {
		newLogger(stderr, red, cfg).Error("invalid configuration", slog.Any("error", err))
		return ExitUsage
	}
	return run(cfg, red, stderr, environ)
}

func newLogger(w io.Writer, red *redact.Redactor, cfg Config) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: cfg.LogLevel, ReplaceAttr: red.ReplaceAttr})
	return slog.New(h).With(
		slog.String("project", cfg.Project), slog.String("task", cfg.Task), slog.String("task_kind", cfg.TaskKind))
}

// forwardedSignals reach the agent's process group; terminating ones also end a linger.
var forwardedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

func endsLinger(sig os.Signal) bool { return sig == syscall.SIGTERM || sig == syscall.SIGINT }

// takePID1Duties makes the wrapper a fit main process for the container: it adopts and reaps the
// agent's orphans even when it is not PID 1, and the agent (same UID) cannot read its memory or
// environment. Neither failing stops the run; both are logged.
func takePID1Duties(log *slog.Logger) {
	attrs := []slog.Attr{slog.Int("pid", os.Getpid())}
	if err := pid1.SetNotDumpable(); err != nil {
		log.Warn("wrapper stays dumpable: the agent can read its memory and environment", slog.Any("error", err))
	}
	if err := pid1.SetChildSubreaper(); err != nil {
		log.Warn("wrapper is no subreaper: orphans of the agent are not reaped here unless it is PID 1", slog.Any("error", err))
	}
	if d, err := pid1.Dumpable(); err == nil {
		attrs = append(attrs, slog.Bool("dumpable", d))
	}
	if sr, err := pid1.IsChildSubreaper(); err == nil {
		attrs = append(attrs, slog.Bool("subreaper", sr))
	}
	log.LogAttrs(context.Background(), slog.LevelInfo, "process duties", attrs...)
}

func run(cfg Config, red *redact.Redactor, stderr io.Writer, environ []string) int {
	log := newLogger(stderr, red, cfg)
	// Signals are caught first, before anything is logged as ready: a SIGTERM that arrives as soon
	// as the metrics server listens (a pod deleted at once) is handled, not fatal, and none is lost
	// before the agent starts.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	takePID1Duties(log)
	reg := metrics.NewRegistry()
	m := newMetrics(reg)
	scrapes := scrapewait.New()
	sessionID := uuid.NewString()
	// The tailer is made once the Task is known (a pool pod's only after its claim).
	heart := &lateHeart{}
	var ready atomic.Bool
	srv, err := server.Start(cfg.MetricsAddr, server.Handler(scrapes.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})), heart, cfg.HealthStaleAfter, ready.Load), log)
	if err != nil {
		log.Error("failed to start metrics server", slog.Any("error", err))
		return ExitSetup
	}
	log.Info("metrics server listening", slog.String("addr", srv.Addr()), slog.String("version", buildinfo.Version))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			log.Warn("metrics server shutdown", slog.Any("error", err))
		}
	}()
	mcpConfig, err := writeAgentConfig(cfg, environ)
	if err != nil {
		log.Error("failed to prepare the agent's configuration", slog.Any("error", err))
		return ExitSetup
	}

	start := time.Now()
	if code, ok := waitForMCP(cfg, log, sigs); !ok {
		return code
	}
	if cfg.ClaimFile != "" {
		a, err := claim.ReadFile(cfg.ClaimFile)
		if err != nil {
			// The cli writes the file before it listens for MCP: none, or a broken one, is a bug.
			log.Error("invalid configuration: no usable claim once the MCP server listens", slog.String("claim_file", cfg.ClaimFile), slog.Any("error", err))
			return ExitUsage
		}
		cfg, environ = applyClaim(cfg, environ, a)
		log = newLogger(stderr, red, cfg)
		log.Info("pod claimed", slog.Duration("waited", time.Since(start).Round(time.Millisecond)), slog.String("claim_file", cfg.ClaimFile),
			slog.String("repo_dir", a.RepoDir), slog.String("push_branch", a.PushBranch))
		if err := prepareCheckout(context.Background(), a, log); err != nil {
			var failed *workspace.Error
			if errors.As(err, &failed) {
				workspace.ReportFailure(err, cfg.TerminationLog, log)
				return ws.ExitCheckoutFailed
			}
			log.Error("failed to prepare the claimed task's checkout", slog.Any("error", err))
			return ExitSetup
		}
	}
	tailer := transcript.New(cfg.ConfigDir, sessionID,
		transcript.WithLogger(log),
		transcript.WithRedactor(red),
		transcript.WithCounter(m.StreamEventsTotal),
		transcript.WithInternalIssueCounter(m.InternalIssueTotal),
		transcript.WithPollInterval(cfg.PollInterval),
	)
	heart.t.Store(tailer)
	proc := &agent.Process{
		Command: cfg.AgentCommand,
		Args:    agent.Args(mcpConfig, sessionID, cfg.Directive),
		// The agent reaches the operator only through the cli sidecar, which has the token; the
		// operator gives this container none, and one set by other means is still not passed on.
		Env: agent.Env(environ, cfg.ConfigDir, "TATARA_TOKEN"),
		Dir: cfg.WorkDir,
		Log: log.With(slog.String("session_id", sessionID)),
		Red: red,
	}
	code := runAgent(cfg, log, proc, tailer, sigs, &ready, sessionID, mcpConfig)
	if code == ExitAgentStart {
		return code
	}
	holdForScrape(cfg, log, scrapes)
	linger(cfg, log, sigs)
	clearTerminationLog(cfg.TerminationLog, log)
	return code
}

// clearTerminationLog empties the termination message, last, so that nothing the agent (or a
// process it left behind) wrote there passes for the wrapper's. truncate(2) creates no file where
// the kubelet made none, and cannot block on a FIFO put in its place.
func clearTerminationLog(path string, log *slog.Logger) {
	if err := os.Truncate(path, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("failed to clear the termination message", slog.String("path", path), slog.Any("error", err))
	}
}

// waitForMCP holds the agent's start until the cli's MCP server accepts a connection: the agent
// never runs without its tools. It gives up after cfg.MCPWait, or on SIGTERM or SIGINT, returning
// the exit code and false. In a pool pod the cli listens only once a Task has claimed the pod,
// which may take hours: there the wait has no time limit.
func waitForMCP(cfg Config, log *slog.Logger, sigs <-chan os.Signal) (int, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if cfg.ClaimFile == "" {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, cfg.MCPWait)
		defer stop()
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- agent.WaitForMCP(ctx, cfg.MCPURL) }()
	for {
		select {
		case err := <-done:
			waited := slog.Duration("waited", time.Since(start).Round(time.Millisecond))
			if err != nil {
				log.Error("agent not started: its MCP server never answered", slog.Any("error", err), waited, slog.Duration("max", cfg.MCPWait))
				return ExitNoMCP, false
			}
			log.Info("mcp server accepting", slog.String("mcp_url", cfg.MCPURL), waited)
			return 0, true
		case sig := <-sigs:
			if endsLinger(sig) {
				log.Info("agent not started: stopped while waiting for its MCP server", slog.String("signal", sig.String()))
				return 128 + int(sig.(syscall.Signal)), false
			}
		}
	}
}

// newMetrics registers the wrapper's metrics with every bounded series at 0 from the start, so a
// scrape before the first event gives increase() its starting point.
func newMetrics(reg prometheus.Registerer) *metrics.Metrics {
	m := metrics.NewMetrics(reg)
	for _, l := range transcript.InternalIssueLabels() {
		m.InternalIssueTotal.WithLabelValues(l[0], l[1])
	}
	for _, l := range transcript.StreamEventLabels() {
		m.StreamEventsTotal.WithLabelValues(l)
	}
	return m
}

// writeAgentConfig creates the agent's config dir with its user settings and writes its MCP
// config, returning the config's path.
func writeAgentConfig(cfg Config, environ []string) (string, error) {
	if err := os.MkdirAll(cfg.ConfigDir, 0o700); err != nil {
		return "", fmt.Errorf("failed to create agent config dir %q: %w", cfg.ConfigDir, err)
	}
	if err := agent.WriteUserSettings(cfg.ConfigDir, environ); err != nil {
		return "", err
	}
	path := filepath.Join(cfg.StateDir, "mcp-config.json")
	if err := agent.WriteMCPConfig(path, cfg.MCPURL); err != nil {
		return "", err
	}
	return path, nil
}

// runAgent runs the agent with the transcript tailer beside it, forwards signals to it, and
// returns its exit code (ExitAgentStart when it never started) once the tailer has read its last
// line and the run is reported.
func runAgent(cfg Config, log *slog.Logger, proc *agent.Process, tailer *transcript.Tailer, sigs <-chan os.Signal, ready *atomic.Bool, sessionID, mcpConfig string) int {
	tailCtx, stopTail := context.WithCancel(context.Background())
	tailDone := make(chan struct{})
	go func() { defer close(tailDone); tailer.Run(tailCtx) }()
	if err := proc.Start(); err != nil {
		stopTail()
		<-tailDone
		log.Error("failed to start agent", slog.Any("error", err))
		return ExitAgentStart
	}
	ready.Store(true)
	log.Info("agent started", slog.String("command", cfg.AgentCommand), slog.Int("pid", proc.PID()),
		slog.String("session_id", sessionID), slog.String("mcp_config", mcpConfig),
		slog.String("config_dir", cfg.ConfigDir), slog.Int("directive_bytes", len(cfg.Directive)))

	exited := make(chan struct{})
	var res agent.Result
	var waitErr error
	go func() { defer close(exited); res, waitErr = proc.Wait() }()
	for waiting := true; waiting; {
		select {
		case sig := <-sigs:
			log.Info("forwarding signal to agent", slog.String("signal", sig.String()), slog.Int("process_group", proc.PID()))
			if err := proc.Signal(sig); err != nil {
				log.Warn("failed to forward signal", slog.Any("error", err))
			}
		case <-exited:
			waiting = false
		}
	}
	// The agent is gone: read what it wrote up to its last line.
	stopTail()
	<-tailDone
	code := res.ExitCode
	if waitErr != nil {
		log.Error("failed to wait for agent", slog.Any("error", waitErr))
		code = 1
	} else if slices.Contains(reservedExitCodes, code) {
		log.Warn("agent exited with one of the wrapper's exit codes; the wrapper exits ExitAgentFailed instead",
			slog.Int("agent_exit_code", code), slog.Int("exit_code", ExitAgentFailed))
		code = ExitAgentFailed
	}
	report(log, sessionID, res, code, tailer.Summary(), pid1.ProcessReaper().Orphans())
	return code
}

// holdForScrape holds the exit, once nothing counts any more, until Prometheus has seen the
// final counts (package scrapewait), bounded by the operator from the chart's scrape interval.
func holdForScrape(cfg Config, log *slog.Logger, scrapes *scrapewait.Gate) {
	if cfg.ScrapeWait <= 0 {
		return
	}
	log.Info("waiting for a final metrics scrape", slog.Duration("max", cfg.ScrapeWait))
	start := time.Now()
	scraped := scrapes.Wait(context.Background(), cfg.ScrapeWait)
	log.Info("final metrics scrape", slog.Bool("scraped", scraped), slog.Duration("waited", time.Since(start).Round(time.Millisecond)))
}

// linger keeps serving metrics for cfg.Linger, or until SIGTERM or SIGINT.
func linger(cfg Config, log *slog.Logger, sigs <-chan os.Signal) {
	if cfg.Linger <= 0 {
		return
	}
	log.Info("serving metrics until linger ends or SIGTERM", slog.Duration("linger", cfg.Linger))
	timer := time.NewTimer(cfg.Linger)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case sig := <-sigs:
			if endsLinger(sig) {
				return
			}
		}
	}
}

// report logs the turn summary: how the agent ended, what its transcript showed and how many
// orphaned processes the wrapper reaped.
func report(log *slog.Logger, sessionID string, res agent.Result, code int, s transcript.Summary, orphans int64) {
	attrs := []slog.Attr{
		slog.String("session_id", sessionID),
		slog.Int("exit_code", code),
		slog.Duration("duration", res.Duration),
		slog.Int("turns", s.Turns),
		slog.Int64("tool_uses", s.ToolUses),
		slog.Int64("tool_errors", s.ToolErrors),
		slog.Int64("internal_issues", s.InternalIssues),
		slog.Int64("events", s.Events),
		slog.Int64("malformed", s.Malformed),
		slog.Int64("oversize_lines", s.Oversize),
		slog.Int("transcript_files", s.Files),
		slog.Int64("transcript_bytes", s.Bytes),
		slog.Int64("input_tokens", s.InputTokens),
		slog.Int64("output_tokens", s.OutputTokens),
		slog.Int64("orphans_reaped", orphans),
	}
	if res.Signal != "" {
		attrs = append(attrs, slog.String("signal", res.Signal))
	}
	if f := res.Final; f != nil {
		attrs = append(attrs, slog.String("result_subtype", f.Subtype), slog.Bool("result_is_error", f.IsError),
			slog.Int("result_num_turns", f.NumTurns), slog.Float64("result_cost_usd", f.TotalCostUSD))
	}
	level := slog.LevelInfo
	if code != 0 {
		level = slog.LevelError
	}
	log.LogAttrs(context.Background(), level, "agent exited", attrs...)
}
