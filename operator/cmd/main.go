// Command tatara-operator runs the Tatara operator: the Task controller, the REST API for
// agent tools, /metrics and health probes.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"tatara.dev/operator/internal/controller"
	"tatara.dev/operator/internal/egress"
	"tatara.dev/operator/internal/manager"
	"tatara.dev/operator/internal/releasecheck"
	"tatara.dev/operator/internal/rest"
	"tatara.dev/operator/internal/taskops"
)

func main() {
	// `operator release-check ...` is the charts' post-deploy check (helm test), not the operator.
	if len(os.Args) > 1 && os.Args[1] == "release-check" {
		os.Exit(releasecheck.Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	// `operator egress-proxy ...` is a Project's egress proxy (tatara-project chart), not the operator.
	if len(os.Args) > 1 && os.Args[1] == "egress-proxy" {
		os.Exit(egress.Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	var opts manager.Options
	var level slog.Level
	var agentNamespaces string
	flag.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "address of /metrics (\"0\" disables)")
	flag.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&opts.APIAddr, "api-bind-address", ":8082", "address of the REST API for agent tools")
	flag.StringVar(&opts.APITLSCertDir, "api-tls-cert-dir", "",
		"directory holding tls.crt and tls.key (a mounted kubernetes.io/tls Secret) for the REST API to serve HTTPS, reloaded when they change; its ca.crt, if any, is given to agent pods as TATARA_OPERATOR_CA_BUNDLE, and --operator-url must be https (empty: plain HTTP)")
	flag.Func("api-tls-issue-secret",
		"namespace/name of a Secret where the operator keeps a CA and REST API certificate it issues itself (created if missing, renewed before it ends); the REST API serves HTTPS with it, agent pods get the CA as TATARA_OPERATOR_CA_BUNDLE, and --operator-url must be https naming the certificate's host (excludes --api-tls-cert-dir)",
		func(v string) error {
			ns, name, ok := strings.Cut(v, "/")
			if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				return fmt.Errorf("want namespace/name, got %q", v)
			}
			opts.APITLSSecret = types.NamespacedName{Namespace: ns, Name: name}
			return nil
		})
	flag.BoolVar(&opts.LeaderElection, "leader-elect", false, "enable leader election (run with more than one replica)")
	flag.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election lease (default: in-cluster namespace)")
	flag.StringVar(&opts.Controller.RuntimeNamespace, "runtime-namespace", envOr("POD_NAMESPACE", "tatara-system"),
		"namespace of the tatara-cli-runtime and tatara-wrapper-runtime ConfigMaps (default: $POD_NAMESPACE)")
	flag.StringVar(&agentNamespaces, "agent-namespaces", "",
		"comma-separated namespaces of the Projects and Tasks to serve; the cache watches Tasks, Projects, agent pods and Secrets only there (empty: every namespace, for development)")
	flag.StringVar(&opts.Controller.OperatorURL, "operator-url", "http://tatara-operator.tatara-system.svc:8082", "TATARA_OPERATOR_URL given to agent pods")
	flag.StringVar(&opts.Controller.MemoryURL, "memory-url", "", "TATARA_MEMORY_URL given to agent pods")
	flag.StringVar(&opts.Controller.ChatURL, "chat-url", "", "TATARA_CHAT_URL given to agent pods")
	flag.DurationVar(&opts.Controller.NodeLostAfter, "node-lost-after", controller.DefaultNodeLostAfter,
		"how long a node may not be Ready before the Tasks whose agent pods run on it end or retry")
	flag.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", 8, "Tasks reconciled in parallel (make bench-scale chose the default)")
	flag.Int64Var(&opts.MaxBodyBytes, "api-max-body-bytes", 16<<10, "largest REST request body accepted (413 above)")
	flag.Float64Var(&opts.APIRateLimit.PerSecond, "api-rate-limit", rest.DefaultRateLimit,
		"REST requests per second each Task may make on average, counted per Task (token bucket); above it 429 with Retry-After (0 turns the limit off)")
	flag.IntVar(&opts.APIRateLimit.Burst, "api-rate-burst", rest.DefaultRateBurst,
		"REST requests each Task may make at once before --api-rate-limit applies (0 turns the limit off)")
	flag.Float64Var(&opts.APISourceRateLimit.PerSecond, "api-source-rate-limit", rest.DefaultSourceRateLimit,
		"REST requests per second each source address may make, before authentication (0 turns the limit off)")
	flag.IntVar(&opts.APISourceRateLimit.Burst, "api-source-rate-burst", rest.DefaultSourceRateBurst,
		"REST requests each source address may make at once before --api-source-rate-limit applies (0 turns the limit off)")
	flag.Float64Var(&opts.InternalIssueRateLimit.PerSecond, "internal-issue-rate-limit", rest.DefaultInternalIssueRateLimit.PerSecond,
		"internal-issue reports per second each Task may send on average, apart from --api-rate-limit; above it 429 (0 turns the limit off)")
	flag.IntVar(&opts.InternalIssueRateLimit.Burst, "internal-issue-rate-burst", rest.DefaultInternalIssueRateLimit.Burst,
		"internal-issue reports each Task may send at once before --internal-issue-rate-limit applies (0 turns the limit off)")
	flag.IntVar(&opts.InternalIssuesPerProject, "internal-issues-per-project", taskops.DefaultInternalIssuesPerProject,
		"InternalIssue records one Project may hold; the reports of new groups past it are counted in the Project's overflow record")
	flag.TextVar(&level, "log-level", slog.LevelInfo, "log level: DEBUG, INFO, WARN or ERROR")
	flag.Parse()
	opts.AgentNamespaces = manager.ParseNamespaces(agentNamespaces)

	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	opts.Log = log
	// Under a container memory limit, have the collector work harder before the kernel kills the
	// process: the heap may otherwise grow to twice the live heap (GOGC 100), which at 10,000 live
	// Tasks is about the chart's default limit (docs/architecture.md, Scale). The Go memory limit
	// becomes 90% of the cgroup's; GOMEMLIMIT, or AUTOMEMLIMIT=off, in the environment wins. A
	// failure is logged by memlimit and changes nothing.
	_, _ = memlimit.Set(memlimit.WithLogger(log))

	ctx := ctrl.SetupSignalHandler()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error("failed to load kubeconfig", "error", err)
		os.Exit(1)
	}
	op, err := manager.New(ctx, cfg, opts)
	if err != nil {
		log.Error("failed to set up operator", "error", err)
		os.Exit(1)
	}
	log.Info("starting operator", "runtimeNamespace", opts.Controller.RuntimeNamespace, "agentNamespaces", opts.AgentNamespaces, "api", opts.APIAddr,
		"apiTLS", opts.APITLSCertDir != "" || opts.APITLSSecret.Name != "", "leaderElection", opts.LeaderElection, "cliRuntimeConfigMap", controller.CLIRuntimeConfigMap)
	if err := op.Start(ctx); err != nil {
		log.Error("operator stopped with an error", "error", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
