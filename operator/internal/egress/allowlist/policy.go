// Package allowlist decides, by name alone, what the egress proxy lets an agent reach: a host
// request is made canonical (case, trailing dot, IDN, the spellings of an address) and checked
// against the Project's entries, and the addresses an allowed name may not resolve to are listed.
// It imports nothing of Kubernetes (egress.NewAllowList reads the Project), so its fuzz target
// builds without instrumenting the cluster client.
package allowlist

import "sync/atomic"

// Policy holds the allow-list of the Project as last seen. Until a Project is set, and after it
// is deleted, it refuses everything with ReasonNoProject: a proxy that has not read its Project
// knows of nothing it may let through.
type Policy struct {
	list atomic.Pointer[AllowList]
}

// Set replaces the allow-list; nil means no Project (everything refused).
func (p *Policy) Set(l *AllowList) { p.list.Store(l) }

// Ready reports whether the Project has been seen.
func (p *Policy) Ready() bool { return p.list.Load() != nil }

// Check decides a request for rawHost (as the request named it: any case, perhaps Unicode or a
// trailing dot) and port by name alone, before anything is resolved: it returns the canonical
// host to resolve, or the reason it is refused.
func (p *Policy) Check(rawHost string, port int) (string, Reason) {
	l := p.list.Load()
	if l == nil {
		return "", ReasonNoProject
	}
	host, reason := canonicalHost(rawHost)
	if reason != "" {
		return "", reason
	}
	if !l.Allows(host, port) {
		return host, ReasonNotAllowed
	}
	return host, ReasonAllowed
}
