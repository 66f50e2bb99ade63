package egress

import (
	"net"
	"strconv"
)

// Reason is why the proxy let a connection through or refused it: the reason label of
// tatara_egress_proxy_requests_total, so a small fixed set, never a host.
type Reason string

const (
	// ReasonAllowed: the host and port are on the allow-list and every address of the name is public.
	ReasonAllowed Reason = "allowed"
	// ReasonNotAllowed: the host and port are on no entry of the allow-list.
	ReasonNotAllowed Reason = "not_allowed"
	// ReasonIPLiteral: the request names an address, which no entry can allow.
	ReasonIPLiteral Reason = "ip_literal"
	// ReasonPrivateAddress: the name resolves to at least one forbidden address (ForbiddenPrefixes).
	ReasonPrivateAddress Reason = "private_address"
	// ReasonResolveFailed: the name has no address (or the resolver failed).
	ReasonResolveFailed Reason = "resolve_failed"
	// ReasonBadRequest: no proxy request (no absolute URL, no port on a CONNECT, not http), or no
	// host name.
	ReasonBadRequest Reason = "bad_request"
	// ReasonNoProject: the proxy has not seen its Project (yet, or any more), so it has no allow-list.
	ReasonNoProject Reason = "no_project"
)

// Reasons are every Reason, for pre-initialising the metric's series.
var Reasons = []Reason{ReasonAllowed, ReasonNotAllowed, ReasonIPLiteral, ReasonPrivateAddress,
	ReasonResolveFailed, ReasonBadRequest, ReasonNoProject}

// Refusal is the error of a connection the proxy refused; it becomes a 403 whose body is Error().
type Refusal struct {
	// Host is what the request named, canonical when it could be made so (shown quoted otherwise).
	Host   string
	Port   int
	Reason Reason
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
func refuse(host string, port int, reason Reason) *Refusal {
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
