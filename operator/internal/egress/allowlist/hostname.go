package allowlist

import (
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// maxHostLen is the longest DNS name without its trailing dot.
const maxHostLen = 253

// canonicalHost is the name a request's host is matched and resolved as: lower case, without a
// trailing dot, an internationalised name in its xn-- form (idna's Lookup profile, which also maps
// look-alike dots and widths, so "１２７.０.０.１" is seen as the address it spells). Anything that is
// not a DNS name is refused: an address (ReasonIPLiteral), including the forms some resolvers read
// as one (127.1, 2130706433, 0x7f.1: a name whose last label is a number), or text that is no
// name at all (ReasonBadRequest).
func canonicalHost(raw string) (string, Reason) {
	h := raw
	if strings.HasPrefix(h, "[") {
		// Only an IPv6 address (with a zone perhaps) is written in brackets.
		if _, ok := parseAddr(strings.TrimSuffix(h[1:], "]")); ok {
			return "", ReasonIPLiteral
		}
		return "", ReasonBadRequest
	}
	if !isASCII(h) {
		a, err := idna.Lookup.ToASCII(h)
		if err != nil {
			return "", ReasonBadRequest
		}
		h = a
	}
	h = strings.ToLower(h)
	if _, ok := parseAddr(h); ok {
		return "", ReasonIPLiteral
	}
	h = strings.TrimSuffix(h, ".")
	labels := strings.Split(h, ".")
	if numericLabel(labels[len(labels)-1]) {
		return "", ReasonIPLiteral
	}
	if len(h) > maxHostLen {
		return "", ReasonBadRequest
	}
	for _, l := range labels {
		if !validLabel(l, true) {
			return "", ReasonBadRequest
		}
	}
	return h, ""
}

// parseAddr parses an address with or without a zone (fe80::1%eth0).
func parseAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a, true
}

// numericLabel reports a label that makes the name an address to inet_aton and the WHATWG URL
// parser: decimal digits, or 0x and hex digits. No top-level domain is one.
func numericLabel(l string) bool {
	if l == "" {
		return false
	}
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(rest, "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

// validLabel reports a DNS label of 1 to 63 letters, digits and inner hyphens; a request's host
// may also carry underscores, which some real names do and no allow-list entry may.
func validLabel(l string, underscore bool) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || underscore && c == '_'
		if !ok {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// ParsePort parses a port of 1 to 65535 written in decimal digits only (no sign, no spaces).
func ParsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	p, err := strconv.Atoi(s)
	return p, err == nil && p >= 1 && p <= 65535
}
