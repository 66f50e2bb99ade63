package egress

import (
	"net"
	"strconv"

	"tatara.dev/operator/internal/egress/allowlist"
)

// Refusal is the error of a connection the proxy refused; it becomes a 403 whose body is Error().
type Refusal struct {
	// Host is what the request named, canonical when it could be made so (shown quoted otherwise).
	Host   string
	Port   int
	Reason allowlist.Reason
}

// Error is the one-line body of the 403: `tatara egress proxy: blocked: <host>:<port> (<reason>)`.
func (r *Refusal) Error() string {
	return "tatara egress proxy: blocked: " + r.Target() + " (" + string(r.Reason) + ")"
}

// Target is host:port as shown in logs, Events and the 403, the host bounded and quoted when it
// is not a plain name or address: the agent chose it, and it goes into an Event's note.
func (r *Refusal) Target() string {
	return net.JoinHostPort(displayHost(r.Host), strconv.Itoa(r.Port))
}

// displayHost is host as it may be shown: itself when it is printable ASCII without spaces or
// quotes, else Go-quoted; at most maxDisplayHost bytes of it either way.
func displayHost(host string) string {
	const maxDisplayHost = 260
	plain := len(host) > 0
	for i := 0; i < len(host) && plain; i++ {
		plain = host[i] > ' ' && host[i] < 0x7f && host[i] != '"' && host[i] != '\\'
	}
	if len(host) > maxDisplayHost {
		host = host[:maxDisplayHost]
		plain = false
	}
	if plain {
		return host
	}
	return strconv.QuoteToASCII(host)
}

// refuse builds a Refusal.
func refuse(host string, port int, reason allowlist.Reason) *Refusal {
	return &Refusal{Host: host, Port: port, Reason: reason}
}

// upstreamError is an allowed connection's failure to reach its host: answered 502, not counted
// as a refusal.
type upstreamError struct {
	host string
	port int
	err  error
}

func (e *upstreamError) Error() string {
	return "tatara egress proxy: failed to reach " + net.JoinHostPort(e.host, strconv.Itoa(e.port))
}

func (e *upstreamError) Unwrap() error { return e.err }
