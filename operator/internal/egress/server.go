package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"

	"tatara.dev/operator/internal/connlimit"
)

// Defaults of Limits.
const (
	// DefaultMaxConnections bounds the proxy's open client connections.
	DefaultMaxConnections = 4096
	// DefaultMaxConnectionsPerSource bounds one agent pod's: a package manager opens tens at once,
	// and 16 pods at the cap fill DefaultMaxConnections.
	DefaultMaxConnectionsPerSource = 256
	// DefaultReadHeaderTimeout bounds reading a request's header (the CONNECT line and headers).
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultMaxHeaderBytes bounds a request's header.
	DefaultMaxHeaderBytes = 32 << 10
	// DefaultIdleTimeout closes a connection (a tunnel with its upstream) on which no byte has
	// moved either way for this long.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultShutdownTimeout bounds how long a stopping proxy lets open tunnels run on; the
	// chart's terminationGracePeriodSeconds must exceed it.
	DefaultShutdownTimeout = 20 * time.Second
)

// Limits bound the proxy; a zero field takes its Default* value.
type Limits struct {
	MaxConnections, MaxConnectionsPerSource, MaxHeaderBytes      int
	ReadHeaderTimeout, IdleTimeout, DialTimeout, ShutdownTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt(&l.MaxConnections, DefaultMaxConnections)
	defInt(&l.MaxConnectionsPerSource, DefaultMaxConnectionsPerSource)
	defInt(&l.MaxHeaderBytes, DefaultMaxHeaderBytes)
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	def(&l.DialTimeout, DefaultDialTimeout)
	def(&l.ShutdownTimeout, DefaultShutdownTimeout)
	return l
}

// Serve serves the proxy on ln until ctx is done. Then it stops accepting, lets requests and
// tunnels under way end for at most Limits.ShutdownTimeout, and closes those left.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	l := p.cfg.Limits
	// The cap per source sits inside the global one: a connection closed for its source's cap
	// never holds a place of the global cap.
	ln = netutil.LimitListener(connlimit.PerSource(ln, l.MaxConnectionsPerSource, p.cfg.Metrics.ConnectionsRefused.Inc),
		l.MaxConnections)
	ln = &trackingListener{Listener: ln, idle: l.IdleTimeout, set: p.conns}
	srv := &http.Server{
		Handler: p.gp, ReadHeaderTimeout: l.ReadHeaderTimeout, MaxHeaderBytes: l.MaxHeaderBytes,
		// No ReadTimeout or WriteTimeout: they would stay on a hijacked tunnel's connection and
		// end it mid-download; the idle bound (clientConn) ends what does not move.
		IdleTimeout: l.IdleTimeout,
		ConnContext: withClient,
		ErrorLog:    slog.NewLogLogger(p.cfg.Log.Handler(), slog.LevelWarn),
	}
	// HTTP/1.1 only: CONNECT needs a connection to hijack, and HTTP/2's stream floods stay out.
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	p.cfg.Log.Info("serving egress proxy", "project", p.cfg.Project, "addr", ln.Addr().String())
	select {
	case err := <-errc:
		p.conns.closeAll()
		return fmt.Errorf("failed to serve egress proxy on %q: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	drainCtx, cancel := context.WithTimeout(context.Background(), l.ShutdownTimeout)
	defer cancel()
	p.cfg.Log.Info("egress proxy stopping: open tunnels may run on", "limit", l.ShutdownTimeout.String())
	// Shutdown closes the listener and idle connections and waits for plain requests; hijacked
	// tunnels are the connSet's to wait for.
	err := srv.Shutdown(drainCtx)
	p.conns.drain(drainCtx)
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("failed to serve egress proxy: %w", serveErr)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("failed to shut down egress proxy: %w", err)
	}
	return nil
}

// Ready reports whether the proxy has seen its Project (until then it refuses everything).
func (p *Proxy) Ready() bool { return p.cfg.Policy.Ready() }
