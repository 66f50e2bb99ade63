package allowlist

import (
	"net/netip"
	"testing"
)

// TestForbidden: the addresses no allowed name may resolve to, in each family and in the IPv6
// forms that reach an IPv4 address, and public addresses next to them that stay allowed.
func TestForbidden(t *testing.T) {
	set := ForbiddenPrefixes()
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"0.0.0.0", true}, {"0.1.2.3", true}, {"::", true},
		{"127.0.0.1", true}, {"127.255.255.254", true}, {"::1", true},
		{"10.0.0.1", true}, {"172.16.0.1", true}, {"172.31.255.255", true}, {"192.168.1.1", true},
		{"100.64.0.1", true}, {"100.127.255.255", true},
		{"169.254.169.254", true}, {"169.254.170.2", true}, {"fe80::1", true}, {"fe80::1%eth0", true},
		{"fc00::1", true}, {"fd00:ec2::254", true}, {"fd12:3456::1", true},
		{"224.0.0.1", true}, {"239.255.255.250", true}, {"ff02::1", true}, {"255.255.255.255", true},
		{"100.100.100.200", true}, {"168.63.129.16", true},
		// v4-mapped and NAT64 forms of forbidden IPv4 addresses.
		{"::ffff:127.0.0.1", true}, {"::ffff:10.1.2.3", true}, {"::ffff:169.254.169.254", true},
		{"::ffff:168.63.129.16", true}, {"64:ff9b::a00:1", true}, {"64:ff9b::7f00:1", true},
		// Public neighbours stay allowed, NAT64 of a public address too (IPv6-only clusters).
		{"8.8.8.8", false}, {"172.15.255.255", false}, {"172.32.0.1", false}, {"100.63.255.255", false},
		{"100.128.0.1", false}, {"168.63.129.17", false}, {"11.0.0.1", false}, {"192.169.0.1", false},
		{"2606:4700::1111", false}, {"::ffff:8.8.8.8", false}, {"64:ff9b::808:808", false},
		{"fbff:ffff::1", false}, {"fe00::1", false},
	} {
		if got := Forbidden(netip.MustParseAddr(c.addr), set); got != c.want {
			t.Errorf("Forbidden(%s) = %v, want %v", c.addr, got, c.want)
		}
	}
}
