// Package connlimit bounds the connections one source address may hold open on a listener. The
// operator's REST API and the egress proxy both listen where agents can reach them, and an agent
// that holds every connection would leave every other agent waiting to be accepted.
package connlimit

import (
	"net"
	"net/netip"
	"sync"
)

// PerSource returns a listener that holds at most max connections open per source address: a
// connection from a source that already holds max is closed as soon as it is accepted, before
// anything is read from it. Wrap it in a global cap (netutil.LimitListener) rather than the other
// way round, so that a connection closed for its source's cap never holds a place of the global
// one. refused, when not nil, is called for each connection closed for its source's cap.
func PerSource(ln net.Listener, max int, refused func()) net.Listener {
	return &sourceLimit{Listener: ln, max: max, refused: refused, open: map[netip.Addr]int{}}
}

type sourceLimit struct {
	net.Listener
	max     int
	refused func()

	mu   sync.Mutex
	open map[netip.Addr]int
}

// Accept returns the next connection whose source is under its cap.
func (l *sourceLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := Source(c)
		l.mu.Lock()
		if l.open[src] >= l.max {
			l.mu.Unlock()
			// Counted before the close, so whoever sees the connection closed sees it counted.
			if l.refused != nil {
				l.refused()
			}
			_ = c.Close()
			continue
		}
		l.open[src]++
		l.mu.Unlock()
		return &sourceConn{Conn: c, release: sync.OnceFunc(func() { l.release(src) })}, nil
	}
}

func (l *sourceLimit) release(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[src]--; l.open[src] <= 0 {
		delete(l.open, src)
	}
}

// Source is a connection's remote address without its port, a v4-mapped address as v4; one that
// does not parse is the zero Addr (all such share one count).
func Source(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// sourceConn gives its source's place back once, on its first Close.
type sourceConn struct {
	net.Conn
	release func()
}

func (c *sourceConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
