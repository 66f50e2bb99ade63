package allowlist

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzCheck: whatever host an agent names, the check never panics, and what it lets through is a
// canonical DNS name (lower case, no trailing dot, ASCII, no address) that the list allows and
// that checks the same way again: the name the proxy then resolves is the one it matched.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{"pkgs.example.com", "PKGS.example.com.", "a.b.example.org", "example.org",
		"bücher.example", "xn--bcher-kva.example", "127.1", "0x7f.1", "[::1]", "[fe80::1%eth0]", "１２７.０.０.１",
		"", ".", "..", "a..b", strings.Repeat("a.", 130) + "com", "evil.example.org.attacker.test", "-x.example.org"} {
		f.Add(seed, 443)
	}
	list := New()
	for _, entry := range []string{"pkgs.example.com", "*.example.org", "xn--bcher-kva.example:8443"} {
		if err := list.AddEntry(entry); err != nil {
			f.Fatal(err)
		}
	}
	var p Policy
	p.Set(list)
	f.Fuzz(func(t *testing.T, host string, port int) {
		got, reason := p.Check(host, port)
		if reason != ReasonAllowed {
			return
		}
		if got != strings.ToLower(got) || strings.HasSuffix(got, ".") || !isASCII(got) || got == "" {
			t.Fatalf("Check(%q, %d) allowed %q, which is not a canonical name", host, port, got)
		}
		if _, err := netip.ParseAddr(got); err == nil {
			t.Fatalf("Check(%q, %d) allowed the address %q", host, port, got)
		}
		if again, r := p.Check(got, port); again != got || r != ReasonAllowed {
			t.Fatalf("Check(%q) = %q allowed, but %q checks as %q %s", host, got, got, again, r)
		}
	})
}
