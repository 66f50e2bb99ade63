// Package scrapewait holds a process's exit until Prometheus has scraped its /metrics once more.
//
// An agent pod lives seconds to minutes; Prometheus scrapes it every interval. A counter that
// changes after the last scrape and before the container exits is never seen, so a report made
// right before the end, or by a pod shorter than one interval, is lost to alerts and dashboards.
// The cli and the wrapper wrap their /metrics handler with a Gate and, once nothing can change
// any more (the agent has exited, the MCP server has stopped), call Wait: it returns after the
// next complete scrape from outside the pod, or after its bound when no Prometheus scrapes.
//
// Only a scrape from another host counts: the agent shares the pod's network namespace and could
// otherwise fetch /metrics itself to end the wait before Prometheus has seen its reports.
package scrapewait

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Gate counts the scrapes of the handler it wraps.
type Gate struct {
	mu sync.Mutex
	// started numbers every external scrape when it starts; done is the highest number of a
	// scrape that completed with a 2xx status. A scrape numbered n reflects every change made
	// before n started.
	started, done uint64
	changed       chan struct{} // closed and replaced whenever done moves
}

// New returns a Gate that has seen no scrape.
func New() *Gate { return &Gate{changed: make(chan struct{})} }

// Handler wraps a /metrics handler so that its external scrapes are counted.
func (g *Gate) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !External(r) {
			next.ServeHTTP(w, r)
			return
		}
		g.mu.Lock()
		g.started++
		n := g.started
		g.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		if sw.status < 200 || sw.status > 299 {
			return
		}
		g.mu.Lock()
		if n > g.done {
			g.done = n
			close(g.changed)
			g.changed = make(chan struct{})
		}
		g.mu.Unlock()
	})
}

// Wait blocks until a scrape that started after the call has completed, max has passed, or ctx
// is done; it reports whether such a scrape happened. max <= 0 returns false at once.
func (g *Gate) Wait(ctx context.Context, max time.Duration) bool {
	if max <= 0 {
		return false
	}
	return g.waitAfter(ctx, g.mark(), max)
}

// mark returns the number of the last external scrape started so far.
func (g *Gate) mark() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started
}

// waitAfter is Wait for a scrape numbered above after (a mark). Split from Wait so that a test
// can take the mark before it scrapes, whenever the waiting goroutine runs.
func (g *Gate) waitAfter(ctx context.Context, after uint64, max time.Duration) bool {
	timer := time.NewTimer(max)
	defer timer.Stop()
	for {
		g.mu.Lock()
		done, changed := g.done, g.changed
		g.mu.Unlock()
		if done > after {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// External reports whether r came from another host: neither loopback nor one of the pod's own
// addresses (the address r arrived on).
func External(r *http.Request) bool {
	remote, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := remote.Addr().Unmap()
	if ip.IsLoopback() || ip.IsUnspecified() {
		return false
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if l, err := netip.ParseAddrPort(local.String()); err == nil && l.Addr().Unmap() == ip {
			return false
		}
	}
	return true
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
