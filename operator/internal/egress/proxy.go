// Package egress is the per-Project egress proxy (`operator egress-proxy`): agent pods reach the
// outside of the cluster only through it (HTTPS_PROXY, HTTP_PROXY; the Project's NetworkPolicy
// stops every other way), and it lets through only names on the Project's allow-list whose every
// address is public. The agent is the attacker here: it chooses the host, the name's DNS answers
// (a wildcard entry allows names someone else runs) and how many connections it opens.
//
// CONNECT is tunnelled as is (no TLS interception); a plain-HTTP request in absolute form is
// forwarded. Both are decided by host and port, and every decision is logged, counted
// (tatara_egress_proxy_requests_total) and, for a refusal from a Task's pod, recorded as an
// Event on the Task.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/elazarl/goproxy"
	"k8s.io/client-go/tools/events"

	"tatara.dev/operator/internal/egress/allowlist"
)

// Config configures a Proxy.
type Config struct {
	Project, Namespace string
	// Policy holds the Project's allow-list (kept up to date by ProjectReconciler).
	Policy *allowlist.Policy
	// Resolver resolves allowed names; nil is net.DefaultResolver.
	Resolver Resolver
	// Forbidden are the addresses no allowed name may resolve to; nil is allowlist.ForbiddenPrefixes().
	// Tests permit loopback here.
	Forbidden []netip.Prefix
	// Identify maps a source address to its agent pod and Task; nil identifies no one.
	Identify Identifier
	// Events receives an Event per refusal of a Task's pod (within the budget); nil records none.
	Events  events.EventRecorder
	Metrics *Metrics
	Log     *slog.Logger
	Limits  Limits
}

// Proxy is the egress proxy of one Project.
type Proxy struct {
	cfg    Config
	dialer *Dialer
	rep    *reporter
	gp     *goproxy.ProxyHttpServer
	conns  *connSet
}

// New builds the proxy; Serve runs it.
func New(cfg Config) *Proxy {
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Forbidden == nil {
		cfg.Forbidden = allowlist.ForbiddenPrefixes()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{
		cfg:    cfg,
		dialer: &Dialer{Policy: cfg.Policy, Resolver: cfg.Resolver, Forbidden: cfg.Forbidden, Timeout: cfg.Limits.DialTimeout},
		rep: &reporter{project: cfg.Project, namespace: cfg.Namespace, log: cfg.Log, metrics: cfg.Metrics,
			identify: cfg.Identify, events: cfg.Events, budget: newEventBudget()},
		conns: newConnSet(),
	}
	p.gp = p.goproxy()
	return p
}

// goproxy configures the goproxy server: every dial goes through p.dial, nothing is read from the
// environment (NewProxyHttpServer would chain to this process's own HTTPS_PROXY and skip TLS
// verification on its default transport), and its log goes to ours at debug level: the
// decisions are logged by the reporter, what goproxy says besides is copy errors.
func (p *Proxy) goproxy() *goproxy.ProxyHttpServer {
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = debugLogger{p.cfg.Log}
	gp.ConnectDial = nil
	gp.ConnectDialWithReq = func(req *http.Request, _, addr string) (net.Conn, error) {
		return p.dial(req.Context(), addr)
	}
	gp.ConnectionErrHandler = p.connectFailed
	// Plain HTTP: one upstream connection per request, dialled (so decided) each time; plain HTTP
	// is rare enough that pooling is not worth a connection outliving its decision.
	gp.Tr = &http.Transport{
		DialContext:       func(ctx context.Context, _, addr string) (net.Conn, error) { return p.dial(ctx, addr) },
		DisableKeepAlives: true,
	}
	gp.NonproxyHandler = http.HandlerFunc(p.notProxyRequest)
	gp.OnRequest().HandleConnectFunc(p.onConnect)
	gp.OnRequest().DoFunc(p.onRequest)
	gp.OnResponse().DoFunc(p.onResponse)
	return gp
}

// dial decides and, when allowed, opens a connection to addr (host:port) for the request whose
// context is ctx; the connection belongs to the request's client connection.
func (p *Proxy) dial(ctx context.Context, addr string) (net.Conn, error) {
	cc := clientFrom(ctx)
	var src netip.Addr
	if cc != nil {
		src = cc.src
	}
	rawHost, port, ok := splitTarget(addr)
	if !ok {
		ref := refuse(addr, 0, allowlist.ReasonBadRequest)
		p.rep.denied(ctx, src, ref)
		return nil, ref
	}
	c, host, err := p.dialer.Dial(ctx, rawHost, port)
	var ref *Refusal
	if errors.As(err, &ref) {
		p.rep.denied(ctx, src, ref)
		return nil, ref
	}
	p.rep.allowed(ctx, src, host, port)
	if err != nil {
		p.rep.upstreamFailed(ctx, src, host, port, err)
		return nil, err
	}
	if cc == nil {
		return c, nil // not served by Serve: no client connection to tie it to
	}
	p.cfg.Metrics.OpenUpstream.Inc()
	return cc.attach(c, p.cfg.Metrics.OpenUpstream.Dec), nil
}

// onConnect accepts a CONNECT whose target is host:port; p.dial decides it.
func (p *Proxy) onConnect(target string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	if _, _, ok := splitTarget(target); !ok {
		host, port := hostAndPort(target, 0)
		ref := refuse(host, port, allowlist.ReasonBadRequest)
		p.rep.denied(ctx.Req.Context(), sourceOf(ctx.Req), ref)
		ctx.Resp = refusal(ctx.Req, ref) //nolint:bodyclose // goproxy writes it to the client and closes it
		return &goproxy.ConnectAction{Action: goproxy.ConnectReject}, target
	}
	return &goproxy.ConnectAction{Action: goproxy.ConnectAccept}, target
}

// connectFailed answers a CONNECT that p.dial refused (403) or could not open (502). goproxy also
// calls it with a tunnel's copy errors, after the 200: then the stream is the client's and
// nothing is written.
func (p *Proxy) connectFailed(w io.Writer, ctx *goproxy.ProxyCtx, err error) {
	var ref *Refusal
	var up *upstreamError
	var resp *http.Response
	switch {
	case errors.As(err, &ref):
		resp = refusal(ctx.Req, ref)
	case errors.As(err, &up):
		resp = answer(ctx.Req, http.StatusBadGateway, up.Error())
	default:
		return
	}
	defer func() { _ = resp.Body.Close() }()
	_ = resp.Write(w)
}

// onRequest lets through a plain-HTTP request in absolute form (http://host[:port]/...); p.dial
// decides it when the transport dials. An https:// URL is refused: the client tunnels TLS
// with CONNECT, and the proxy does not speak TLS for it.
func (p *Proxy) onRequest(req *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	host, port := hostAndPort(req.URL.Host, 80)
	if req.URL.Scheme != "http" || port == 0 || !strings.EqualFold(req.Host, req.URL.Host) {
		ref := refuse(host, port, allowlist.ReasonBadRequest)
		p.rep.denied(req.Context(), sourceOf(req), ref)
		return req, refusal(req, ref)
	}
	return req, nil
}

// onResponse answers a plain-HTTP request that p.dial refused or could not open.
func (p *Proxy) onResponse(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
	if resp != nil || ctx.Error == nil {
		return resp
	}
	var ref *Refusal
	var up *upstreamError
	switch {
	case errors.As(ctx.Error, &ref):
		return refusal(ctx.Req, ref)
	case errors.As(ctx.Error, &up):
		return answer(ctx.Req, http.StatusBadGateway, up.Error())
	}
	return answer(ctx.Req, http.StatusBadGateway, "tatara egress proxy: failed to forward the request")
}

// notProxyRequest refuses a request that is not for the proxy (a path, not an absolute URL).
func (p *Proxy) notProxyRequest(w http.ResponseWriter, req *http.Request) {
	host, port := hostAndPort(req.Host, 80)
	ref := refuse(host, port, allowlist.ReasonBadRequest)
	p.rep.denied(req.Context(), sourceOf(req), ref)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(BlockedHeader, BlockedValue)
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, ref.Error()+"\n")
}

// refusal is the 403 of a refused request. X-Proxy-Error: blocked-by-allowlist is the answer the
// agent CLI recognises: it tells the model that the egress proxy blocked the host, where a bare
// 403 reads as "proxy refused the connection" (e2e/agentcli TestAgentCLIRequestsAndTheEgressProxy).
func refusal(req *http.Request, ref *Refusal) *http.Response {
	resp := answer(req, http.StatusForbidden, ref.Error())
	resp.Header.Set(BlockedHeader, BlockedValue)
	return resp
}

// BlockedHeader and BlockedValue mark the proxy's refusals.
const BlockedHeader, BlockedValue = "X-Proxy-Error", "blocked-by-allowlist"

// answer is the proxy's own one-line response to req; the connection is closed after it.
func answer(req *http.Request, code int, line string) *http.Response {
	body := line + "\n"
	return &http.Response{
		StatusCode: code, Status: strconv.Itoa(code) + " " + http.StatusText(code),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req, Close: true,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body)),
	}
}

// hostAndPort splits host[:port] leniently for reporting a bad request; the port is def when
// missing and 0 when not a port.
func hostAndPort(hostport string, def int) (string, int) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), def
	}
	port, _ := allowlist.ParsePort(p)
	return h, port
}

// sourceOf is the request's source address.
func sourceOf(req *http.Request) netip.Addr {
	if cc := clientFrom(req.Context()); cc != nil {
		return cc.src
	}
	ap, err := netip.ParseAddrPort(req.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// debugLogger is goproxy's Logger on slog at debug level.
type debugLogger struct{ log *slog.Logger }

func (l debugLogger) Printf(format string, v ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("goproxy", "message", strings.TrimSpace(fmt.Sprintf(format, v...)))
	}
}
