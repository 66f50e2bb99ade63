package gitgateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The reverse proxy to the upstream: the gateway's credential added, the upstream's challenges, redirects and errors kept from the agent.

// forwardedHeaders are the only request headers of the client's that reach the upstream: those
// git's smart HTTP needs. It is an allow-list, not a deny-list, because the request carries the
// gateway's credential and any other header may steer the upstream or a front end before it:
// X-Original-URL, for one, makes IIS, Symfony or Laminas route a fetch to git-receive-pack.
var forwardedHeaders = []string{"Accept", "Accept-Encoding", "Content-Encoding", "Content-Type", "Git-Protocol", "User-Agent"}

// filterHeaders returns the forwardedHeaders of h, nothing else.
func filterHeaders(h http.Header) http.Header {
	out := make(http.Header, len(forwardedHeaders))
	for _, k := range forwardedHeaders {
		if v := h.Values(k); len(v) > 0 {
			out[k] = slices.Clone(v)
		}
	}
	return out
}

// rewrite points a matched request at the upstream with the gateway's credential and, of the
// client's headers, only forwardedHeaders.
func (h *handler) rewrite(pr *httputil.ProxyRequest) {
	suffix, service, _ := match(pr.In)
	u := h.upstream.JoinPath(suffix)
	u.RawQuery = ""
	if service != "" {
		u.RawQuery = url.Values{"service": {service}}.Encode()
	}
	pr.Out.URL = u
	pr.Out.Host = ""
	pr.Out.Header = filterHeaders(pr.Out.Header)
	pr.Out.SetBasicAuth(h.username, h.token)
}

// modifyResponse keeps the upstream's credential challenges, cookies and redirects from the
// client: a 401 would make git ask the agent for a credential, and a redirect would send it
// around the gateway.
func (h *handler) modifyResponse(resp *http.Response) error {
	for _, k := range []string{"Set-Cookie", "Www-Authenticate", "Proxy-Authenticate"} {
		resp.Header.Del(k)
	}
	req := resp.Request
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusProxyAuthRequired:
		h.log.Warn("upstream refused the gateway's credential", "status", code, "method", req.Method, "path", req.URL.Path)
		replaceResponse(resp, http.StatusBadGateway, fmt.Sprintf("the upstream repository refused the git gateway's credential (HTTP %d)\n", code))
	case code >= 300 && code < 400 && code != http.StatusNotModified:
		loc := resp.Header.Get("Location")
		h.log.Warn("upstream redirected; not followed", "status", code, "location", loc, "method", req.Method, "path", req.URL.Path)
		replaceResponse(resp, http.StatusBadGateway, fmt.Sprintf("the upstream repository redirected (HTTP %d); the git gateway does not follow redirects: configure its upstream with the final URL\n", code))
	case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, pathReceivePack):
		h.log.Info("git push forwarded", "status", code)
	case code >= 400:
		h.log.Warn("upstream answered with an error", "status", code, "method", req.Method, "path", req.URL.Path)
	}
	return nil
}

func replaceResponse(resp *http.Response, code int, msg string) {
	_ = resp.Body.Close()
	resp.StatusCode = code
	resp.Status = fmt.Sprintf("%d %s", code, http.StatusText(code))
	resp.Header = http.Header{
		"Content-Type":           {"text/plain; charset=utf-8"},
		"Content-Length":         {strconv.Itoa(len(msg))},
		"X-Content-Type-Options": {"nosniff"},
	}
	resp.Body = io.NopCloser(strings.NewReader(msg))
	resp.ContentLength = int64(len(msg))
	resp.TransferEncoding = nil
	resp.Uncompressed = false
}

// proxyError answers a request the upstream did not answer.
func (h *handler) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	var mbe *http.MaxBytesError
	if (st != nil && st.tooLarge.Load()) || errors.As(err, &mbe) {
		h.log.Warn("request body too large; upstream request aborted", "method", r.Method, "path", r.URL.Path, "max_bytes", h.maxBytes)
		textError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request exceeds %d bytes (--max-push-bytes)\n", h.maxBytes))
		return
	}
	if errors.Is(err, context.Canceled) {
		h.log.Info("client went away; upstream request aborted", "method", r.Method, "path", r.URL.Path)
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	h.log.Warn("upstream request failed", "method", r.Method, "path", r.URL.Path, "error", err.Error())
	textError(w, http.StatusBadGateway, "the git gateway could not reach the upstream repository\n")
}

func textError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
}
