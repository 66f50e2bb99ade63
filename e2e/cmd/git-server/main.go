// Command git-server is the e2e suite's git server: git's smart HTTP protocol (git http-backend)
// over the bare repositories under --root, clone and fetch with the read token, push with the
// write token (HTTP Basic password; the user name is ignored), and a demo repository created at
// start. The routes are documented in tatara.dev/testkit/gitserver.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/testkit/gitserver"
)

// shutdownTimeout bounds the graceful shutdown after SIGTERM (a clone or push under way).
const shutdownTimeout = 10 * time.Second

func main() { os.Exit(run()) }

func run() int {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	listen := flag.String("listen", ":8080", "address of the git smart HTTP server")
	root := flag.String("root", "", "directory of the bare repositories <root>/<name>.git (required; created if missing)")
	readTokenFile := flag.String("read-token-file", "", "file holding the token that clones and fetches (required)")
	writeTokenFile := flag.String("write-token-file", "", "file holding the token that also pushes (required)")
	demoRepo := flag.String("demo-repo", "demo", "bare repository created at start with the demo files when absent; empty: none")
	maxRequestBytes := flag.Int64("max-request-bytes", gitserver.DefaultMaxRequestBytes, "limit of one request body (a push's pack)")
	readHeaderTimeout := flag.Duration("read-header-timeout", gitserver.DefaultReadHeaderTimeout, "limit of the time to read a request's headers")
	idleTimeout := flag.Duration("idle-timeout", gitserver.DefaultIdleTimeout, "limit of the time a keep-alive connection waits for the next request")
	flag.Parse()
	if flag.NArg() > 0 {
		log.Error("unexpected arguments", slog.Any("args", flag.Args()))
		return 2
	}
	for _, f := range []struct{ name, value string }{{"--root", *root}, {"--read-token-file", *readTokenFile}, {"--write-token-file", *writeTokenFile}} {
		if f.value == "" {
			log.Error("a required flag is missing", slog.String("flag", f.name))
			return 2
		}
	}
	if *maxRequestBytes <= 0 || *readHeaderTimeout <= 0 || *idleTimeout <= 0 {
		log.Error("--max-request-bytes, --read-header-timeout and --idle-timeout must be positive")
		return 2
	}
	readToken, err := gitserver.ReadTokenFile(*readTokenFile)
	if err != nil {
		log.Error("failed to read the read token", slog.String("flag", "--read-token-file"), slog.Any("error", err))
		return 2
	}
	writeToken, err := gitserver.ReadTokenFile(*writeTokenFile)
	if err != nil {
		log.Error("failed to read the write token", slog.String("flag", "--write-token-file"), slog.Any("error", err))
		return 2
	}
	srv, err := gitserver.New(gitserver.Config{Root: *root, ReadToken: readToken, WriteToken: writeToken,
		MaxRequestBytes: *maxRequestBytes, Log: log})
	if err != nil {
		log.Error("failed to start", slog.Any("error", err))
		return 1
	}
	defer func() { _ = srv.Close() }()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *demoRepo != "" {
		created, err := srv.SeedDemo(ctx, *demoRepo)
		if err != nil {
			log.Error("failed to create the demo repository", slog.String("repo", *demoRepo), slog.Any("error", err))
			return 1
		}
		if !created {
			log.Info("the demo repository exists; left as is", slog.String("repo", *demoRepo))
		}
	}
	hs := &http.Server{Addr: *listen, Handler: srv.Handler(), ReadHeaderTimeout: *readHeaderTimeout, IdleTimeout: *idleTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- hs.ListenAndServe() }()
	log.Info("git server listening", slog.String("addr", *listen), slog.String("version", buildinfo.Version), slog.String("root", srv.Root()),
		slog.Int64("max_request_bytes", *maxRequestBytes))
	select {
	case err := <-errc:
		log.Error("server failed", slog.Any("error", err))
		return 1
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("shutdown", slog.Any("error", err))
		return 1
	}
	return 0
}
