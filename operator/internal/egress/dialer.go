package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"tatara.dev/operator/internal/egress/allowlist"
)

// Resolver is what the dialer asks for a name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DefaultDialTimeout bounds resolving a name and connecting to one of its addresses.
const DefaultDialTimeout = 10 * time.Second

// Dialer connects to a host the Policy allows, at an address it checked: it resolves the name
// once, refuses the whole name if any of its addresses is forbidden (a name with one private
// address is a name someone pointed inside), and dials the checked address itself, never the
// name again, so that a second answer from DNS (rebinding) cannot swap the address.
type Dialer struct {
	Policy   *allowlist.Policy
	Resolver Resolver
	// Forbidden are the addresses no allowed name may resolve to: ForbiddenPrefixes in
	// production; tests permit loopback.
	Forbidden []netip.Prefix
	// Timeout bounds resolving and connecting (0: DefaultDialTimeout).
	Timeout time.Duration
}

// Dial connects to rawHost:port. It returns a *Refusal when the policy or the addresses refuse
// it and an *upstreamError when an allowed host cannot be reached; host is the canonical name
// (empty when rawHost is none).
func (d *Dialer) Dial(ctx context.Context, rawHost string, port int) (conn net.Conn, host string, err error) {
	host, reason := d.Policy.Check(rawHost, port)
	if reason != allowlist.ReasonAllowed {
		shown := host
		if shown == "" {
			shown = rawHost
		}
		return nil, host, refuse(shown, port, reason)
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Rooted: with a pod's resolv.conf (ndots:5) the search list would first try
	// <name>.<namespace>.svc.cluster.local and the like, slower and answerable in the cluster.
	addrs, err := d.Resolver.LookupNetIP(ctx, "ip", host+".")
	if err != nil || len(addrs) == 0 {
		return nil, host, refuse(host, port, allowlist.ReasonResolveFailed)
	}
	for _, a := range addrs {
		if allowlist.Forbidden(a, d.Forbidden) {
			return nil, host, refuse(host, port, allowlist.ReasonPrivateAddress)
		}
	}
	// The addresses in the resolver's order, each once; the first that answers wins.
	var nd net.Dialer
	var errs []error
	for _, a := range addrs {
		c, err := nd.DialContext(ctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return c, host, nil
		}
		errs = append(errs, err)
	}
	return nil, host, &upstreamError{host: host, port: port, err: errors.Join(errs...)}
}

// splitTarget splits a request's host:port; the port must be there and be 1 to 65535.
func splitTarget(target string) (host string, port int, ok bool) {
	h, p, err := net.SplitHostPort(target)
	if err != nil || h == "" {
		return "", 0, false
	}
	port, ok = allowlist.ParsePort(p)
	return h, port, ok
}
