// Package server serves the wrapper's /metrics, /healthz and /readyz.
//
// Liveness follows the transcript tailer's heartbeat: a tailer stuck (on a blocked log write, a
// hung file system) turns /healthz unhealthy so the kubelet restarts nothing silently broken.
// Readiness says the agent has started.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Heart is the tailer's liveness signal.
type Heart interface {
	// Heartbeat is the last time the tailer went through its loop.
	Heartbeat() time.Time
	// Running reports whether the tailer loop is active; a stopped tailer is not a stuck one.
	Running() bool
}

// Handler returns the mux for the three endpoints: metrics serves /metrics; staleAfter is how old
// a running tailer's heartbeat may get before /healthz fails; ready reports readiness.
func Handler(metrics http.Handler, heart Heart, staleAfter time.Duration, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if heart != nil && heart.Running() {
			if age := time.Since(heart.Heartbeat()); age > staleAfter {
				http.Error(w, fmt.Sprintf("transcript tailer stuck: last heartbeat %s ago", age.Round(time.Millisecond)),
					http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil && !ready() {
			http.Error(w, "agent not started", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// Server is a running HTTP server.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Start listens on addr (":0" picks a free port; Addr reports it) and serves h.
func Start(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %q: %w", addr, err)
	}
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Shutdown stops the server, letting in-flight scrapes finish until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("failed to shut down server %q: %w", s.Addr(), err)
	}
	return <-s.done
}
