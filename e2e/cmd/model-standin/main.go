// Command model-standin stands in for the language model behind the real agent CLI: it serves the
// Messages API on --listen, answers by the script in the agent's prompt and records what each
// request offered the model (GET /recorded). The script format is documented in
// tatara.dev/e2e/internal/model.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"tatara.dev/cli/pkg/buildinfo"
	"tatara.dev/e2e/internal/model"
)

func main() { os.Exit(run()) }

func run() int {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	listen := flag.String("listen", ":8080", "address of the Messages API")
	keyFile := flag.String("api-key-file", "", "file holding the API key requests must carry (x-api-key); empty: any key")
	flag.Parse()
	var key string
	if *keyFile != "" {
		raw, err := os.ReadFile(*keyFile)
		if err != nil {
			log.Error("failed to read the API key file", slog.Any("error", err))
			return 2
		}
		key = strings.TrimSpace(string(raw))
		if key == "" {
			log.Error("the API key file is empty", slog.String("file", *keyFile))
			return 2
		}
	}
	srv, err := model.NewServer(key, log)
	if err != nil {
		log.Error("failed to start", slog.Any("error", err))
		return 1
	}
	hs := &http.Server{Addr: *listen, Handler: srv.Handler(), ReadHeaderTimeout: model.ReadHeaderTimeout,
		ReadTimeout: model.ReadTimeout, WriteTimeout: model.WriteTimeout, IdleTimeout: model.IdleTimeout}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.ListenAndServe() }()
	log.Info("model stand-in listening", slog.String("addr", *listen), slog.String("version", buildinfo.Version), slog.Bool("api_key_required", key != ""))
	select {
	case err := <-errc:
		log.Error("server failed", slog.Any("error", err))
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "shutdown:", err)
	}
	return 0
}
