// Command kind-smoke is the workload of `make kind-smoke` (e2e/smoke): built FROM scratch, loaded
// into a kind cluster and run as a pod. `kind-smoke serve` answers /healthz for the pod's readiness
// probe; `kind-smoke lookup NAME` resolves NAME through the pod's DNS (CoreDNS) and prints the
// addresses.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kind-smoke:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: kind-smoke serve [ADDR] | kind-smoke lookup NAME")
	}
	switch args[0] {
	case "serve":
		addr := ":8080"
		if len(args) > 1 {
			addr = args[1]
		}
		return serve(addr)
	case "lookup":
		if len(args) != 2 || args[1] == "" {
			return errors.New("usage: kind-smoke lookup NAME")
		}
		return lookup(args[1])
	default:
		return fmt.Errorf("unknown command %q (want serve or lookup)", args[0])
	}
}

func serve(addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("failed to serve %q: %w", addr, err)
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdownCtx)
	}
}

func lookup(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		return fmt.Errorf("failed to resolve %q: %w", name, err)
	}
	fmt.Println(strings.Join(addrs, " "))
	return nil
}
