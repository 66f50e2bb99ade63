package api

import (
	"net"
	"net/netip"
	"sync"
)

// sourceConnLimit is a listener that holds at most max connections open per source address: a
// connection from a source that already holds max is closed as soon as it is accepted, before
// anything is read from it. Under the global cap (netutil.LimitListener), it keeps one pod from
// holding every connection the server may have open, which would leave every other agent's tool
// calls, pool pods' claims and backends' token reviews waiting to be accepted.
type sourceConnLimit struct {
	net.Listener
	max int
	// refused counts the connections closed for their source's cap; nil counts nothing.
	refused func()

	mu   sync.Mutex
	open map[netip.Addr]int
}

func limitPerSource(ln net.Listener, max int, refused func()) *sourceConnLimit {
	return &sourceConnLimit{Listener: ln, max: max, refused: refused, open: map[netip.Addr]int{}}
}

// Accept returns the next connection whose source is under its cap.
func (l *sourceConnLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := connSource(c)
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

func (l *sourceConnLimit) release(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[src]--; l.open[src] <= 0 {
		delete(l.open, src)
	}
}

// connSource is a connection's remote address without its port; one that does not parse shares
// the zero Addr's count.
func connSource(c net.Conn) netip.Addr {
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
