package egress

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/apimachinery/pkg/util/validation"
)

// flags are the command line of `operator egress-proxy`.
type flags struct {
	project, namespace, listen, metricsAddr, probeAddr string
	limits                                             Limits
	level                                              slog.Level
	// denied are further ranges no allowed name may resolve to, beside ForbiddenPrefixes.
	denied []netip.Prefix
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("operator egress-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.project, "project", "", "the Project whose agent pods this proxy serves (required)")
	fs.StringVar(&f.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the Project's namespace (default: $POD_NAMESPACE)")
	fs.StringVar(&f.listen, "listen", ":3128", "address of the proxy")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address of /metrics (\"0\" disables)")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (ready once the Project has been read)")
	fs.IntVar(&f.limits.MaxConnections, "max-connections", DefaultMaxConnections, "open client connections in all")
	fs.IntVar(&f.limits.MaxConnectionsPerSource, "max-connections-per-source", DefaultMaxConnectionsPerSource,
		"open client connections per source address (agent pod); one past it is closed unread")
	fs.DurationVar(&f.limits.IdleTimeout, "idle-timeout", DefaultIdleTimeout,
		"a connection, with its tunnel, is closed once no byte has moved either way for this long")
	fs.DurationVar(&f.limits.ShutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout,
		"on SIGTERM, how long open tunnels may run on before they are closed")
	fs.TextVar(&f.level, "log-level", slog.LevelInfo, "log level: DEBUG, INFO, WARN or ERROR")
	fs.Func("deny-cidr", "a further range (CIDR) no allowed name may resolve to, beside the private, loopback, link-local and metadata ones; repeatable (a cluster whose nodes or pods have public addresses names them here)",
		func(v string) error {
			p, err := netip.ParsePrefix(v)
			if err != nil {
				return fmt.Errorf("not a CIDR: %w", err)
			}
			f.denied = append(f.denied, p.Masked())
			return nil
		})
	if err := fs.Parse(args); err != nil {
		return f, err // the flag package has printed which flag and why
	}
	if err := f.validate(fs.Args()); err != nil {
		_, _ = fmt.Fprintf(stderr, "operator egress-proxy: %v\n", err)
		return f, err
	}
	return f, nil
}

func (f flags) validate(rest []string) error {
	positive := func(name string, v int64) error {
		if v <= 0 {
			return fmt.Errorf("--%s must be positive, got %d", name, v)
		}
		return nil
	}
	var errs []error
	if len(rest) > 0 {
		errs = append(errs, fmt.Errorf("takes no arguments, got %q", rest))
	}
	if f.project == "" {
		errs = append(errs, errors.New("--project is required"))
	} else if msgs := validation.IsDNS1123Subdomain(f.project); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--project %q is not a Project name: %s", f.project, msgs[0]))
	}
	if f.namespace == "" {
		errs = append(errs, errors.New("--namespace is required (or $POD_NAMESPACE)"))
	} else if msgs := validation.IsDNS1123Label(f.namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--namespace %q is not a namespace name: %s", f.namespace, msgs[0]))
	}
	if f.listen == "" {
		errs = append(errs, errors.New("--listen is required"))
	}
	errs = append(errs,
		positive("max-connections", int64(f.limits.MaxConnections)),
		positive("max-connections-per-source", int64(f.limits.MaxConnectionsPerSource)),
		positive("idle-timeout", int64(f.limits.IdleTimeout)),
		positive("shutdown-timeout", int64(f.limits.ShutdownTimeout)))
	if f.limits.MaxConnectionsPerSource > f.limits.MaxConnections {
		errs = append(errs, fmt.Errorf("--max-connections-per-source %d is above --max-connections %d",
			f.limits.MaxConnectionsPerSource, f.limits.MaxConnections))
	}
	return errors.Join(errs...)
}

// Main runs `operator egress-proxy` with args (after "egress-proxy") until SIGTERM or SIGINT, or
// ctx is done, and returns the exit code: 0 after a clean stop, 1 on failure, 2 for bad flags.
// It logs JSON to stderr and writes nothing to stdout.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: f.level}))
	if err := run(ctx, f, log); err != nil {
		log.Error("egress proxy failed", "project", f.project, "error", err.Error())
		return 1
	}
	log.Info("egress proxy stopped", "project", f.project)
	return 0
}
