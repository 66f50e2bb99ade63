package rest

import "time"

// DefaultMaxBodyBytes bounds request bodies (413 above); it also bounds what one call can
// add to a Task object.
const DefaultMaxBodyBytes = 16 << 10

// Connection limits of the REST server. Agents can reach it and may misbehave, so no connection
// may hold a goroutine for long: every route answers after a few API server calls, and the one
// that long-polls, a pool pod's claim, waits at most claim.MaxWait (20 s), so a write timeout of
// 30 s is enough. Bodies are at most MaxBodyBytes (16 KiB by default): 15 s to send one is slow
// enough for any honest client.
//
// Open connections are capped twice: per source address, so that one pod cannot hold them all,
// and in all. Every waiting pool pod holds one connection for its claim's long poll, all the
// time, and a cli a few for its tool calls; a backend's token reviews come from one address.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 15 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	// DefaultHandlerTimeout bounds a handler's own work (its context), well inside WriteTimeout:
	// a handler still waiting when the client has been cut off must not create anything after.
	DefaultHandlerTimeout = 25 * time.Second
	// DefaultMaxHeaderBytes fits a bearer token and ordinary headers many times over.
	DefaultMaxHeaderBytes = 16 << 10
	// DefaultMaxConnections bounds open connections (an idle keep-alive costs about 18 KiB):
	// far above what the agents and pool pods of one cluster keep open (4 or fewer each), and
	// about 72 MiB at most.
	DefaultMaxConnections = 4096
	// DefaultMaxConnectionsPerSource bounds the connections one source address holds open: a
	// cli's tool calls and its claim need a few, a backend's concurrent token reviews more. It
	// takes 64 sources at their cap to fill DefaultMaxConnections.
	DefaultMaxConnectionsPerSource = 64
)

// Limits bound each connection; a zero field takes its Default* value.
type Limits struct {
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout, HandlerTimeout time.Duration
	MaxHeaderBytes                                                            int
	// MaxConnections bounds the connections open at once; more wait to be accepted.
	MaxConnections int
	// MaxConnectionsPerSource bounds the connections one source address holds open; more from
	// it are closed as soon as they are accepted.
	MaxConnectionsPerSource int
}

func (l Limits) withDefaults() Limits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.ReadTimeout, DefaultReadTimeout)
	def(&l.WriteTimeout, DefaultWriteTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	def(&l.HandlerTimeout, DefaultHandlerTimeout)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	if l.MaxConnectionsPerSource <= 0 {
		l.MaxConnectionsPerSource = DefaultMaxConnectionsPerSource
	}
	return l
}
