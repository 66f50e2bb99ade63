package allowlist

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
