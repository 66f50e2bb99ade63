package allowlist

import "net/netip"

// ForbiddenPrefixes are the addresses an allowed name may not resolve to, what the cluster and
// its nodes answer on: a public name can be pointed at any address by whoever owns its zone, the
// agent included (a wildcard entry allows every name under a domain someone else runs).
func ForbiddenPrefixes() []netip.Prefix {
	return mustPrefixes(
		"0.0.0.0/8",      // "this network"; 0.0.0.0 reaches the host itself
		"10.0.0.0/8",     // RFC 1918
		"100.64.0.0/10",  // shared address space (carrier NAT, some clusters' pods); 100.100.100.200 is Alibaba's metadata
		"127.0.0.0/8",    // loopback
		"169.254.0.0/16", // link-local: 169.254.169.254 and the other metadata endpoints
		"172.16.0.0/12",  // RFC 1918
		"192.0.0.0/24",   // IETF protocol assignments
		"192.168.0.0/16", // RFC 1918
		"198.18.0.0/15",  // benchmarking, used inside some networks
		"224.0.0.0/4",    // multicast
		"240.0.0.0/4",    // reserved, and 255.255.255.255
		"::/128",         // unspecified
		"::1/128",        // loopback
		"::/96",          // IPv4-compatible (deprecated)
		"fc00::/7",       // unique local: fd00:ec2::254 and fd00:ec2::23 are AWS's metadata
		"fe80::/10",      // link-local
		"fec0::/10",      // site-local (deprecated)
		"ff00::/8",       // multicast
		// The cloud metadata and credential endpoints the chart's egressDenied names, each inside a
		// range above but for Azure's: named so that narrowing a range never lets one through.
		"169.254.169.254/32", "169.254.169.252/32", "169.254.170.2/32", "169.254.170.23/32",
		"100.100.100.200/32", "168.63.129.16/32", "fd00:ec2::254/128", "fd00:ec2::23/128",
	)
}

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Forbidden reports whether addr is in one of prefixes, seen as itself and as the IPv4 address
// it stands for: a v4-mapped address (::ffff:10.0.0.1) and a NAT64 one (64:ff9b::a00:1) reach
// the IPv4 address they embed. NAT64 as such is not forbidden: on an IPv6-only cluster with DNS64
// it is how every IPv4-only public host is reached.
func Forbidden(addr netip.Addr, prefixes []netip.Prefix) bool {
	addr = addr.WithZone("") // a zoned address is in no prefix
	candidates := []netip.Addr{addr, addr.Unmap()}
	if nat64.Contains(addr) {
		b := addr.As16()
		candidates = append(candidates, netip.AddrFrom4([4]byte(b[12:16])))
	}
	for _, a := range candidates {
		for _, p := range prefixes {
			if p.Contains(a) {
				return true
			}
		}
	}
	return false
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")
