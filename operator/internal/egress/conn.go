package egress

import (
	"context"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"tatara.dev/operator/internal/connlimit"
)

// epoch makes activity times monotonic: a wall-clock jump must not close every tunnel at once.
var epoch = time.Now()

func sinceEpoch() time.Duration { return time.Since(epoch) }

// clientConn is an accepted connection. It is closed, with the upstream connections it opened,
// once no byte has moved either way, on it or on them, for idle: a tunnel whose client streams
// a download while sending nothing stays open, and one that neither side uses ends. It leaves its
// connSet when closed.
type clientConn struct {
	net.Conn
	src  netip.Addr
	idle time.Duration
	set  *connSet
	last atomic.Int64 // sinceEpoch of the last byte, in nanoseconds

	mu       sync.Mutex
	closed   bool
	timer    *time.Timer
	upstream map[*upstreamConn]struct{}
}

func newClientConn(c net.Conn, idle time.Duration, set *connSet) *clientConn {
	cc := &clientConn{Conn: c, src: connlimit.Source(c), idle: idle, set: set, upstream: map[*upstreamConn]struct{}{}}
	cc.touch()
	set.add(cc)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.timer = time.AfterFunc(idle, cc.closeIfIdle)
	return cc
}

func (c *clientConn) touch() { c.last.Store(int64(sinceEpoch())) }

// closeIfIdle closes the connection if it has been idle long enough, else looks again when it
// would be.
func (c *clientConn) closeIfIdle() {
	idleFor := sinceEpoch() - time.Duration(c.last.Load())
	if idleFor >= c.idle {
		_ = c.Close()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.timer.Reset(c.idle - idleFor)
	}
}

func (c *clientConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *clientConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

// Close closes the connection and every upstream connection it opened.
func (c *clientConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.timer.Stop()
	ups := slices.Collect(maps.Keys(c.upstream))
	c.mu.Unlock()
	for _, u := range ups {
		_ = u.Close()
	}
	err := c.Conn.Close()
	c.set.remove(c)
	return err
}

// attach makes up one of the connection's upstream connections: its bytes count as activity,
// and it is closed with the connection. onClose runs once, when up is closed.
func (c *clientConn) attach(up net.Conn, onClose func()) net.Conn {
	u := &upstreamConn{Conn: up, client: c}
	u.release = sync.OnceFunc(func() {
		c.mu.Lock()
		delete(c.upstream, u)
		c.mu.Unlock()
		onClose()
	})
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.upstream[u] = struct{}{}
	}
	c.mu.Unlock()
	if closed {
		_ = u.Close()
	}
	return u
}

type upstreamConn struct {
	net.Conn
	client  *clientConn
	release func()
}

func (u *upstreamConn) Read(b []byte) (int, error) {
	n, err := u.Conn.Read(b)
	if n > 0 {
		u.client.touch()
	}
	return n, err
}

func (u *upstreamConn) Write(b []byte) (int, error) {
	n, err := u.Conn.Write(b)
	if n > 0 {
		u.client.touch()
	}
	return n, err
}

func (u *upstreamConn) Close() error {
	err := u.Conn.Close()
	u.release()
	return err
}

// clientKey is the context key of the request's *clientConn (http.Server.ConnContext).
type clientKey struct{}

func withClient(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*clientConn); ok {
		return context.WithValue(ctx, clientKey{}, cc)
	}
	return ctx
}

func clientFrom(ctx context.Context) *clientConn {
	cc, _ := ctx.Value(clientKey{}).(*clientConn)
	return cc
}

// connSet holds the open client connections, which http.Server forgets once a CONNECT hijacks
// them: a shutdown waits for them and then closes those left.
type connSet struct {
	mu      sync.Mutex
	conns   map[*clientConn]struct{}
	changed chan struct{} // closed and replaced whenever one leaves
}

func newConnSet() *connSet {
	return &connSet{conns: map[*clientConn]struct{}{}, changed: make(chan struct{})}
}

func (s *connSet) add(c *clientConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[c] = struct{}{}
}

func (s *connSet) remove(c *clientConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	close(s.changed)
	s.changed = make(chan struct{})
}

// drain waits until every connection has closed or ctx is done, then closes those left.
func (s *connSet) drain(ctx context.Context) {
	for {
		s.mu.Lock()
		n, changed := len(s.conns), s.changed
		s.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			s.closeAll()
			return
		}
	}
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	left := slices.Collect(maps.Keys(s.conns))
	s.mu.Unlock()
	for _, c := range left {
		_ = c.Close()
	}
}

// trackingListener wraps each accepted connection in a clientConn of its set.
type trackingListener struct {
	net.Listener
	idle time.Duration
	set  *connSet
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newClientConn(c, l.idle, l.set), nil
}
