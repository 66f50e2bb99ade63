package allowlist

import (
	"fmt"
	"strings"
)

// hostPort is one host (or, in AllowList.wildcard, one domain) and one port.
type hostPort struct {
	host string
	port int
}

// defaultPorts are what an entry without a port allows.
var defaultPorts = []int{443, 80}

// AllowList is what the proxy lets through: names and ports, never addresses. It is built from a
// Project (egress.NewAllowList) and never changed after: a changed Project gets a new one.
type AllowList struct {
	exact map[hostPort]bool
	// wildcard holds the domain of each "*.domain" entry: it matches the domain's subdomains at
	// any depth, not the domain itself.
	wildcard map[hostPort]bool
}

// New is an empty list: it allows nothing until entries are added.
func New() *AllowList {
	return &AllowList{exact: map[hostPort]bool{}, wildcard: map[hostPort]bool{}}
}

// Allows reports whether host (canonical: see canonicalHost) and port are on the list.
func (l *AllowList) Allows(host string, port int) bool {
	if l.exact[hostPort{host, port}] {
		return true
	}
	for i := strings.IndexByte(host, '.'); i >= 0; {
		if l.wildcard[hostPort{host[i+1:], port}] {
			return true
		}
		next := strings.IndexByte(host[i+1:], '.')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return false
}

// Len is the number of host and port pairs on the list, a wildcard counting once per port.
func (l *AllowList) Len() int { return len(l.exact) + len(l.wildcard) }

// AddEntry adds one spec.egress.allow entry: a host name or "*.domain", optionally ":port",
// ASCII only (an internationalised name in its xn-- form), and no address. The CRD's pattern
// says the same; this is the check that holds whatever wrote the object.
func (l *AllowList) AddEntry(entry string) error {
	name, port, hasPort := strings.Cut(entry, ":")
	ports := defaultPorts
	if hasPort {
		p, ok := ParsePort(port)
		if !ok {
			return fmt.Errorf("port %q is not 1 to 65535", port)
		}
		ports = []int{p}
	}
	set := l.exact
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		set, name = l.wildcard, rest
	}
	if !isASCII(name) {
		return fmt.Errorf("not ASCII: write an internationalised name in its xn-- form")
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if _, ok := parseAddr(name); ok || strings.HasPrefix(name, "[") {
		return fmt.Errorf("an address: the proxy refuses connections to addresses, whatever the list says")
	}
	labels := strings.Split(name, ".")
	if numericLabel(labels[len(labels)-1]) {
		return fmt.Errorf("ends in a number, which resolvers read as an address")
	}
	if len(name) > maxHostLen {
		return fmt.Errorf("longer than %d characters", maxHostLen)
	}
	for _, lb := range labels {
		if !validLabel(lb, false) {
			return fmt.Errorf("label %q is not 1 to 63 letters, digits and inner hyphens", lb)
		}
	}
	for _, p := range ports {
		set[hostPort{name, p}] = true
	}
	return nil
}

// AddHost adds one host (as a URL names it: any case, perhaps Unicode) on one port; an address or
// anything that is not a host name is an error.
func (l *AllowList) AddHost(host string, port int) error {
	h, reason := canonicalHost(host)
	switch reason {
	case "":
	case ReasonIPLiteral:
		return fmt.Errorf("its host is an address: the proxy refuses connections to addresses")
	default:
		return fmt.Errorf("its host %q is not a host name", host)
	}
	l.exact[hostPort{h, port}] = true
	return nil
}
